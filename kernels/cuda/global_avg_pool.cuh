// Global average pooling on the GPU: the mean of each (sample, channel) plane.
//   x, dx: (planes, spatial)  y, dy: (planes), planes = B * C
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace trainer::cuda {

// y = sum of the plane / spatial; one warp per plane, a fixed reduction order (deterministic).
// inner: 1 for planes of consecutive positions (B, C, S); C for channels last (B, S, C), where
// position j of plane (b, c) is element (b S + j) C + c.
void launch_global_avg_pool_forward(const float* x, float* y, int64_t planes, int64_t spatial, int64_t inner,
                                    cudaStream_t stream);
// dx = dy / spatial broadcast over the plane (overwrites).
void launch_global_avg_pool_backward(const float* dy, float* dx, int64_t planes, int64_t spatial,
                                     int64_t inner, cudaStream_t stream);

}  // namespace trainer::cuda
