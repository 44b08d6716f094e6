// Strided row copies for concat (see concat.cuh): a grid-stride loop over rows * width elements.
#include "kernels/cuda/concat.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"

namespace trainer::cuda {
namespace {

__global__ void copy_rows_kernel(const float* src, int64_t src_stride, float* dst, int64_t dst_stride,
                                 int64_t rows, int64_t width, bool accumulate) {
  const int64_t n = rows * width;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const int64_t r = i / width, c = i % width;
    const float v = src[r * src_stride + c];
    float& d = dst[r * dst_stride + c];
    d = accumulate ? d + v : v;
  }
}

}  // namespace

void launch_copy_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t rows,
                      int64_t width, bool accumulate, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return;
  copy_rows_kernel<<<grid_for(rows * width), kThreads, 0, stream>>>(src, src_stride, dst, dst_stride, rows,
                                                                    width, accumulate);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
