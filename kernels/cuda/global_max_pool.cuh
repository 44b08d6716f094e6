// Global max pooling on the GPU: the maximum of each (sample, channel) plane and where it is.
//   x, dx: (planes, spatial)  y, dy, argmax: (planes), planes = B * C
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace trainer::cuda {

// y = the plane's maximum, argmax = its first position; one warp per plane.
// inner: 1 for (B, C, S), C for channels last (B, S, C) (global_avg_pool.cuh).
void launch_global_max_pool_forward(const float* x, float* y, int32_t* argmax, int64_t planes,
                                    int64_t spatial, int64_t inner, cudaStream_t stream);
// dx = dy at argmax, 0 elsewhere (overwrites).
void launch_global_max_pool_backward(const float* dy, const int32_t* argmax, float* dx, int64_t planes,
                                     int64_t spatial, int64_t inner, cudaStream_t stream);

}  // namespace trainer::cuda
