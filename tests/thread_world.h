// ThreadWorld: a Communicator whose ranks are threads of the test process, so the data-parallel
// code paths (gradient all-reduce, metric sums, broadcasts) run in the CPU suite without mpirun.
// Each collective meets at a barrier; sums are taken in rank order by every rank, so all ranks end
// with the same bits, as MPI's all-reduce gives them.
#pragma once

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "lib/dist/communicator.h"

namespace trainer::test {

class ThreadHub {
 public:
  explicit ThreadHub(int size) : size_(size), slots_(size_t(size)) {}
  int size() const { return size_; }
  void barrier() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t gen = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != gen; });
  }
  void*& slot(int rank) { return slots_[size_t(rank)]; }

 private:
  const int size_;
  std::vector<void*> slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

class ThreadRank final : public Communicator {
 public:
  ThreadRank(ThreadHub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_.size(); }
  int local_rank() const override { return rank_; }
  std::string description() const override { return "test threads"; }
  void all_reduce_sum(float* x, int64_t n) override {
    reduce(x, n, [](float a, float b) { return a + b; });
  }
  void all_reduce_sum(double* x, int64_t n) override {
    reduce(x, n, [](double a, double b) { return a + b; });
  }
  void all_reduce_max(uint64_t* x, int64_t n) override {
    reduce(x, n, [](uint64_t a, uint64_t b) { return a > b ? a : b; });
  }
  void all_reduce_or(uint32_t* x, int64_t n) override {
    reduce(x, n, [](uint32_t a, uint32_t b) { return a | b; });
  }
  void broadcast(void* x, size_t bytes, int root) override {
    hub_.slot(rank_) = x;
    hub_.barrier();
    if (rank_ != root) std::memcpy(x, hub_.slot(root), bytes);
    hub_.barrier();
  }
  [[noreturn]] void abort(int exit_code) override { throw std::runtime_error("ThreadRank::abort"); }

 private:
  template <typename T, typename Op>
  void reduce(T* x, int64_t n, Op op) {
    hub_.slot(rank_) = x;
    hub_.barrier();
    std::vector<T> out(static_cast<const T*>(hub_.slot(0)), static_cast<const T*>(hub_.slot(0)) + n);
    for (int r = 1; r < hub_.size(); ++r) {
      const T* other = static_cast<const T*>(hub_.slot(r));
      for (int64_t i = 0; i < n; ++i) out[size_t(i)] = op(out[size_t(i)], other[i]);
    }
    hub_.barrier();  // every rank has read every input
    std::copy(out.begin(), out.end(), x);
  }

  ThreadHub& hub_;
  const int rank_;
};

}  // namespace trainer::test
