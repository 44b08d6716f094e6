// Global average pooling kernels (see global_avg_pool.cuh). Forward: each lane of a warp sums a
// strided part of its plane, then a butterfly (warp_sum) combines the lanes: coalesced reads,
// and the same order every run. The divisor is the plane size, as oneDNN's average pooling over
// a window covering the whole plane divides by it.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/global_avg_pool.cuh"
#include "kernels/cuda/launch.cuh"

namespace trainer::cuda {
namespace {

constexpr int kWarp = 32;

// Plane p's position j is x[plane_at(p) + j * inner]: inner 1 for (B, C, S), C for (B, S, C).
__device__ __forceinline__ int64_t plane_at(int64_t p, int64_t spatial, int64_t inner) {
  return p / inner * spatial * inner + p % inner;
}

__global__ void global_avg_pool_forward_kernel(const float* x, float* y, int64_t planes, int64_t spatial,
                                               int64_t inner) {
  const int lane = int(threadIdx.x) % kWarp;
  const int64_t warps = grid_stride() / kWarp;
  // Every lane of a warp takes the same planes, so the shuffles see the whole warp.
  for (int64_t p = global_index() / kWarp; p < planes; p += warps) {
    const float* xp = x + plane_at(p, spatial, inner);
    float sum = 0.f;
    for (int64_t j = lane; j < spatial; j += kWarp) sum += xp[j * inner];
    sum = warp_sum(sum);
    if (lane == 0) y[p] = sum / float(spatial);
  }
}

__global__ void global_avg_pool_backward_kernel(const float* dy, float* dx, int64_t planes, int64_t spatial,
                                                int64_t inner) {
  const int64_t n = planes * spatial;
  for (int64_t i = global_index(); i < n; i += grid_stride())  // i's plane: (i / (S inner)) inner + i % inner
    dx[i] = dy[i / (spatial * inner) * inner + i % inner] / float(spatial);
}

}  // namespace

void launch_global_avg_pool_forward(const float* x, float* y, int64_t planes, int64_t spatial, int64_t inner,
                                    cudaStream_t stream) {
  if (planes <= 0 || spatial <= 0) return;
  global_avg_pool_forward_kernel<<<grid_for(planes * kWarp), kThreads, 0, stream>>>(x, y, planes, spatial,
                                                                                    inner);
  CUDA_CHECK_LAUNCH();
}

void launch_global_avg_pool_backward(const float* dy, float* dx, int64_t planes, int64_t spatial,
                                     int64_t inner, cudaStream_t stream) {
  const int64_t n = planes * spatial;
  if (n <= 0) return;
  global_avg_pool_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dy, dx, planes, spatial, inner);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
