#include "lib/dist/thread_world.h"

#include <algorithm>
#include <cstring>

#include "lib/core/error.h"

namespace trainer {

ThreadHub::ThreadHub(int size, std::string what, std::string description)
    : size_(size), what_(std::move(what)), description_(std::move(description)), slots_(size_t(size)) {}

void ThreadHub::throw_failed() const {
  throw WorldStopped("stopped: " + what_ + " " + std::to_string(failed_rank_) + " of " +
                     std::to_string(size_) + " failed: " + failure_);
}

void ThreadHub::barrier() {
  std::unique_lock<std::mutex> lock(mu_);
  if (failed_rank_ >= 0) throw_failed();
  const uint64_t gen = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen || failed_rank_ >= 0; });
  if (generation_ == gen) throw_failed();  // woken by a failure, not by the last arrival
}

void ThreadHub::fail(int rank, const std::string& message) noexcept {
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_rank_ >= 0) return;
    failed_rank_ = rank;
    try {
      failure_ = message;
    } catch (...) {
    }
    hooks.swap(hooks_);
  }
  // Waiters first: they throw WorldStopped and unwind. Then the hooks, outside the lock: a hook
  // may block (ncclCommAbort returns only once the aborted replica has unwound and destroyed the
  // CUDA graphs that captured its communicator), and that replica may be one of the waiters.
  cv_.notify_all();
  for (auto& h : hooks) try {
      h();
    } catch (...) {
    }
}

int ThreadHub::failed_rank() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_rank_;
}

std::string ThreadHub::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void ThreadHub::add_failure_hook(std::function<void()> hook) {
  std::unique_lock<std::mutex> lock(mu_);
  if (failed_rank_ < 0) {
    hooks_.push_back(std::move(hook));
    return;
  }
  lock.unlock();
  hook();  // joined after a failure: abort at once
}

template <typename T, typename Op>
void ThreadRank::reduce(T* x, int64_t n, Op op) {
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

void ThreadRank::all_reduce_sum(float* x, int64_t n) {
  reduce(x, n, [](float a, float b) { return a + b; });
}
void ThreadRank::all_reduce_sum(double* x, int64_t n) {
  reduce(x, n, [](double a, double b) { return a + b; });
}
void ThreadRank::all_reduce_max(uint64_t* x, int64_t n) {
  reduce(x, n, [](uint64_t a, uint64_t b) { return a > b ? a : b; });
}
void ThreadRank::all_reduce_or(uint32_t* x, int64_t n) {
  reduce(x, n, [](uint32_t a, uint32_t b) { return a | b; });
}

void ThreadRank::broadcast(void* x, size_t bytes, int root) {
  hub_.slot(rank_) = x;
  hub_.barrier();
  if (rank_ != root) std::memcpy(x, hub_.slot(root), bytes);
  hub_.barrier();
}

void ThreadRank::abort(int exit_code) {
  const std::string message = "aborted with exit code " + std::to_string(exit_code);
  hub_.fail(rank_, message);
  throw RuntimeError(hub_.what() + " " + std::to_string(rank_) + ": " + message);
}

}  // namespace trainer
