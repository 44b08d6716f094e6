// Bias add and bias gradient. The gradient uses one block per channel: each thread sums a
// strided subset of the (batch x spatial) values, then a fixed-shape tree in shared memory
// combines them, so the result is the same every run (no atomics).
//   y, dy: (B, F, S)  bias, dbias: (F)
#include "kernels/cuda/bias.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"

namespace trainer::cuda {
namespace {

__global__ void bias_add_kernel(float* y, const float* bias, int64_t n, int64_t channels, int64_t spatial) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] += bias[(i / spatial) % channels];
}

__global__ void bias_grad_kernel(const float* dy, float* dbias, int64_t batch, int64_t channels,
                                 int64_t spatial) {
  __shared__ float partial[kThreads];
  const int64_t f = blockIdx.x;
  const int64_t per_channel = batch * spatial;
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < per_channel; j += blockDim.x) {
    const int64_t b = j / spatial, s = j % spatial;
    sum += dy[(b * channels + f) * spatial + s];
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) dbias[f] = partial[0];
}

}  // namespace

void launch_bias_add(float* y, const float* bias, int64_t batch, int64_t channels, int64_t spatial,
                     cudaStream_t stream) {
  const int64_t n = batch * channels * spatial;
  if (n <= 0) return;
  bias_add_kernel<<<grid_for(n), kThreads, 0, stream>>>(y, bias, n, channels, spatial);
  CUDA_CHECK_LAUNCH();
}

void launch_bias_grad(const float* dy, float* dbias, int64_t batch, int64_t channels, int64_t spatial,
                      cudaStream_t stream) {
  if (channels <= 0) return;
  bias_grad_kernel<<<unsigned(channels), kThreads, 0, stream>>>(dy, dbias, batch, channels, spatial);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
