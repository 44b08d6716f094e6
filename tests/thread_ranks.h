// `fit` over two ranks that are threads of this process (ThreadWorld), as the CPU data-parallel
// tests run it: each rank's result and error (empty: none); a failing rank stops the other.
#pragma once

#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lib/config/config.h"
#include "lib/dist/thread_world.h"
#include "lib/train/fit.h"

namespace trainer::test {

struct RankRuns {
  std::vector<FitResult> results;
  std::vector<std::string> errors;
};

inline RankRuns fit_on_two_thread_ranks(const Config& cfg, const FitOptions& fo) {
  ThreadHub hub(2, "rank", "test threads");
  RankRuns runs{std::vector<FitResult>(2), std::vector<std::string>(2)};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        ThreadRank comm(hub, r);
        FitOptions mine = fo;
        mine.comm = &comm;
        std::ostringstream out;
        runs.results[size_t(r)] = fit(cfg, mine, out);
      } catch (const std::exception& e) {
        runs.errors[size_t(r)] = e.what();
        hub.fail(r, e.what());
      }
    });
  for (auto& t : threads) t.join();
  return runs;
}

}  // namespace trainer::test
