// Per-channel bias for dense and conv2d on the GPU.
//   y, dy: (B, F, spatial) (spatial = 1 for dense, OH*OW for conv2d)  bias, dbias: (F)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace trainer::cuda {

// y += bias (broadcast over batch and spatial positions).
void launch_bias_add(float* y, const float* bias, int64_t batch, int64_t channels, int64_t spatial,
                     cudaStream_t stream);
// dbias = sum over batch and spatial of dy (overwrites). Deterministic: fixed reduction order.
void launch_bias_grad(const float* dy, float* dbias, int64_t batch, int64_t channels, int64_t spatial,
                      cudaStream_t stream);

}  // namespace trainer::cuda
