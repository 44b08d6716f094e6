// Wall time since a point of the steady clock: the timings of logs and bench reports.
#pragma once

#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace trainer {

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

inline double ms_since(std::chrono::steady_clock::time_point t) { return 1e3 * seconds_since(t); }

// Seconds since this process started (exec), or -1 where the system does not say. Linux: the
// start time of /proc/self/stat (clock ticks since boot, so to 10 ms at the usual 100 a second)
// against CLOCK_BOOTTIME. It counts what happens before main: the dynamic loader and the shared
// libraries' static initializers (libcublasLt's took 130 ms where it was linked).
inline double seconds_since_process_start() {
  std::FILE* f = std::fopen("/proc/self/stat", "r");
  if (!f) return -1;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');  // the command's name may hold spaces and parentheses
  if (!p) return -1;
  unsigned long long start = 0;
  // After the name: state (field 3) ... starttime (field 22), the 20th field after the name.
  if (std::sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                  &start) != 1)
    return -1;
  const long ticks = sysconf(_SC_CLK_TCK);
  timespec now{};
  if (ticks <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) != 0) return -1;
  const double age = double(now.tv_sec) + 1e-9 * double(now.tv_nsec) - double(start) / double(ticks);
  return age >= 0 ? age : -1;
}

}  // namespace trainer
