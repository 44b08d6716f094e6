// position_embedding on the GPU (lib/layers/position_embedding.h; kernels/cpu/
// position_embedding_cpu.cc is the reference): y = x + P broadcast over the batch, and dP as the
// batch's sum of dy, a thread per element adding the samples in order (deterministic; adjacent
// threads read adjacent elements).  x, y, dy: (B, n)   P, dP: (n)
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/position_embedding.cuh"

namespace trainer::cuda {
namespace {

__global__ void position_embedding_forward_kernel(const float* x, const float* p, float* y, int64_t batch,
                                                  int64_t n) {
  for (int64_t i = global_index(); i < batch * n; i += grid_stride()) y[i] = x[i] + p[i % n];
}

__global__ void position_embedding_backward_kernel(const float* dy, float* dp, int64_t batch, int64_t n) {
  for (int64_t j = global_index(); j < n; j += grid_stride()) {
    float s = 0.f;
    for (int64_t b = 0; b < batch; ++b) s += dy[b * n + j];
    dp[j] = s;
  }
}

}  // namespace

void launch_position_embedding_forward(const float* x, const float* p, float* y, int64_t batch, int64_t n,
                                       cudaStream_t stream) {
  if (batch * n <= 0) return;
  position_embedding_forward_kernel<<<grid_for(batch * n), kThreads, 0, stream>>>(x, p, y, batch, n);
  CUDA_CHECK_LAUNCH();
}

void launch_position_embedding_backward(const float* dy, float* dp, float* dx, int64_t batch, int64_t n,
                                        cudaStream_t stream) {
  if (batch * n <= 0) return;
  position_embedding_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dy, dp, batch, n);
  CUDA_CHECK_LAUNCH();
  if (dx && dx != dy)
    CUDA_CHECK(cudaMemcpyAsync(dx, dy, size_t(batch * n) * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace trainer::cuda
