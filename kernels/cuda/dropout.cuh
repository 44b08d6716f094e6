// Dropout masks on the GPU, identical to the CPU's (lib/core/counter_rng.h): element i draws
// counter_uniform(seed, dropout_stream(step, layer), i / channel_size) and survives when the draw
// is >= rate.  x, y, dy, dx: (n) of dtype t, mask: (n) f32, with n = B * C * channel_size
#pragma once

#include <cuda_runtime.h>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

// seed and step are read from `s` in device memory, so a captured step replays with new masks.
void launch_dropout_forward(DType t, const void* x, void* y, float* mask, int64_t n, int64_t channel_size,
                            float rate, const StepScalars* s, int layer_index, cudaStream_t stream);
void launch_dropout_backward(DType t, const void* dy, const float* mask, void* dx, int64_t n,
                             cudaStream_t stream);

}  // namespace trainer::cuda
