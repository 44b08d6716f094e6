// RowWorkers: helper threads that share a loop over rows with the calling thread and sleep on a
// condition variable between loops. The batch loader splits a large batch's rows over them.
//
// Why not OpenMP: an OpenMP team busy-waits between parallel regions (GOMP spins ~300,000 times
// before it sleeps), and a loader that fills a batch every GPU step keeps its helpers spinning
// most of the time (two GPU replicas' loaders: 16 cores), which costs every batch dearly wherever
// those cores are not free (other processes, a CPU quota, ctest on 2 cores). 512 CIFAR rows on 2
// threads, the consumer taking a batch every 1 ms (scripts/loader_bench.cc THREADS=2 PACE=1000):
// idle 2-core machine, OpenMP 1.08 ms a batch for 1.37-1.45 ms of CPU time, these 1.09-1.19 ms
// for 0.70; the same machine busy with another build, OpenMP 2.8-5.6 ms a batch, these 1.7-2.0.
// The price: waking the helpers, ~50 us a batch (filled back to back: 0.34 -> 0.40 ms).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace trainer {

class RowWorkers {
 public:
  // threads >= 1: the caller and threads - 1 helpers, started here and kept until destruction.
  explicit RowWorkers(int threads);
  ~RowWorkers();  // wakes and joins the helpers
  RowWorkers(const RowWorkers&) = delete;
  RowWorkers& operator=(const RowWorkers&) = delete;

  int threads() const { return int(helpers_.size()) + 1; }
  // Runs body(begin, end) over [0, rows) cut into threads() contiguous parts (part 0 on the
  // caller, part k on helper k), and returns once every part is done. An exception thrown by a
  // part is rethrown here (the first part's in part order), after all parts ended.
  void run(int64_t rows, const std::function<void(int64_t, int64_t)>& body);

 private:
  void helper_loop(int part);
  void run_part(int part);

  std::mutex mu_;
  std::condition_variable wake_, done_;
  uint64_t round_ = 0;  // run() calls so far; a helper works once per round
  int busy_ = 0;        // helpers still working on this round
  bool stop_ = false;
  int64_t rows_ = 0;
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  std::vector<std::exception_ptr> errors_;  // per part
  std::vector<std::thread> helpers_;        // last: they start once everything above exists
};

}  // namespace trainer
