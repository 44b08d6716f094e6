// relu, leaky_relu, sigmoid, tanh, gelu on own element-wise kernels (eltwise.cu); the tensor is
// viewed as flat (B * n). Backward uses x, as the CPU's oneDNN eltwise backward does. Any
// activation dtype (KernelContext::act_dtype), computed in f32.
//   x, y, dy, dx: (B, ...)
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/eltwise.cuh"
#include "lib/core/error.h"
#include "lib/layers/activation.h"

namespace trainer {
namespace {

cuda::Eltwise eltwise_kind(ActivationKind k) {
  switch (k) {
    case ActivationKind::relu:
      return cuda::Eltwise::relu;
    case ActivationKind::leaky_relu:
      return cuda::Eltwise::leaky_relu;
    case ActivationKind::sigmoid:
      return cuda::Eltwise::sigmoid;
    case ActivationKind::tanh:
      return cuda::Eltwise::tanh;
    case ActivationKind::gelu:
      return cuda::Eltwise::gelu;
    default:
      throw InternalError("not an element-wise activation");
  }
}

class EltwiseCuda : public LayerKernel {
 public:
  EltwiseCuda(const Activation& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        kind_(eltwise_kind(l.kind)),
        alpha_(l.kind == ActivationKind::leaky_relu ? l.alpha : 0.f),
        n_(ctx.batch * l.input_shape().numel()),
        dtype_(ctx.act_dtype) {}

  void bind(const KernelBinding& b) override { a_ = TypedActivations(b, dtype_); }

  void forward(bool) override {
    cuda::launch_eltwise_forward(kind_, alpha_, dtype_, a_.x, a_.y, n_, be_.stream());
  }

  void backward() override {
    if (a_.dx) cuda::launch_eltwise_backward(kind_, alpha_, dtype_, a_.x, a_.dy, a_.dx, n_, be_.stream());
  }

 private:
  TypedActivations a_;
  CudaBackend& be_;
  cuda::Eltwise kind_;
  float alpha_;
  int64_t n_;
  DType dtype_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_eltwise_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<EltwiseCuda>(static_cast<const Activation&>(l), ctx);
}

}  // namespace trainer
