// ThreadWorld: a Communicator whose ranks are threads of one process: the replicas of
// `--device gpu:0,1` (lib/train/fit_replicas.h, one thread per GPU) and the CPU tests of the
// data-parallel paths (tests/test_data_parallel.cc), which then run without mpirun.
//
// Every collective meets at a barrier of the hub all ranks share; sums are taken in rank order by
// every rank, so all ranks end with the same bits, as MPI's all-reduce gives them. A rank that
// fails calls ThreadHub::fail(): the failure hooks run (they abort the device collectives, so no
// replica stays blocked on its GPU), and every rank waiting in a collective, now or later, throws
// WorldStopped naming the failed rank, instead of waiting forever.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "lib/dist/communicator.h"

namespace trainer {

class ThreadHub {
 public:
  // `what` names a rank in messages and descriptions ("replica"); `description` is the world's.
  ThreadHub(int size, std::string what, std::string description);
  int size() const { return size_; }
  const std::string& what() const { return what_; }
  const std::string& description() const { return description_; }

  // Returns when every rank has arrived; throws WorldStopped when a rank failed (before or while
  // waiting).
  void barrier();
  // Per-rank pointers the collectives exchange between two barriers.
  void*& slot(int rank) { return slots_[size_t(rank)]; }

  // Rank `rank` failed with `message`: the first failure is kept, the failure hooks run once, and
  // every waiter wakes. Safe from any thread; later calls only return.
  void fail(int rank, const std::string& message) noexcept;
  // The first rank that failed (-1: none) and its message.
  int failed_rank() const;
  std::string failure() const;
  void add_failure_hook(std::function<void()> hook);

 private:
  [[noreturn]] void throw_failed() const;  // with mu_ held

  const int size_;
  const std::string what_, description_;
  std::vector<void*> slots_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  int failed_rank_ = -1;
  std::string failure_;
  std::vector<std::function<void()>> hooks_;
};

class ThreadRank final : public Communicator {
 public:
  ThreadRank(ThreadHub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_.size(); }
  int local_rank() const override { return rank_; }
  int local_size() const override { return hub_.size(); }
  std::string description() const override { return hub_.description(); }
  void all_reduce_sum(float* x, int64_t n) override;
  void all_reduce_sum(double* x, int64_t n) override;
  void all_reduce_max(uint64_t* x, int64_t n) override;
  void all_reduce_or(uint32_t* x, int64_t n) override;
  void broadcast(void* x, size_t bytes, int root) override;
  // Marks this rank failed (waking the others) and throws RuntimeError: a thread cannot end the
  // process for its siblings.
  [[noreturn]] void abort(int exit_code) override;
  void add_failure_hook(std::function<void()> hook) override { hub_.add_failure_hook(std::move(hook)); }

 private:
  template <typename T, typename Op>
  void reduce(T* x, int64_t n, Op op);

  ThreadHub& hub_;
  const int rank_;
};

}  // namespace trainer
