// dense on oneDNN inner product: forward, backward-data and backward-weights primitives on
// plain-layout memory, created once per batch size and executed every step.
//   x: (B, in)  W: (units, in)  b: (units)  y: (B, units)
// W starts the layer's parameter slice; b sits at the next 64-float slot after W
// (param_slot_floats), as Model lays the arena out.
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
    bias_offset_ = param_slot_floats(l.units * l.in_features());
  }

  void bind(float* params, float* grads, float*, void*) override {
    w_.set_data_handle(params);
    dw_.set_data_handle(grads);
    if (bias_) {
      b_.set_data_handle(params + bias_offset_);
      db_.set_data_handle(grads + bias_offset_);
    }
  }

  void forward(const float* x, float* y, bool) override {
    x_.set_data_handle(const_cast<float*>(x));
    y_.set_data_handle(y);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_DST, y_}};
    if (bias_) args[DNNL_ARG_BIAS] = b_;
    DNNL_CHECK(fwd_.execute(dc_.stream, args));
  }

  void backward(const float* x, const float*, const float* dy, float* dx) override {
    x_.set_data_handle(const_cast<float*>(x));
    dy_.set_data_handle(const_cast<float*>(dy));
    std::unordered_map<int, memory> wargs{
        {DNNL_ARG_SRC, x_}, {DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_DIFF_WEIGHTS, dw_}};
    if (bias_) wargs[DNNL_ARG_DIFF_BIAS] = db_;
    DNNL_CHECK(bwd_weights_.execute(dc_.stream, wargs));
    if (!dx) return;
    dx_.set_data_handle(dx);
    DNNL_CHECK(bwd_data_.execute(
        dc_.stream, {{DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_DIFF_SRC, dx_}}));
  }

 private:
  DnnlContext& dc_;
  bool bias_;
  int64_t bias_offset_ = 0;
  dnnl::primitive fwd_, bwd_data_, bwd_weights_;
  memory x_, dx_, y_, dy_, w_, dw_, b_, db_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_dense_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<DenseCpu>(static_cast<const Dense&>(l), ctx);
}

}  // namespace trainer
