// Dropout forward/backward with counter-based masks: the formula the CPU uses
// (lib/core/dropout_formula.h), a pure function of (seed, step, layer, index), so the GPU draws
// exactly the CPU's mask and keeps no RNG state.
//   x, y, dy, dx: (n) of dtype t (f32, bf16, fp16; the product in f32, rounded once)   mask: (n) f32
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dropout.cuh"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"
#include "lib/core/dropout_formula.h"

namespace trainer::cuda {
namespace {

template <class T>
__global__ void dropout_forward_kernel(const T* x, T* y, float* mask, int64_t n, int64_t channel_size,
                                       float rate, const StepScalars* s, int layer_index) {
  const uint64_t seed = s->seed, stream = dropout_stream(s->step, layer_index);
  const float keep_scale = dropout_keep_scale(rate);
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float m = dropout_mask(seed, stream, uint64_t(i / channel_size), rate, keep_scale);
    mask[i] = m;
    y[i] = from_f32<T>(mul_rn(to_f32(x[i]), m));
  }
}

template <class T>
__global__ void dropout_backward_kernel(const T* dy, const float* mask, T* dx, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride())
    dx[i] = from_f32<T>(mul_rn(to_f32(dy[i]), mask[i]));
}

}  // namespace

void launch_dropout_forward(DType t, const void* x, void* y, float* mask, int64_t n, int64_t channel_size,
                            float rate, const StepScalars* s, int layer_index, cudaStream_t stream) {
  if (n <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    dropout_forward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), mask, n, channel_size, rate, s, layer_index);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_dropout_backward(DType t, const void* dy, const float* mask, void* dx, int64_t n,
                             cudaStream_t stream) {
  if (n <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    dropout_backward_kernel<T>
        <<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(dy), mask, static_cast<T*>(dx), n);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
