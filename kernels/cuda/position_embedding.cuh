// position_embedding on the GPU (position_embedding.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace trainer::cuda {

// y = x + p (p broadcast over the batch).  x, y: (batch, n)  p: (n)
void launch_position_embedding_forward(const float* x, const float* p, float* y, int64_t batch, int64_t n,
                                       cudaStream_t stream);
// dp = the batch's sum of dy (overwritten); dx = dy where dx is not null.
void launch_position_embedding_backward(const float* dy, float* dp, float* dx, int64_t batch, int64_t n,
                                        cudaStream_t stream);

}  // namespace trainer::cuda
