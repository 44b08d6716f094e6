// softmax / log_softmax over the features on oneDNN softmax_v2.  x, y: (B, F)
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "lib/layers/activation.h"

namespace trainer {
namespace {

using dnnl::memory;

class SoftmaxCpu : public LayerKernel {
 public:
  SoftmaxCpu(const Activation& l, const KernelContext& ctx) : dc_(dnnl_of(ctx)) {
    auto md = plain_md({ctx.batch, l.input_shape()[0]});
    const auto algo = l.kind == ActivationKind::log_softmax ? dnnl::algorithm::softmax_log
                                                            : dnnl::algorithm::softmax_accurate;
    DNNL_CHECK({
      dnnl::softmax_v2_forward::desc fd(dnnl::prop_kind::forward_training, algo, md, md, 1);
      dnnl::softmax_v2_forward::primitive_desc fwd_pd(fd, dc_.engine);
      fwd_ = dnnl::softmax_v2_forward(fwd_pd);
      dnnl::softmax_v2_backward::desc bd(algo, md, md, md, 1);
      bwd_ = dnnl::softmax_v2_backward(dnnl::softmax_v2_backward::primitive_desc(bd, dc_.engine, fwd_pd));
      x_ = memory(md, dc_.engine, DNNL_MEMORY_NONE);
      y_ = memory(md, dc_.engine, DNNL_MEMORY_NONE);
      dx_ = memory(md, dc_.engine, DNNL_MEMORY_NONE);
      dy_ = memory(md, dc_.engine, DNNL_MEMORY_NONE);
    });
  }

  void bind(const KernelBinding& b) override {
    const BoundActivations a(b);
    x_.set_data_handle(a.x);
    y_.set_data_handle(a.y);
    dy_.set_data_handle(a.dy);
    has_dx_ = a.dx != nullptr;
    if (has_dx_) dx_.set_data_handle(a.dx);
  }

  void forward(bool) override {
    DNNL_CHECK(fwd_.execute(dc_.stream, {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DST, y_}}));
  }

  void backward() override {
    if (!has_dx_) return;
    DNNL_CHECK(
        bwd_.execute(dc_.stream, {{DNNL_ARG_DST, y_}, {DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_DIFF_SRC, dx_}}));
  }

 private:
  DnnlContext& dc_;
  dnnl::primitive fwd_, bwd_;
  memory x_, y_, dx_, dy_;
  bool has_dx_ = false;
};

}  // namespace

std::unique_ptr<LayerKernel> make_softmax_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<SoftmaxCpu>(static_cast<const Activation&>(l), ctx);
}

}  // namespace trainer
