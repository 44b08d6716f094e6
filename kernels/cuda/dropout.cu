// Dropout forward/backward with counter-based masks: the formula the CPU uses
// (lib/core/dropout_formula.h), a pure function of (seed, step, layer, index), so the GPU draws
// exactly the CPU's mask and keeps no RNG state.
//   x, y, mask, dy, dx: (n)
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dropout.cuh"
#include "kernels/cuda/launch.cuh"
#include "lib/core/dropout_formula.h"

namespace trainer::cuda {
namespace {

__global__ void dropout_forward_kernel(const float* x, float* y, float* mask, int64_t n, int64_t channel_size,
                                       float rate, const StepScalars* s, int layer_index) {
  const uint64_t seed = s->seed, stream = dropout_stream(s->step, layer_index);
  const float keep_scale = dropout_keep_scale(rate);
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float m = dropout_mask(seed, stream, uint64_t(i / channel_size), rate, keep_scale);
    mask[i] = m;
    y[i] = mul_rn(x[i], m);
  }
}

__global__ void dropout_backward_kernel(const float* dy, const float* mask, float* dx, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) dx[i] = mul_rn(dy[i], mask[i]);
}

}  // namespace

void launch_dropout_forward(const float* x, float* y, float* mask, int64_t n, int64_t channel_size,
                            float rate, const StepScalars* s, int layer_index, cudaStream_t stream) {
  if (n <= 0) return;
  dropout_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, mask, n, channel_size, rate, s,
                                                               layer_index);
  CUDA_CHECK_LAUNCH();
}

void launch_dropout_backward(const float* dy, const float* mask, float* dx, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  dropout_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dy, mask, dx, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
