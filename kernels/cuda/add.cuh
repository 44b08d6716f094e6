// Element-wise sums on the GPU: the add layer's forward (y = a + b, then y += c ...) and the
// gradient accumulation of a tensor with several consumers (Backend::accumulate).
//   a, b, y, dst, src: (n)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace trainer::cuda {

// y = a + b (y may be a or b).
void launch_add(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);
// dst += src.
void launch_accumulate(float* dst, const float* src, int64_t n, cudaStream_t stream);

}  // namespace trainer::cuda
