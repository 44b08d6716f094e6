// position_embedding on the GPU (lib/layers/position_embedding.h; kernels/cpu/
// position_embedding_cpu.cc is the reference): y = x + P broadcast over the batch, and dP as the
// batch's sum of dy, a thread per element adding the samples in order (deterministic; adjacent
// threads read adjacent elements).  x, y, dy: (B, n) of dtype t (f32, bf16, fp16; f32 arithmetic)
//   P, dP: (n) f32
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/position_embedding.cuh"

namespace trainer::cuda {
namespace {

template <class T>
__global__ void position_embedding_forward_kernel(const T* x, const float* p, T* y, int64_t batch,
                                                  int64_t n) {
  for (int64_t i = global_index(); i < batch * n; i += grid_stride())
    y[i] = from_f32<T>(to_f32(x[i]) + p[i % n]);
}

template <class T>
__global__ void position_embedding_backward_kernel(const T* dy, float* dp, int64_t batch, int64_t n) {
  for (int64_t j = global_index(); j < n; j += grid_stride()) {
    float s = 0.f;
    for (int64_t b = 0; b < batch; ++b) s += to_f32(dy[b * n + j]);
    dp[j] = s;
  }
}

}  // namespace

void launch_position_embedding_forward(DType t, const void* x, const float* p, void* y, int64_t batch,
                                       int64_t n, cudaStream_t stream) {
  if (batch * n <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    position_embedding_forward_kernel<T><<<grid_for(batch * n), kThreads, 0, stream>>>(
        static_cast<const T*>(x), p, static_cast<T*>(y), batch, n);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_position_embedding_backward(DType t, const void* dy, float* dp, void* dx, int64_t batch,
                                        int64_t n, cudaStream_t stream) {
  if (batch * n <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    position_embedding_backward_kernel<T>
        <<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(dy), dp, batch, n);
  });
  CUDA_CHECK_LAUNCH();
  if (dx && dx != dy)
    CUDA_CHECK(cudaMemcpyAsync(dx, dy, size_t(batch * n) * dtype_bytes(t), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace trainer::cuda
