// Convolution on oneDNN (conv1d, conv2d; dnnl_conv.h): forward, backward-data and
// backward-weights primitives, created once per batch size and executed every step.
//
// Layouts at the edges: each primitive is created with format_tag::any so oneDNN can pick its
// fast direct JIT kernels with blocked layouts (nChw16c, nCw16c...). x and dx come in the layout
// the previous kernel chose (KernelContext::input_layout, plain by default); y and dy are in the
// forward primitive's dst layout when the next kernel accepts any layout, else plain. Where a
// primitive's choice differs from those, a reorder into/out of a scratch slice of the kernel's
// workspace runs at the edge (weights are always plain). On the Fashion-MNIST CNN this is ~5x
// faster than the plain-layout gemm convolution.
//
// math: bf16 (CPUs with AVX-512 BF16 or AMX): the primitives read x, W and dy in bf16 and write y,
// dx and dW in fp32 (oneDNN accumulates in fp32). The edges' reorders convert on the way in, so
// everything between layers, and the weights, stay fp32: bf16 is the arithmetic, not the storage.
#include "kernels/cpu/dnnl_conv.h"

#include <unordered_map>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dnnl_edge.h"
#include "lib/memory/allocator.h"

namespace trainer {
namespace {

using dnnl::memory;

// See the constructor. Measured on AVX-512 only: elsewhere oneDNN keeps choosing (format any).
bool channels_last_conv(const memory::dims& x) {
  static const bool avx512 = CpuBackend::cpu_isa().rfind("avx512", 0) == 0;
  return avx512 && x.size() == 4 && x[1] > 3 && x[1] % 16 != 0;
}

class ConvCpu : public LayerKernel {
 public:
  ConvCpu(const ConvGeometry& g, const KernelContext& ctx) : dc_(dnnl_of(ctx)), bias_(g.bias) {
    const memory::dims &x_d = g.x, &y_d = g.y;
    memory::dims w_d = g.w;  // grouped: the same memory as oneDNN's plain goihw
    if (g.groups > 1) {
      w_d = {g.groups, g.w[0] / g.groups};
      w_d.insert(w_d.end(), g.w.begin() + 1, g.w.end());
    }
    const memory::dims b_d{g.w[0]};
    const memory::dims &strides = g.strides, &pad_l = g.pad_l, &pad_r = g.pad_r;
    // Channels-last for 2-D convolutions whose input channels do not fill 16-channel blocks
    // (beyond the image stem, 1-3 channels): the blocked layouts would pad them to 16 and oneDNN
    // 2.6 then falls back to jit:avx2 with nChw8c for backward-weights, while its brgemm (forward)
    // and jit:avx512_core (backward) channels-last kernels run unpadded. Measured on the 16-core
    // AVX-512 host, 10->20 channels 12x12 (batch 200), forward + both backwards: 4.6 against 6.7
    // ms on 1 thread, 0.61 against 0.80 ms on 16; mnist_cnn 63 against 49 steps/s on 1 thread.
    const bool channels_last = channels_last_conv(x_d);
    using dt = memory::data_type;
    const dt lo = ctx.math == MathMode::bf16 ? dt::bf16 : dt::f32;  // what the primitives read
    auto any = [](const memory::dims& d, dt t = dt::f32) {
      return memory::desc(d, t, memory::format_tag::any);
    };
    auto act = [&](const memory::dims& d, dt t = dt::f32) {  // x, y and their gradients
      return channels_last ? memory::desc(d, t, memory::format_tag::nhwc) : any(d, t);
    };
    auto x_md = input_md(ctx, x_d), w_md = plain_md(w_d), b_md = plain_md(b_d);
    const auto algo = dnnl::algorithm::convolution_direct;
    const auto& e = dc_.engine;
    DNNL_CHECK({
      auto fd = bias_ ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, act(x_d, lo),
                                                        any(w_d, lo), b_md, act(y_d), strides, pad_l, pad_r)
                      : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, act(x_d, lo),
                                                        any(w_d, lo), act(y_d), strides, pad_l, pad_r);
      dnnl::convolution_forward::primitive_desc fwd_pd(fd, e);
      fwd_ = dnnl::convolution_forward(fwd_pd);
      y_md_ = ctx.output_layout_free ? fwd_pd.dst_desc() : plain_md(y_d);
      y_layout_ = layout_of(y_md_);
      const auto& y_md = y_md_;
      dnnl::convolution_backward_data::desc bdd(algo, act(x_d), any(w_d, lo), act(y_d, lo), strides, pad_l,
                                                pad_r);
      dnnl::convolution_backward_data::primitive_desc bd_pd(bdd, e, fwd_pd);
      bwd_data_ = dnnl::convolution_backward_data(bd_pd);
      auto bwd = bias_ ? dnnl::convolution_backward_weights::desc(algo, act(x_d, lo), any(w_d), b_md,
                                                                  act(y_d, lo), strides, pad_l, pad_r)
                       : dnnl::convolution_backward_weights::desc(algo, act(x_d, lo), any(w_d), act(y_d, lo),
                                                                  strides, pad_l, pad_r);
      dnnl::convolution_backward_weights::primitive_desc bw_pd(bwd, e, fwd_pd);
      bwd_weights_ = dnnl::convolution_backward_weights(bw_pd);
      f_x_.init(x_md, fwd_pd.src_desc(), e, true, false);
      f_w_.init(w_md, fwd_pd.weights_desc(), e, true, false);
      f_y_.init(y_md, fwd_pd.dst_desc(), e, false, true);
      d_dy_.init(y_md, bd_pd.diff_dst_desc(), e, true, false);
      d_w_.init(w_md, bd_pd.weights_desc(), e, true, false);
      d_dx_.init(x_md, bd_pd.diff_src_desc(), e, false, true);
      w_x_.init(x_md, bw_pd.src_desc(), e, true, false);
      w_dy_.init(y_md, bw_pd.diff_dst_desc(), e, true, false);
      w_dw_.init(w_md, bw_pd.diff_weights_desc(), e, false, true);
      b_ = memory(b_md, e, DNNL_MEMORY_NONE);
      db_ = memory(b_md, e, DNNL_MEMORY_NONE);
    });
  }

  std::shared_ptr<const Layout> output_layout() const override { return y_layout_; }
  size_t output_bytes() const override { return y_md_.get_size(); }

  size_t workspace_bytes() const override {
    size_t n = 0;
    for (const Edge* edge : edges()) n += edge->scratch_bytes;
    return n;
  }

  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    w_ = b.param(0).f32();
    dw_ = b.grad(0).f32();
    char* p = static_cast<char*>(b.workspace);
    for (Edge* edge : edges()) p += edge->bind_scratch(p);
    f_y_.set_out(a_.y);
    w_dw_.set_out(dw_);
    if (a_.dx) d_dx_.set_out(a_.dx);
    if (bias_) {
      b_.set_data_handle(b.param(1).f32());
      db_.set_data_handle(b.grad(1).f32());
    }
  }

  void forward(bool) override {
    auto& s = dc_.stream;
    DNNL_CHECK({
      f_x_.in(s, a_.x);
      f_w_.in(s, w_);
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, f_x_.inner}, {DNNL_ARG_WEIGHTS, f_w_.inner}, {DNNL_ARG_DST, f_y_.inner}};
      if (bias_) args[DNNL_ARG_BIAS] = b_;
      fwd_.execute(s, args);
      f_y_.out(s);
    });
  }

  void backward() override {
    auto& s = dc_.stream;
    DNNL_CHECK({
      w_x_.in(s, a_.x);
      w_dy_.in(s, a_.dy);
      std::unordered_map<int, memory> wargs{
          {DNNL_ARG_SRC, w_x_.inner}, {DNNL_ARG_DIFF_DST, w_dy_.inner}, {DNNL_ARG_DIFF_WEIGHTS, w_dw_.inner}};
      if (bias_) wargs[DNNL_ARG_DIFF_BIAS] = db_;
      bwd_weights_.execute(s, wargs);
      w_dw_.out(s);
      if (a_.dx) {
        d_dy_.in(s, a_.dy);
        d_w_.in(s, w_);
        bwd_data_.execute(s, {{DNNL_ARG_DIFF_DST, d_dy_.inner},
                              {DNNL_ARG_WEIGHTS, d_w_.inner},
                              {DNNL_ARG_DIFF_SRC, d_dx_.inner}});
        d_dx_.out(s);
      }
    });
  }

 private:
  std::vector<Edge*> edges() const {
    auto* self = const_cast<ConvCpu*>(this);
    return {&self->f_x_,  &self->f_w_, &self->f_y_,  &self->d_dy_, &self->d_w_,
            &self->d_dx_, &self->w_x_, &self->w_dy_, &self->w_dw_};
  }

  DnnlContext& dc_;
  bool bias_;
  BoundActivations a_;
  float* w_ = nullptr;  // params[0]; the bias (params[1]) is bound to b_
  float* dw_ = nullptr;
  dnnl::primitive fwd_, bwd_data_, bwd_weights_;
  Edge f_x_, f_w_, f_y_, d_dy_, d_w_, d_dx_, w_x_, w_dy_, w_dw_;
  memory b_, db_;
  memory::desc y_md_;                       // y and dy
  std::shared_ptr<const Layout> y_layout_;  // y_md_ when not plain
};

}  // namespace

std::unique_ptr<LayerKernel> make_dnnl_conv(const ConvGeometry& g, const KernelContext& ctx) {
  return std::make_unique<ConvCpu>(g, ctx);
}

}  // namespace trainer
