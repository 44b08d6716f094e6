// Element-wise sums on the GPU, in the activations' dtype (f32, bf16 or fp16; the sum is formed in
// f32): the add layer's forward (y = a + b, then y += c ...) and its input gradients.
//   a, b, y, dst, src: (n) of dtype t
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

// y = a + b (y may be a or b); relu: y = relu(a + b), as the relu kernel computes it on the sum.
void launch_add(DType t, const void* a, const void* b, void* y, int64_t n, cudaStream_t stream,
                bool relu = false);

}  // namespace trainer::cuda
