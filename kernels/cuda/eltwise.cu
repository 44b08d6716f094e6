// Element-wise activation kernels, forward and backward (from x), as oneDNN computes them:
//   relu/leaky: y = x > 0 ? x : alpha x            dx = x > 0 ? dy : alpha dy
//   sigmoid:    y = 1 / (1 + exp(-x))              dx = dy s (1 - s)
//   tanh:       y = tanh(x)                        dx = dy (1 - t^2)
//   gelu (erf): y = 0.5 x (1 + erf(x / sqrt 2))
//               dx = dy 0.5 (1 + erf(v) + x sqrt(2/pi) exp(-v^2)),  v = x / sqrt 2
//   gelu_tanh:  y = 0.5 x (1 + t),  t = tanh(u),  u = sqrt(2/pi) (x + 0.044715 x^3)
//               dx = dy (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 0.044715 x^2))
// Each direction is an element-wise map (map16.cuh) of the kind and the element type (f32, bf16,
// fp16: computed in f32): where the tensors start 16-byte aligned a thread takes 16 bytes of each
// a step, with 32-bit indices where they fit (one float a thread in 64-bit indices moved
// resnet_fashion_mnist's relu at 2 TB/s of an H200's 4.8).
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/eltwise.cuh"
#include "kernels/cuda/map16.cuh"

namespace trainer::cuda {
namespace {

constexpr float kSqrtHalf = 0.70710678118654752440f;  // 1 / sqrt(2)
constexpr float kTwoOverSqrtPi = 1.12837916709551257390f;
constexpr float kSqrtTwoOverPi = 0.79788456080286535588f;
constexpr float kGeluCubic = 0.044715f;

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
    case Eltwise::gelu_tanh:
      return 0.5f * x * (1.f + tanhf(kSqrtTwoOverPi * (x + kGeluCubic * x * x * x)));
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
    case Eltwise::gelu_tanh: {
      const float t = tanhf(kSqrtTwoOverPi * (x + kGeluCubic * x * x * x));
      return dy * (0.5f * (1.f + t) +
                   0.5f * x * (1.f - t * t) * kSqrtTwoOverPi * (1.f + 3.f * kGeluCubic * x * x));
    }
  }
  return 0.f;
}

template <Eltwise K>
struct Forward {
  float alpha;
  __device__ float operator()(float x) const { return forward_one<K>(x, alpha); }
};

template <Eltwise K>
struct Backward {
  float alpha;
  __device__ float operator()(float x, float dy) const { return backward_one<K>(x, dy, alpha); }
};

// Calls f(integral_constant<Eltwise, kind>).
template <class F>
void with_kind(Eltwise kind, F&& f) {
  switch (kind) {
    case Eltwise::relu:
      return f(std::integral_constant<Eltwise, Eltwise::relu>());
    case Eltwise::leaky_relu:
      return f(std::integral_constant<Eltwise, Eltwise::leaky_relu>());
    case Eltwise::sigmoid:
      return f(std::integral_constant<Eltwise, Eltwise::sigmoid>());
    case Eltwise::tanh:
      return f(std::integral_constant<Eltwise, Eltwise::tanh>());
    case Eltwise::gelu:
      return f(std::integral_constant<Eltwise, Eltwise::gelu>());
    case Eltwise::gelu_tanh:
      return f(std::integral_constant<Eltwise, Eltwise::gelu_tanh>());
  }
}

}  // namespace

void launch_eltwise_forward(Eltwise kind, float alpha, DType t, const void* x, void* y, int64_t n,
                            cudaStream_t stream) {
  with_kind(kind, [&](auto k) {
    with_dtype(t, [&](auto tag) {
      launch_map<decltype(tag), 1>(MapInputs<1>{{x}}, y, n, Forward<decltype(k)::value>{alpha}, stream);
    });
  });
  CUDA_CHECK_LAUNCH();
}

void launch_eltwise_backward(Eltwise kind, float alpha, DType t, const void* x, const void* dy, void* dx,
                             int64_t n, cudaStream_t stream) {
  with_kind(kind, [&](auto k) {
    with_dtype(t, [&](auto tag) {
      launch_map<decltype(tag), 2>(MapInputs<2>{{x, dy}}, dx, n, Backward<decltype(k)::value>{alpha}, stream);
    });
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
