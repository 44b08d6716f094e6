#include "datasets/row_workers.h"

#include <algorithm>

namespace trainer {

RowWorkers::RowWorkers(int threads) : errors_(size_t(std::max(1, threads))) {
  try {
    for (int k = 1; k < std::max(1, threads); ++k) helpers_.emplace_back([this, k] { helper_loop(k); });
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : helpers_) t.join();
    throw;
  }
}

RowWorkers::~RowWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : helpers_) t.join();
}

void RowWorkers::run_part(int part) {
  const int64_t n = threads();
  const int64_t begin = rows_ * part / n, end = rows_ * (part + 1) / n;
  try {
    if (begin < end) (*body_)(begin, end);
  } catch (...) {
    errors_[size_t(part)] = std::current_exception();
  }
}

void RowWorkers::helper_loop(int part) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || round_ != seen; });
    if (stop_) return;
    seen = round_;
    lock.unlock();
    run_part(part);
    lock.lock();
    if (--busy_ == 0) done_.notify_one();
  }
}

void RowWorkers::run(int64_t rows, const std::function<void(int64_t, int64_t)>& body) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    rows_ = rows;
    body_ = &body;
    std::fill(errors_.begin(), errors_.end(), nullptr);
    busy_ = int(helpers_.size());
    ++round_;
  }
  wake_.notify_all();
  run_part(0);
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return busy_ == 0; });
  }
  for (const auto& e : errors_)
    if (e) std::rethrow_exception(e);
}

}  // namespace trainer
