// LossKernel: a backend's implementation of a loss on float targets (lib/losses registers which
// losses exist; kernels/cpu and kernels/cuda register a kernel for them per backend, as layers'
// kernels are). Made once when the executor plans its steps, with the largest batch it will see:
// whatever memory it needs is taken then, never inside a step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "lib/backend/layer_kernel.h"
#include "lib/core/value_loss_formula.h"

namespace trainer {

class Backend;

struct ValueLossSpec {
  Backend* backend = nullptr;
  ValueLoss formula = ValueLoss::mse;
  int64_t width = 1;      // outputs per sample = target values per sample (K)
  int64_t max_batch = 1;  // the largest batch run() will be given
  float delta = 1.f;      // huber's
  float scale = 1.f;      // multiplies every element's loss and gradient (smooth_l1: 1 / beta)
  // bce: PyTorch's pos_weight, one per output (empty: 1 for every output).
  std::vector<float> pos_weight;
  // The metric sums per output column (lib/core/value_loss_formula.h): binary counts and score
  // histograms, or regression sums.
  bool binary_metrics = false;
  int64_t metric_floats() const { return width * (binary_metrics ? kBinarySums : kRegressionSums); }
};

class LossKernel {
 public:
  virtual ~LossKernel() = default;
  // Backend memory the kernel needs between launches (its partial sums), which the executor
  // takes from its plan before the first step and hands to bind(); 0: none.
  virtual size_t scratch_bytes() const { return 0; }
  virtual void bind(void* scratch) { (void)scratch; }
  // out, dout: (batch, K) f32 backend memory; targets: (batch, K). Writes dout = d(mean loss)/d(out)
  // (the mean over batch * K elements, as PyTorch's reduction 'mean') and adds the batch's summed
  // per-sample loss (the mean over K of each row's elements) to *loss_sum, so that loss_sum / samples
  // is the mean. guard not null: ORs guard_bit into guard->nonfinite when *loss_sum is not finite
  // afterwards. sums not null: adds the batch's metric sums (spec.metric_floats() floats).
  virtual void run(const float* out, const float* targets, int64_t batch, float* dout, float* loss_sum,
                   StepScalars* guard, uint32_t guard_bit, float* sums) = 0;
};

using LossKernelFactory = std::function<std::unique_ptr<LossKernel>(const ValueLossSpec&)>;

}  // namespace trainer
