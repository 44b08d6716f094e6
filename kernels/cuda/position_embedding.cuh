// position_embedding on the GPU (position_embedding.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

// y = x + p (p broadcast over the batch).  x, y: (batch, n) of dtype t  p: (n) f32
void launch_position_embedding_forward(DType t, const void* x, const float* p, void* y, int64_t batch,
                                       int64_t n, cudaStream_t stream);
// dp = the batch's sum of dy (overwritten); dx = dy where dx is not null.
void launch_position_embedding_backward(DType t, const void* dy, float* dp, void* dx, int64_t batch,
                                        int64_t n, cudaStream_t stream);

}  // namespace trainer::cuda
