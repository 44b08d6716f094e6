// Random crop and flip of a training batch on the GPU (lib/core/augment_formula.h): one thread
// per output value; the seed and step come from the step scalars in device memory, so the kernel
// is part of the step's CUDA graph.
//   in, out: (B, C, H, W)
#pragma once

#include <cuda_runtime.h>

#include "lib/backend/layer_kernel.h"
#include "lib/core/augment_formula.h"

namespace trainer::cuda {

void launch_augment(const AugmentSpec& spec, const float* in, float* out, int64_t batch, const StepScalars* s,
                    cudaStream_t stream);

}  // namespace trainer::cuda
