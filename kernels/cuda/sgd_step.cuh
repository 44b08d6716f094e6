// SGD update over the flat parameter arena on the GPU (kernels/cpu/sgd_step.cc is the reference).
//   w, g, velocity: (n)  s: StepScalars in device memory (lr, step)
#pragma once

#include <cuda_runtime.h>

#include "lib/backend/backend.h"

namespace trainer::cuda {

void launch_sgd_step(const SgdHyper& h, float* w, const float* g, float* velocity, int64_t n, StepScalars* s,
                     cudaStream_t stream);

}  // namespace trainer::cuda
