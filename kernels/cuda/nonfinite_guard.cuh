// The non-finite guard on the GPU (lib/backend/backend.h; kernels/cpu/nonfinite_guard.cc is the
// reference). Both launchers read and write only device memory, so they are captured with the
// rest of the step as a CUDA graph and replayed; nothing waits for the device.
//   x: (n)  s: StepScalars in device memory  loss_sum: the epoch's float sum  record: device memory
#pragma once

#include <cuda_runtime.h>

#include "lib/backend/backend.h"

namespace trainer::cuda {

// ORs `bit` into s->nonfinite when any of x[0, n) is NaN or infinite.
void launch_check_finite(const float* x, int64_t n, uint32_t bit, StepScalars* s, cudaStream_t stream);
// Adds s->batch_loss to *loss_sum when s->nonfinite is 0, else records the step in *record.
void launch_commit_step(const StepScalars* s, int64_t batch, float* loss_sum, NonfiniteRecord* record,
                        cudaStream_t stream);

}  // namespace trainer::cuda
