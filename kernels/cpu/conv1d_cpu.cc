// conv1d on oneDNN: forward, backward-data and backward-weights primitives on 3-D (ncw / oiw)
// memory, created once per batch size and executed every step.
//   x: (B, C, L)  W: (F, C, k)  b: (F)  y: (B, F, OL)
// The bias sits at the next 64-float slot after W, as Model lays the arena out.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "lib/layers/conv1d.h"

namespace trainer {
namespace {

using dnnl::memory;

class Conv1dCpu : public LayerKernel {
 public:
  Conv1dCpu(const Conv1d& l, const KernelContext& ctx) : dc_(dnnl_of(ctx)), bias_(l.use_bias) {
    const Shape& in = l.input_shape();
    const Shape& out = l.output_shape();
    auto x_md = plain_md({ctx.batch, in[0], in[1]}), y_md = plain_md({ctx.batch, out[0], out[1]});
    auto w_md = plain_md({l.filters, in[0], l.k}), b_md = plain_md({l.filters});
    memory::dims strides{l.stride}, pad_l{l.w.pad_begin}, pad_r{l.w.pad_end};
    const auto algo = dnnl::algorithm::convolution_direct;
    const auto fwd_kind = dnnl::prop_kind::forward_training;
    DNNL_CHECK({
      auto fd = bias_ ? dnnl::convolution_forward::desc(fwd_kind, algo, x_md, w_md, b_md, y_md, strides, pad_l, pad_r)
                      : dnnl::convolution_forward::desc(fwd_kind, algo, x_md, w_md, y_md, strides, pad_l, pad_r);
      dnnl::convolution_forward::primitive_desc fwd_pd(fd, dc_.engine);
      fwd_ = dnnl::convolution_forward(fwd_pd);
      dnnl::convolution_backward_data::desc bdd(algo, x_md, w_md, y_md, strides, pad_l, pad_r);
      bwd_data_ = dnnl::convolution_backward_data(
          dnnl::convolution_backward_data::primitive_desc(bdd, dc_.engine, fwd_pd));
      auto bwd = bias_ ? dnnl::convolution_backward_weights::desc(algo, x_md, w_md, b_md, y_md, strides, pad_l, pad_r)
                       : dnnl::convolution_backward_weights::desc(algo, x_md, w_md, y_md, strides, pad_l, pad_r);
      bwd_weights_ = dnnl::convolution_backward_weights(
          dnnl::convolution_backward_weights::primitive_desc(bwd, dc_.engine, fwd_pd));
      x_ = memory(x_md, dc_.engine, DNNL_MEMORY_NONE);
      dx_ = memory(x_md, dc_.engine, DNNL_MEMORY_NONE);
      y_ = memory(y_md, dc_.engine, DNNL_MEMORY_NONE);
      dy_ = memory(y_md, dc_.engine, DNNL_MEMORY_NONE);
      w_ = memory(w_md, dc_.engine, DNNL_MEMORY_NONE);
      dw_ = memory(w_md, dc_.engine, DNNL_MEMORY_NONE);
      b_ = memory(b_md, dc_.engine, DNNL_MEMORY_NONE);
      db_ = memory(b_md, dc_.engine, DNNL_MEMORY_NONE);
    });
    bias_offset_ = param_slot_floats(l.filters * in[0] * l.k);
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
    std::unordered_map<int, memory> wargs{{DNNL_ARG_SRC, x_}, {DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_DIFF_WEIGHTS, dw_}};
    if (bias_) wargs[DNNL_ARG_DIFF_BIAS] = db_;
    DNNL_CHECK(bwd_weights_.execute(dc_.stream, wargs));
    if (!dx) return;
    dx_.set_data_handle(dx);
    DNNL_CHECK(bwd_data_.execute(dc_.stream, {{DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_DIFF_SRC, dx_}}));
  }

 private:
  DnnlContext& dc_;
  bool bias_;
  int64_t bias_offset_ = 0;
  dnnl::primitive fwd_, bwd_data_, bwd_weights_;
  memory x_, dx_, y_, dy_, w_, dw_, b_, db_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_conv1d_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<Conv1dCpu>(static_cast<const Conv1d&>(l), ctx);
}

}  // namespace trainer
