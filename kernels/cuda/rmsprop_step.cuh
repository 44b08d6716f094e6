// RMSprop update over the flat parameter arena on the GPU (kernels/cpu/rmsprop_step.cc is the
// reference).  w, g, sq, buf, avg: (n)  s: StepScalars in device memory (lr)
#pragma once

#include <cuda_runtime.h>

#include "lib/backend/backend.h"

namespace trainer::cuda {

void launch_rmsprop_step(const RmspropHyper& h, float* w, const float* g, float* sq, float* buf, float* avg,
                         int64_t n, StepScalars* s, cudaStream_t stream);

}  // namespace trainer::cuda
