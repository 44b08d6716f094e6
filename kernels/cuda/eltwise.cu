// Element-wise activation kernels, forward and backward (from x), as oneDNN computes them:
//   relu/leaky: y = x > 0 ? x : alpha x            dx = x > 0 ? dy : alpha dy
//   sigmoid:    y = 1 / (1 + exp(-x))              dx = dy s (1 - s)
//   tanh:       y = tanh(x)                        dx = dy (1 - t^2)
//   gelu (erf): y = 0.5 x (1 + erf(x / sqrt 2))
//               dx = dy 0.5 (1 + erf(v) + x sqrt(2/pi) exp(-v^2)),  v = x / sqrt 2
// One templated grid-stride kernel per direction; the kind is a template parameter.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/eltwise.cuh"
#include "kernels/cuda/launch.cuh"

namespace trainer::cuda {
namespace {

constexpr float kSqrtHalf = 0.70710678118654752440f;  // 1 / sqrt(2)
constexpr float kTwoOverSqrtPi = 1.12837916709551257390f;

template <Eltwise K>
__device__ __forceinline__ float forward_one(float x, float alpha) {
  switch (K) {
    case Eltwise::relu:
    case Eltwise::leaky_relu:
      return x > 0.f ? x : x * alpha;
    case Eltwise::sigmoid:
      return 1.f / (1.f + expf(-x));
    case Eltwise::tanh:
      return tanhf(x);
    case Eltwise::gelu:
      return 0.5f * x * (1.f + erff(x * kSqrtHalf));
  }
  return 0.f;
}

template <Eltwise K>
__device__ __forceinline__ float backward_one(float x, float dy, float alpha) {
  switch (K) {
    case Eltwise::relu:
    case Eltwise::leaky_relu:
      return x > 0.f ? dy : dy * alpha;
    case Eltwise::sigmoid: {
      const float s = 1.f / (1.f + expf(-x));
      return dy * s * (1.f - s);
    }
    case Eltwise::tanh: {
      const float t = tanhf(x);
      return dy * (1.f - t * t);
    }
    case Eltwise::gelu: {
      const float v = x * kSqrtHalf;
      return dy * 0.5f * (1.f + erff(v) + x * kTwoOverSqrtPi * kSqrtHalf * expf(-v * v));
    }
  }
  return 0.f;
}

template <Eltwise K>
__global__ void eltwise_forward_kernel(const float* x, float* y, int64_t n, float alpha) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = forward_one<K>(x[i], alpha);
}

template <Eltwise K>
__global__ void eltwise_backward_kernel(const float* x, const float* dy, float* dx, int64_t n, float alpha) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) dx[i] = backward_one<K>(x[i], dy[i], alpha);
}

template <Eltwise K>
void forward_as(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream) {
  eltwise_forward_kernel<K><<<grid_for(n), kThreads, 0, stream>>>(x, y, n, alpha);
}
template <Eltwise K>
void backward_as(const float* x, const float* dy, float* dx, int64_t n, float alpha, cudaStream_t stream) {
  eltwise_backward_kernel<K><<<grid_for(n), kThreads, 0, stream>>>(x, dy, dx, n, alpha);
}

}  // namespace

void launch_eltwise_forward(Eltwise kind, float alpha, const float* x, float* y, int64_t n,
                            cudaStream_t stream) {
  if (n <= 0) return;
  switch (kind) {
    case Eltwise::relu:
      forward_as<Eltwise::relu>(x, y, n, 0.f, stream);
      break;
    case Eltwise::leaky_relu:
      forward_as<Eltwise::leaky_relu>(x, y, n, alpha, stream);
      break;
    case Eltwise::sigmoid:
      forward_as<Eltwise::sigmoid>(x, y, n, alpha, stream);
      break;
    case Eltwise::tanh:
      forward_as<Eltwise::tanh>(x, y, n, alpha, stream);
      break;
    case Eltwise::gelu:
      forward_as<Eltwise::gelu>(x, y, n, alpha, stream);
      break;
  }
  CUDA_CHECK_LAUNCH();
}

void launch_eltwise_backward(Eltwise kind, float alpha, const float* x, const float* dy, float* dx, int64_t n,
                             cudaStream_t stream) {
  if (n <= 0) return;
  switch (kind) {
    case Eltwise::relu:
      backward_as<Eltwise::relu>(x, dy, dx, n, 0.f, stream);
      break;
    case Eltwise::leaky_relu:
      backward_as<Eltwise::leaky_relu>(x, dy, dx, n, alpha, stream);
      break;
    case Eltwise::sigmoid:
      backward_as<Eltwise::sigmoid>(x, dy, dx, n, alpha, stream);
      break;
    case Eltwise::tanh:
      backward_as<Eltwise::tanh>(x, dy, dx, n, alpha, stream);
      break;
    case Eltwise::gelu:
      backward_as<Eltwise::gelu>(x, dy, dx, n, alpha, stream);
      break;
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
