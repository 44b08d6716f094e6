// dense on oneDNN inner product: forward, backward-data and backward-weights primitives on
// plain-layout memory, created once per batch size and executed every step.
//   x: (B, in)  W: (units, in)  b: (units)  y: (B, units)
// W and b are the layer's parameter views 0 and 1; every tensor's handle is set once, in bind.
#include <unordered_map>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "lib/layers/dense.h"

namespace trainer {
namespace {

using dnnl::memory;

class DenseCpu : public LayerKernel {
 public:
  DenseCpu(const Dense& l, const KernelContext& ctx) : dc_(dnnl_of(ctx)), bias_(l.use_bias) {
    const auto& e = dc_.engine;
    const auto x = plain_md({ctx.batch, l.in_features()}), y = plain_md({ctx.batch, l.units}),
               w = plain_md({l.units, l.in_features()}), b = plain_md({l.units});
    const auto fwd_kind = dnnl::prop_kind::forward_training;
    DNNL_CHECK({
      auto fd = bias_ ? dnnl::inner_product_forward::desc(fwd_kind, x, w, b, y)
                      : dnnl::inner_product_forward::desc(fwd_kind, x, w, y);
      dnnl::inner_product_forward::primitive_desc fwd_pd(fd, e);
      fwd_ = dnnl::inner_product_forward(fwd_pd);
      dnnl::inner_product_backward_data::desc bdd(x, w, y);
      bwd_data_ = dnnl::inner_product_backward_data(
          dnnl::inner_product_backward_data::primitive_desc(bdd, e, fwd_pd));
      auto bwd = bias_ ? dnnl::inner_product_backward_weights::desc(x, w, b, y)
                       : dnnl::inner_product_backward_weights::desc(x, w, y);
      bwd_weights_ = dnnl::inner_product_backward_weights(
          dnnl::inner_product_backward_weights::primitive_desc(bwd, e, fwd_pd));
      x_ = memory(x, e, DNNL_MEMORY_NONE);
      dx_ = memory(x, e, DNNL_MEMORY_NONE);
      y_ = memory(y, e, DNNL_MEMORY_NONE);
      dy_ = memory(y, e, DNNL_MEMORY_NONE);
      w_ = memory(w, e, DNNL_MEMORY_NONE);
      dw_ = memory(w, e, DNNL_MEMORY_NONE);
      b_ = memory(b, e, DNNL_MEMORY_NONE);
      db_ = memory(b, e, DNNL_MEMORY_NONE);
    });
  }

  void bind(const KernelBinding& b) override {
    const BoundActivations a(b);
    x_.set_data_handle(a.x);
    y_.set_data_handle(a.y);
    dy_.set_data_handle(a.dy);
    has_dx_ = a.dx != nullptr;
    if (has_dx_) dx_.set_data_handle(a.dx);
    w_.set_data_handle(b.param(0).f32());
    dw_.set_data_handle(b.grad(0).f32());
    if (bias_) {
      b_.set_data_handle(b.param(1).f32());
      db_.set_data_handle(b.grad(1).f32());
    }
  }

  void forward(bool) override {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_DST, y_}};
    if (bias_) args[DNNL_ARG_BIAS] = b_;
    DNNL_CHECK(fwd_.execute(dc_.stream, args));
  }

  void backward() override {
    std::unordered_map<int, memory> wargs{
        {DNNL_ARG_SRC, x_}, {DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_DIFF_WEIGHTS, dw_}};
    if (bias_) wargs[DNNL_ARG_DIFF_BIAS] = db_;
    DNNL_CHECK(bwd_weights_.execute(dc_.stream, wargs));
    if (!has_dx_) return;
    DNNL_CHECK(bwd_data_.execute(
        dc_.stream, {{DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_DIFF_SRC, dx_}}));
  }

 private:
  DnnlContext& dc_;
  bool bias_, has_dx_ = false;
  dnnl::primitive fwd_, bwd_data_, bwd_weights_;
  memory x_, dx_, y_, dy_, w_, dw_, b_, db_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_dense_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<DenseCpu>(static_cast<const Dense&>(l), ctx);
}

}  // namespace trainer
