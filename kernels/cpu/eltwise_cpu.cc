// relu, leaky_relu, sigmoid, tanh, gelu on oneDNN eltwise; the tensor is viewed as flat (B*n).
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "lib/layers/activation.h"

namespace trainer {
namespace {

using dnnl::memory;

dnnl::algorithm eltwise_algorithm(ActivationKind k) {
  switch (k) {
    case ActivationKind::relu:
    case ActivationKind::leaky_relu: return dnnl::algorithm::eltwise_relu;
    case ActivationKind::sigmoid: return dnnl::algorithm::eltwise_logistic;
    case ActivationKind::tanh: return dnnl::algorithm::eltwise_tanh;
    case ActivationKind::gelu: return dnnl::algorithm::eltwise_gelu_erf;
    default: throw InternalError("not an eltwise activation");
  }
}

class EltwiseCpu : public LayerKernel {
 public:
  EltwiseCpu(const Activation& l, const KernelContext& ctx) : dc_(dnnl_of(ctx)) {
    auto md = plain_md({ctx.batch * l.input_shape().numel()});
    const auto algo = eltwise_algorithm(l.kind);
    const float alpha = l.kind == ActivationKind::leaky_relu ? l.alpha : 0.f;
    DNNL_CHECK({
      dnnl::eltwise_forward::desc fd(dnnl::prop_kind::forward_training, algo, md, alpha, 0.f);
      dnnl::eltwise_forward::primitive_desc fwd_pd(fd, dc_.engine);
      fwd_ = dnnl::eltwise_forward(fwd_pd);
      dnnl::eltwise_backward::desc bd(algo, md, md, alpha, 0.f);
      bwd_ = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(bd, dc_.engine, fwd_pd));
      x_ = memory(md, dc_.engine, DNNL_MEMORY_NONE);
      y_ = memory(md, dc_.engine, DNNL_MEMORY_NONE);
      dx_ = memory(md, dc_.engine, DNNL_MEMORY_NONE);
      dy_ = memory(md, dc_.engine, DNNL_MEMORY_NONE);
    });
  }

  void forward(const float* x, float* y, bool) override {
    x_.set_data_handle(const_cast<float*>(x));
    y_.set_data_handle(y);
    DNNL_CHECK(fwd_.execute(dc_.stream, {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DST, y_}}));
  }

  void backward(const float* x, const float*, const float* dy, float* dx) override {
    if (!dx) return;
    x_.set_data_handle(const_cast<float*>(x));
    dy_.set_data_handle(const_cast<float*>(dy));
    dx_.set_data_handle(dx);
    DNNL_CHECK(bwd_.execute(dc_.stream,
                            {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_DIFF_SRC, dx_}}));
  }

 private:
  DnnlContext& dc_;
  dnnl::primitive fwd_, bwd_;
  memory x_, y_, dx_, dy_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_eltwise_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<EltwiseCpu>(static_cast<const Activation&>(l), ctx);
}

}  // namespace trainer
