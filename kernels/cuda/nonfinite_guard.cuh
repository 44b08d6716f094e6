// The non-finite guard on the GPU (lib/backend/step_kernels.h; kernels/cpu/nonfinite_guard.cc is the
// reference). Both launchers read and write only device memory, so they are captured with the
// rest of the step as a CUDA graph and replayed; nothing waits for the device.
//   x: (n)  s: StepScalars in device memory  loss_sum: the epoch's float sum  record: device memory
#pragma once

#include <cuda_runtime.h>

#include "lib/backend/step_kernels.h"

namespace trainer::cuda {

// ORs `bit` into s->nonfinite when any of x[0, n) is NaN or infinite.
void launch_check_finite(const float* x, int64_t n, uint32_t bit, StepScalars* s, cudaStream_t stream);
// Adds s->batch_loss to *loss_sum when s->nonfinite is 0, else records the step in *record.
void launch_commit_step(const StepScalars* s, int64_t batch, float* loss_sum, NonfiniteRecord* record,
                        cudaStream_t stream);

#ifdef __CUDACC__
// The weight check inside an optimizer kernel (Backend::optimizer_checks_weights): `bad` is
// whether this thread saw a non-finite weight after its updates (or, on a skipped step, in the
// weights as they are); a block ORs kNonfiniteWeights once. Every thread of the block must call it.
__device__ __forceinline__ void flag_nonfinite_weights(bool bad, StepScalars* s) {
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr(&s->nonfinite, kNonfiniteWeights);
}
#endif

}  // namespace trainer::cuda
