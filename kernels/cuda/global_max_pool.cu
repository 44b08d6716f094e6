// Global max pooling kernels (see global_max_pool.cuh). Forward: each lane of a warp scans a
// strided part of its plane keeping (max, first index), then a butterfly combines the lanes
// (larger value, or the same value at a smaller index): the gradient goes to the first maximum,
// as on the CPU.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/global_max_pool.cuh"
#include "kernels/cuda/launch.cuh"

namespace trainer::cuda {
namespace {

constexpr int kWarp = 32;

// As global_avg_pool.cu: plane p's position j is x[plane_at(p) + j * inner].
__device__ __forceinline__ int64_t plane_at(int64_t p, int64_t spatial, int64_t inner) {
  return p / inner * spatial * inner + p % inner;
}

__global__ void global_max_pool_forward_kernel(const float* x, float* y, int32_t* argmax, int64_t planes,
                                               int64_t spatial, int64_t inner) {
  const int lane = int(threadIdx.x) % kWarp;
  const int64_t warps = grid_stride() / kWarp;
  for (int64_t p = global_index() / kWarp; p < planes; p += warps) {
    const float* xp = x + plane_at(p, spatial, inner);
    float best = -INFINITY;
    int32_t at = int32_t(spatial);
    for (int64_t j = lane; j < spatial; j += kWarp)
      if (xp[j * inner] > best || at == int32_t(spatial)) best = xp[j * inner], at = int32_t(j);
    for (int o = 16; o > 0; o >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, best, o);
      const int32_t other_at = __shfl_xor_sync(0xffffffffu, at, o);
      if (other > best || (other == best && other_at < at)) best = other, at = other_at;
    }
    if (lane == 0) {
      y[p] = best;
      argmax[p] = at;
    }
  }
}

__global__ void global_max_pool_backward_kernel(const float* dy, const int32_t* argmax, float* dx,
                                                int64_t planes, int64_t spatial, int64_t inner) {
  const int64_t n = planes * spatial;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const int64_t p = i / (spatial * inner) * inner + i % inner, j = i % (spatial * inner) / inner;
    dx[i] = j == argmax[p] ? dy[p] : 0.f;
  }
}

}  // namespace

void launch_global_max_pool_forward(const float* x, float* y, int32_t* argmax, int64_t planes,
                                    int64_t spatial, int64_t inner, cudaStream_t stream) {
  if (planes <= 0 || spatial <= 0) return;
  global_max_pool_forward_kernel<<<grid_for(planes * kWarp), kThreads, 0, stream>>>(x, y, argmax, planes,
                                                                                    spatial, inner);
  CUDA_CHECK_LAUNCH();
}

void launch_global_max_pool_backward(const float* dy, const int32_t* argmax, float* dx, int64_t planes,
                                     int64_t spatial, int64_t inner, cudaStream_t stream) {
  const int64_t n = planes * spatial;
  if (n <= 0) return;
  global_max_pool_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dy, argmax, dx, planes, spatial,
                                                                        inner);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
