// The losses on float targets on the GPU (kernels/cpu/value_loss_cpu.cc is the reference; the
// formulas are lib/core/value_loss_formula.h's).
//   out, dout, targets: (B, K)  pos_weight: K floats or null  partials: K doubles
#pragma once

#include <cuda_runtime.h>

#include "lib/backend/layer_kernel.h"
#include "lib/core/value_loss_formula.h"

namespace trainer::cuda {

struct ValueLossArgs {
  ValueLoss formula = ValueLoss::mse;
  int64_t batch = 0, width = 1;
  float delta = 1.f, scale = 1.f;
  const float* pos_weight = nullptr;  // device, K values; null: 1
  bool binary_metrics = false;
};

// One block per output column walks the rows (a fixed thread-to-row map and a tree sum in
// shared memory, so the result is deterministic); the column's loss goes to partials[k], its
// metric sums (sums not null) are added to sums; a one-thread kernel then adds the partials to
// *loss_sum in column order and checks it for the non-finite guard (guard not null).
void launch_value_loss(const ValueLossArgs& a, const float* out, const float* targets, float* dout,
                       float* loss_sum, double* partials, StepScalars* guard, uint32_t guard_bit, float* sums,
                       cudaStream_t stream);

}  // namespace trainer::cuda
