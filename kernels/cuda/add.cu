// Element-wise sums (see add.cuh): grid-stride loops, one element per thread per step; the same
// order of additions as the CPU's (input 1 first), so results match it bit for bit.
#include "kernels/cuda/add.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"

namespace trainer::cuda {
namespace {

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = a[i] + b[i];
}

}  // namespace

void launch_add(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, b, y, n);
  CUDA_CHECK_LAUNCH();
}

void launch_accumulate(float* dst, const float* src, int64_t n, cudaStream_t stream) {
  launch_add(dst, src, dst, n, stream);
}

}  // namespace trainer::cuda
