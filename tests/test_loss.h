// A loss kernel from the registry on a backend, with its scratch from the backend's allocator, as
// the executor makes one (lib/model/executor.cc); for the CPU and the GPU tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lib/backend/backend.h"
#include "lib/backend/step_kernels.h"
#include "lib/losses/losses.h"

namespace trainer::test {

class TestLoss {
 public:
  // spec: backend and max_batch are filled in here.
  TestLoss(Backend& be, LossSpec spec, int64_t max_batch) : be_(be), spec_(std::move(spec)) {
    spec_.backend = &be;
    spec_.max_batch = max_batch;
    kernel_ = LossRegistry::global().make_kernel(be.name(), spec_);
    if (size_t bytes = kernel_->scratch_bytes()) {
      scratch_ = be.allocator().allocate(bytes, "test loss scratch");
      kernel_->bind(scratch_);
    }
  }
  // loss: a loss section in YAML ("nll", "{type: huber, delta: 0.5}"); width outputs a sample.
  TestLoss(Backend& be, const std::string& loss, int64_t width, int64_t max_batch,
           std::vector<int64_t> top_k = {})
      : TestLoss(be, loss_config(loss).spec(width, std::move(top_k)), max_batch) {}
  ~TestLoss() {
    if (scratch_) be_.allocator().deallocate(scratch_);
  }
  TestLoss(const TestLoss&) = delete;
  TestLoss& operator=(const TestLoss&) = delete;

  const LossSpec& spec() const { return spec_; }
  bool takes(DType t) const { return kernel_->takes(t); }
  // Backend memory throughout (host memory on the CPU).
  void run(const float* out, const void* targets, int64_t batch, float* dout, float* loss_sum,
           float* sums = nullptr, bool training = false, StepScalars* guard = nullptr) {
    run_typed(DType::f32, out, targets, batch, dout, loss_sum, sums, training, guard);
  }
  // out and dout of dtype t (LossKernel::takes).
  void run_typed(DType t, const void* out, const void* targets, int64_t batch, void* dout, float* loss_sum,
                 float* sums = nullptr, bool training = false, StepScalars* guard = nullptr) {
    LossRun r;
    r.dtype = t;
    r.out = out;
    r.targets = targets;
    r.batch = batch;
    r.dout = dout;
    r.loss_sum = loss_sum;
    r.guard = guard;
    r.guard_bit = kNonfiniteLoss;
    r.sums = sums;
    r.training = training;
    kernel_->run(r);
  }

 private:
  Backend& be_;
  LossSpec spec_;
  std::unique_ptr<LossKernel> kernel_;
  void* scratch_ = nullptr;
};

}  // namespace trainer::test
