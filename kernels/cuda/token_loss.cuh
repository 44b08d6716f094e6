// The loss over every position of a sequence on the GPU (LossSpec::positions > 1; the CPU
// reference is cpu::token_loss in kernels/cpu/classification_loss.cc): cross-entropy on logits,
// the mean over the labels that are not ignore_index.
//   out, dout: (rows, C) of dtype t (f32, bf16, fp16; f32 arithmetic), row r at r * pitch
//   (pitch >= C; dout's elements past C are left as they are)  labels: (rows)
//   rows = batch * positions
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "lib/backend/layer_kernel.h"
#include "lib/backend/step_kernels.h"

namespace trainer::cuda {

// Device scratch: the labels counted, then one loss and one hit flag per row (the row's loss as
// a float, negative - 1 when its argmax misses), summed in row order by the last kernel.
struct TokenLossScratch {
  int counted;
  int pad;
};
inline size_t token_loss_scratch_bytes(int64_t max_rows) {
  return sizeof(TokenLossScratch) + size_t(max_rows) * sizeof(float);
}

// dout = d(mean loss)/d(out); *loss_sum += the mean times `batch`; guard: guard_bit ORed into
// guard->nonfinite when *loss_sum is not finite afterwards; sums (not null): the correct
// argmaxes and the labels counted added to sums[0], sums[1]. Deterministic.
void launch_token_loss(DType t, const void* out, const int32_t* labels, int64_t rows, int64_t classes,
                       int64_t pitch, int32_t ignore, int64_t batch, void* dout, float* loss_sum,
                       TokenLossScratch* scratch, cudaStream_t stream, StepScalars* guard, uint32_t guard_bit,
                       float* sums);

}  // namespace trainer::cuda
