// The copies of concat on the GPU: `rows` rows of `width` floats from src (rows `src_stride`
// apart) to dst (rows `dst_stride` apart), overwriting or adding. Forward: x_k -> its slice of
// each sample of y; backward: the slice of dy -> dx_k.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace trainer::cuda {

void launch_copy_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t rows,
                      int64_t width, bool accumulate, cudaStream_t stream);

}  // namespace trainer::cuda
