// RowWorkers: every row once, in contiguous parts, over repeated runs; errors reach the caller.
#include <atomic>
#include <catch2/catch.hpp>
#include <stdexcept>
#include <vector>

#include "datasets/row_workers.h"

using namespace trainer;

TEST_CASE("RowWorkers cover every row exactly once in contiguous parts, run after run", "[datasets]") {
  for (const int threads : {1, 2, 3, 8}) {
    RowWorkers w(threads);
    CHECK(w.threads() == threads);
    for (const int64_t rows : {int64_t(0), int64_t(1), int64_t(5), int64_t(7), int64_t(1000)}) {
      INFO(threads << " threads, " << rows << " rows");
      std::vector<std::atomic<int>> hits(static_cast<size_t>(rows));
      std::atomic<int> parts{0};
      for (int round = 0; round < 3; ++round)
        w.run(rows, [&](int64_t begin, int64_t end) {
          REQUIRE(begin < end);
          ++parts;
          for (int64_t r = begin; r < end; ++r) ++hits[size_t(r)];
        });
      for (const auto& h : hits) CHECK(h.load() == 3);
      CHECK(parts.load() == 3 * int(std::min<int64_t>(rows, threads)));
    }
  }
}

TEST_CASE("RowWorkers rethrow a part's error after every part ended, and keep working", "[datasets]") {
  RowWorkers w(4);
  std::atomic<int> ended{0};
  CHECK_THROWS_WITH(w.run(400,
                          [&](int64_t begin, int64_t) {
                            ++ended;
                            if (begin >= 200) throw std::runtime_error("part at " + std::to_string(begin));
                          }),
                    "part at 200");  // the first failing part in part order
  CHECK(ended.load() == 4);
  int64_t sum = 0;
  std::atomic<int64_t> total{0};
  w.run(400, [&](int64_t begin, int64_t end) { total += end - begin; });
  sum = total.load();
  CHECK(sum == 400);
}
