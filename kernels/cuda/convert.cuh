// Backend::convert on the GPU: dst = src or dst += src, i < n, between f32, bf16 and fp16 (the sum
// formed in f32, rounded to nearest even); also the sum of the gradients of a tensor with several
// consumers (f32 -> f32 or bf16 -> bf16 with accumulate).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

void launch_convert(void* dst, DType dst_type, const void* src, DType src_type, int64_t n, bool accumulate,
                    cudaStream_t stream);
// dst = src * (*scale) rounded to dst_type (scale: one float of device memory, read when the kernel
// runs; null: 1), i < n: a replica's weighted gradients narrowed for a compressed all-reduce.
void launch_convert_scaled(void* dst, DType dst_type, const float* src, const float* scale, int64_t n,
                           cudaStream_t stream);

}  // namespace trainer::cuda
