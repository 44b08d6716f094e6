// Wall time since a point of the steady clock: the timings of logs and bench reports.
#pragma once

#include <chrono>

namespace trainer {

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

inline double ms_since(std::chrono::steady_clock::time_point t) { return 1e3 * seconds_since(t); }

}  // namespace trainer
