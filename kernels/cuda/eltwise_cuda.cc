// relu, leaky_relu, sigmoid, tanh, gelu on own element-wise kernels (eltwise.cu); the tensor is
// viewed as flat (B * n). Backward uses x, as the CPU's oneDNN eltwise backward does. Any
// activation dtype (KernelContext::act_dtype), computed in f32. Element-wise ops are
// layout-blind: a channels-last input stays channels-last, unless the consumer needs plain NCHW
// (an OutputEdge transposes the output; the workspace is its buffer).
//   x, y, dy, dx: (B, ...)
#include <algorithm>

#include "kernels/cuda/channels_last.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/eltwise.cuh"
#include "lib/core/error.h"
#include "lib/layers/activation.h"

namespace trainer {
namespace {

cuda::Eltwise eltwise_kind(const Activation& l) {
  switch (l.kind) {
    case ActivationKind::relu:
      return cuda::Eltwise::relu;
    case ActivationKind::leaky_relu:
      return cuda::Eltwise::leaky_relu;
    case ActivationKind::sigmoid:
      return cuda::Eltwise::sigmoid;
    case ActivationKind::tanh:
      return cuda::Eltwise::tanh;
    case ActivationKind::gelu:
      return l.tanh_approx ? cuda::Eltwise::gelu_tanh : cuda::Eltwise::gelu;
    default:
      throw InternalError("not an element-wise activation");
  }
}

class EltwiseCuda : public LayerKernel {
 public:
  EltwiseCuda(const Activation& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        kind_(eltwise_kind(l)),
        alpha_(l.kind == ActivationKind::leaky_relu ? l.alpha : 0.f),
        n_(ctx.batch * l.input_shape().numel()),
        dtype_(ctx.act_dtype),
        in_nhwc_(cuda::is_channels_last(ctx.input_layout)),
        out_nhwc_(in_nhwc_ && cuda::may_write_channels_last(ctx)),
        out_(edge(l, ctx, in_nhwc_, out_nhwc_)) {}

  std::shared_ptr<const Layout> output_layout() const override {
    return out_nhwc_ ? cuda::channels_last() : nullptr;
  }
  size_t workspace_bytes() const override { return out_.workspace_bytes(); }
  bool workspace_is_transient() const override { return true; }
  // relu in place (no layout change): its backward's mask x > 0 is y > 0, so reading y where x was
  // gives the same gradient, bit for bit.
  bool may_overwrite_input(size_t k) const override {
    return k == 0 && kind_ == cuda::Eltwise::relu && in_nhwc_ == out_nhwc_;
  }

  void bind(const KernelBinding& b) override {
    a_ = TypedActivations(b, dtype_);
    out_.bind(b.workspace, a_.y, a_.dy);
  }

  void forward(bool) override {
    cuda::launch_eltwise_forward(kind_, alpha_, dtype_, a_.x, out_.core_y(), n_, be_.stream());
    out_.finish_forward(be_.stream());
  }

  void backward() override {
    if (!a_.dx) return;
    const void* dy = out_.core_dy(be_.stream());
    cuda::launch_eltwise_backward(kind_, alpha_, dtype_, a_.x, dy, a_.dx, n_, be_.stream());
  }

 private:
  TypedActivations a_;
  CudaBackend& be_;
  cuda::Eltwise kind_;
  float alpha_;
  int64_t n_;
  DType dtype_;
  bool in_nhwc_, out_nhwc_;
  cuda::OutputEdge out_;

  // The output side: (B, C, positions) with C the first per-sample dim (channels-last inputs come
  // from convolutions: (C, H, W) or (C, L)).
  static cuda::OutputEdge edge(const Activation& l, const KernelContext& ctx, bool in_nhwc, bool out_nhwc) {
    if (!in_nhwc) return {};
    const Shape& s = l.input_shape();
    const int64_t c = s.rank() > 0 ? s[0] : 1;
    return cuda::OutputEdge(ctx.act_dtype, true, out_nhwc, ctx.batch, c, s.numel() / std::max<int64_t>(c, 1),
                            1);
  }
};

}  // namespace

std::unique_ptr<LayerKernel> make_eltwise_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<EltwiseCuda>(static_cast<const Activation&>(l), ctx);
}

}  // namespace trainer
