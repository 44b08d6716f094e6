// conv2d on oneDNN: forward, backward-data and backward-weights primitives, created once per
// batch size and executed every step on plain NCHW/OIHW memory.
//   x: (B, C, H, W)  W: (F, C, kh, kw)  b: (F)  y: (B, F, OH, OW)
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "lib/layers/conv2d.h"

namespace trainer {
namespace {

using dnnl::memory;

class Conv2dCpu : public LayerKernel {
 public:
  Conv2dCpu(const Conv2d& l, const KernelContext& ctx) : dc_(dnnl_of(ctx)), bias_(l.use_bias) {
    const Shape& in = l.input_shape();
    const Shape& out = l.output_shape();
    memory::dims x_d{ctx.batch, in[0], in[1], in[2]}, y_d{ctx.batch, out[0], out[1], out[2]};
    memory::dims w_d{l.filters, in[0], l.kh, l.kw}, b_d{l.filters};
    memory::dims strides{l.sh, l.sw}, pad_l{l.wh.pad_begin, l.ww.pad_begin},
        pad_r{l.wh.pad_end, l.ww.pad_end};
    auto x_md = plain_md(x_d), y_md = plain_md(y_d), w_md = plain_md(w_d), b_md = plain_md(b_d);
    const auto algo = dnnl::algorithm::convolution_direct;
    DNNL_CHECK({
      auto fwd_desc = bias_ ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo,
                                                            x_md, w_md, b_md, y_md, strides, pad_l, pad_r)
                            : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo,
                                                            x_md, w_md, y_md, strides, pad_l, pad_r);
      fwd_pd_ = dnnl::convolution_forward::primitive_desc(fwd_desc, dc_.engine);
      fwd_ = dnnl::convolution_forward(fwd_pd_);
      dnnl::convolution_backward_data::desc bd_desc(algo, x_md, w_md, y_md, strides, pad_l, pad_r);
      bwd_data_ = dnnl::convolution_backward_data(
          dnnl::convolution_backward_data::primitive_desc(bd_desc, dc_.engine, fwd_pd_));
      auto bw_desc = bias_ ? dnnl::convolution_backward_weights::desc(algo, x_md, w_md, b_md, y_md,
                                                                      strides, pad_l, pad_r)
                           : dnnl::convolution_backward_weights::desc(algo, x_md, w_md, y_md,
                                                                      strides, pad_l, pad_r);
      bwd_weights_ = dnnl::convolution_backward_weights(
          dnnl::convolution_backward_weights::primitive_desc(bw_desc, dc_.engine, fwd_pd_));
      x_ = memory(x_md, dc_.engine, DNNL_MEMORY_NONE);
      y_ = memory(y_md, dc_.engine, DNNL_MEMORY_NONE);
      dx_ = memory(x_md, dc_.engine, DNNL_MEMORY_NONE);
      dy_ = memory(y_md, dc_.engine, DNNL_MEMORY_NONE);
      w_ = memory(w_md, dc_.engine, DNNL_MEMORY_NONE);
      dw_ = memory(w_md, dc_.engine, DNNL_MEMORY_NONE);
      b_ = memory(b_md, dc_.engine, DNNL_MEMORY_NONE);
      db_ = memory(b_md, dc_.engine, DNNL_MEMORY_NONE);
    });
    w_numel_ = l.filters * in[0] * l.kh * l.kw;
  }

  void bind(float* params, float* grads, float*, void*) override {
    w_.set_data_handle(params);
    dw_.set_data_handle(grads);
    if (bias_) {
      b_.set_data_handle(params + w_numel_);
      db_.set_data_handle(grads + w_numel_);
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
    if (dx) {
      dx_.set_data_handle(dx);
      DNNL_CHECK(bwd_data_.execute(dc_.stream, {{DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_WEIGHTS, w_},
                                                {DNNL_ARG_DIFF_SRC, dx_}}));
    }
  }

 private:
  DnnlContext& dc_;
  bool bias_;
  int64_t w_numel_ = 0;
  dnnl::convolution_forward::primitive_desc fwd_pd_;
  dnnl::primitive fwd_, bwd_data_, bwd_weights_;
  memory x_, y_, dx_, dy_, w_, dw_, b_, db_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_conv2d_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<Conv2dCpu>(static_cast<const Conv2d&>(l), ctx);
}

}  // namespace trainer
