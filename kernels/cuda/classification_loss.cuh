// nll and sparse categorical crossentropy on the GPU (kernels/cpu/classification_loss.cc is the
// reference).  out, dout: (B, C)  labels: (B)  loss_sum: one float in device memory
#pragma once

#include <cuda_runtime.h>

#include "lib/backend/loss_kernel.h"

namespace trainer::cuda {

// Device memory the loss kernel's blocks sum through (each ClassificationLossCuda keeps one in
// its scratch, zeroed when bound): each
// block's partial sum, and how many blocks have arrived (reset to 0 by the last).
constexpr int kLossMaxBlocks = 256;
struct LossScratch {
  double partials[kLossMaxBlocks];
  unsigned arrived;
};

// dout = d(mean loss)/d(out); *loss_sum += the batch's summed loss. Deterministic (a fixed order
// of sums for a given batch).
// smoothing: label smoothing (LossSpec). In the same pass:
// guard not null: guard_bit ORed into guard->nonfinite when the loss sum is not finite;
// confusion not null: one added at (label, argmax of the row) per row (as
// kernels/cpu/confusion_accumulate.cc). weights not null: C class weights in device memory, each row's loss
// and gradient times its label's (LossSpec::class_weights).
void launch_classification_loss(ClassScores kind, const float* out, const int32_t* labels, int64_t batch,
                                int64_t classes, float* dout, float* loss_sum, float smoothing,
                                LossScratch* scratch, cudaStream_t stream, StepScalars* guard = nullptr,
                                uint32_t guard_bit = 0, float* confusion = nullptr,
                                const float* weights = nullptr);

}  // namespace trainer::cuda
