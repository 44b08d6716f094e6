// The cores this process may run on: its affinity mask (taskset, a cgroup's cpuset, or mpirun,
// which binds each of 2 or fewer ranks to one core unless told --bind-to none), else every online
// core; at least 1. std::thread::hardware_concurrency counts the machine's, not ours.
#pragma once

#include <sched.h>

#include <algorithm>
#include <thread>

namespace trainer {

inline int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, int(std::thread::hardware_concurrency()));
}

}  // namespace trainer
