// relu, leaky_relu, sigmoid, tanh, gelu (erf or tanh form) on oneDNN eltwise. A plain input is viewed as flat
// (B*n); a blocked one (KernelContext::input_layout) is used as it is, and y/dy keep its layout
// when the next kernel accepts any layout, else they are reordered to plain at the edge.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_edge.h"
#include "lib/layers/activation.h"

namespace trainer {
namespace {

using dnnl::memory;

dnnl::algorithm eltwise_algorithm(const Activation& l) {
  switch (l.kind) {
    case ActivationKind::relu:
    case ActivationKind::leaky_relu:
      return dnnl::algorithm::eltwise_relu;
    case ActivationKind::sigmoid:
      return dnnl::algorithm::eltwise_logistic;
    case ActivationKind::tanh:
      return dnnl::algorithm::eltwise_tanh;
    case ActivationKind::gelu:
      return l.tanh_approx ? dnnl::algorithm::eltwise_gelu_tanh : dnnl::algorithm::eltwise_gelu_erf;
    default:
      throw InternalError("not an eltwise activation");
  }
}

class EltwiseCpu : public LayerKernel {
 public:
  EltwiseCpu(const Activation& l, const KernelContext& ctx) : dc_(dnnl_of(ctx)) {
    memory::dims dims{ctx.batch};
    for (int64_t d : l.input_shape().dims) dims.push_back(d);
    const bool blocked = ctx.input_layout != nullptr;
    auto md = blocked ? input_md(ctx, dims) : plain_md({ctx.batch * l.input_shape().numel()});
    y_md_ = blocked && !ctx.output_layout_free ? plain_md(dims) : md;
    y_layout_ = layout_of(y_md_);
    in_place_ok_ = l.kind == ActivationKind::relu && y_md_ == md;
    const auto algo = eltwise_algorithm(l);
    const float alpha = l.kind == ActivationKind::leaky_relu ? l.alpha : 0.f;
    DNNL_CHECK({
      dnnl::eltwise_forward::desc fd(dnnl::prop_kind::forward_training, algo, md, alpha, 0.f);
      dnnl::eltwise_forward::primitive_desc fwd_pd(fd, dc_.engine);
      fwd_ = dnnl::eltwise_forward(fwd_pd);
      dnnl::eltwise_backward::desc bd(algo, md, md, alpha, 0.f);
      bwd_ = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(bd, dc_.engine, fwd_pd));
      x_ = memory(md, dc_.engine, DNNL_MEMORY_NONE);
      dx_ = memory(md, dc_.engine, DNNL_MEMORY_NONE);
      y_.init(y_md_, md, dc_.engine, false, true);
      dy_.init(y_md_, md, dc_.engine, true, false);
    });
  }

  std::shared_ptr<const Layout> output_layout() const override { return y_layout_; }
  size_t output_bytes() const override { return y_md_.get_size(); }
  // relu in place (no reorder at the edge): oneDNN's backward masks by src > 0, and y > 0 where
  // x > 0, so reading y where x was gives the same gradient, bit for bit.
  bool may_overwrite_input(size_t k) const override { return k == 0 && in_place_ok_; }
  size_t workspace_bytes() const override { return y_.scratch_bytes + dy_.scratch_bytes; }
  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    x_.set_data_handle(a_.x);
    y_.set_out(a_.y);
    if (a_.dx) dx_.set_data_handle(a_.dx);
    char* p = static_cast<char*>(b.workspace);
    p += y_.bind_scratch(p);
    dy_.bind_scratch(p);
  }

  void forward(bool) override {
    DNNL_CHECK({
      fwd_.execute(dc_.stream, {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DST, y_.inner}});
      y_.out(dc_.stream);
    });
  }

  void backward() override {
    if (!a_.dx) return;
    DNNL_CHECK({
      dy_.in(dc_.stream, a_.dy);
      bwd_.execute(dc_.stream,
                   {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DIFF_DST, dy_.inner}, {DNNL_ARG_DIFF_SRC, dx_}});
    });
  }

 private:
  DnnlContext& dc_;
  BoundActivations a_;
  dnnl::primitive fwd_, bwd_;
  memory::desc y_md_;                       // y and dy
  std::shared_ptr<const Layout> y_layout_;  // y_md_ when not plain
  memory x_, dx_;
  Edge y_, dy_;
  bool in_place_ok_ = false;
};

}  // namespace

std::unique_ptr<LayerKernel> make_eltwise_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<EltwiseCpu>(static_cast<const Activation&>(l), ctx);
}

}  // namespace trainer
