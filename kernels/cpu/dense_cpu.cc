// dense on oneDNN inner product: forward, backward-data and backward-weights primitives, created
// once per batch size and executed every step.
//   x: (B, in)  W: (units, in)  b: (units)  y: (B, units); per_position: B x rows rows
// W and b are the layer's parameter views 0 and 1; every tensor's handle is set once, in bind.
//
// fp32: every primitive works on the plain tensors themselves (no edge reorders). math: bf16: the
// primitives read x, W and dy in bf16 (in the layouts oneDNN prefers for them) and write y, dx and
// dW in fp32; the edges (dnnl_edge.h) convert into workspace scratch on the way in.
#include <unordered_map>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_edge.h"
#include "lib/layers/dense.h"

namespace trainer {
namespace {

using dnnl::memory;

class DenseCpu : public LayerKernel {
 public:
  DenseCpu(const Dense& l, const KernelContext& ctx) : dc_(dnnl_of(ctx)), bias_(l.use_bias) {
    const auto& e = dc_.engine;
    const memory::dims x_d{ctx.batch * l.rows(), l.in_features()}, y_d{ctx.batch * l.rows(), l.units},
        w_d{l.units, l.in_features()};
    const auto x = plain_md(x_d), y = plain_md(y_d), w = plain_md(w_d), b = plain_md({l.units});
    // What the primitives read: the plain fp32 tensors, or bf16 in any layout.
    const bool bf16 = ctx.math == MathMode::bf16;
    auto read = [&](const memory::dims& d, const memory::desc& plain) {
      return bf16 ? memory::desc(d, memory::data_type::bf16, memory::format_tag::any) : plain;
    };
    const auto fwd_kind = dnnl::prop_kind::forward_training;
    DNNL_CHECK({
      auto fd = bias_ ? dnnl::inner_product_forward::desc(fwd_kind, read(x_d, x), read(w_d, w), b, y)
                      : dnnl::inner_product_forward::desc(fwd_kind, read(x_d, x), read(w_d, w), y);
      dnnl::inner_product_forward::primitive_desc fwd_pd(fd, e);
      fwd_ = dnnl::inner_product_forward(fwd_pd);
      dnnl::inner_product_backward_data::desc bdd(x, read(w_d, w), read(y_d, y));
      dnnl::inner_product_backward_data::primitive_desc bd_pd(bdd, e, fwd_pd);
      bwd_data_ = dnnl::inner_product_backward_data(bd_pd);
      auto bwd = bias_ ? dnnl::inner_product_backward_weights::desc(read(x_d, x), w, b, read(y_d, y))
                       : dnnl::inner_product_backward_weights::desc(read(x_d, x), w, read(y_d, y));
      dnnl::inner_product_backward_weights::primitive_desc bw_pd(bwd, e, fwd_pd);
      bwd_weights_ = dnnl::inner_product_backward_weights(bw_pd);
      f_x_.init(x, fwd_pd.src_desc(), e, true, false);
      f_w_.init(w, fwd_pd.weights_desc(), e, true, false);
      d_dy_.init(y, bd_pd.diff_dst_desc(), e, true, false);
      d_w_.init(w, bd_pd.weights_desc(), e, true, false);
      w_x_.init(x, bw_pd.src_desc(), e, true, false);
      w_dy_.init(y, bw_pd.diff_dst_desc(), e, true, false);
      y_ = memory(y, e, DNNL_MEMORY_NONE);
      dx_ = memory(x, e, DNNL_MEMORY_NONE);
      dw_ = memory(w, e, DNNL_MEMORY_NONE);
      b_ = memory(b, e, DNNL_MEMORY_NONE);
      db_ = memory(b, e, DNNL_MEMORY_NONE);
    });
  }

  // Backward reads x, W and dy, never y.
  bool backward_reads_output() const override { return false; }
  size_t workspace_bytes() const override {
    size_t n = 0;
    for (const Edge* edge : edges()) n += edge->scratch_bytes;
    return n;
  }

  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    y_.set_data_handle(a_.y);
    if (a_.dx) dx_.set_data_handle(a_.dx);
    w_ = b.param(0).f32();
    dw_.set_data_handle(b.grad(0).f32());
    if (bias_) {
      b_.set_data_handle(b.param(1).f32());
      db_.set_data_handle(b.grad(1).f32());
    }
    char* p = static_cast<char*>(b.workspace);
    for (Edge* edge : edges()) p += edge->bind_scratch(p);
  }

  void forward(bool) override {
    auto& s = dc_.stream;
    DNNL_CHECK({
      f_x_.in(s, a_.x);
      f_w_.in(s, w_);
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, f_x_.inner}, {DNNL_ARG_WEIGHTS, f_w_.inner}, {DNNL_ARG_DST, y_}};
      if (bias_) args[DNNL_ARG_BIAS] = b_;
      fwd_.execute(s, args);
    });
  }

  void backward() override {
    auto& s = dc_.stream;
    DNNL_CHECK({
      w_x_.in(s, a_.x);
      w_dy_.in(s, a_.dy);
      std::unordered_map<int, memory> wargs{
          {DNNL_ARG_SRC, w_x_.inner}, {DNNL_ARG_DIFF_DST, w_dy_.inner}, {DNNL_ARG_DIFF_WEIGHTS, dw_}};
      if (bias_) wargs[DNNL_ARG_DIFF_BIAS] = db_;
      bwd_weights_.execute(s, wargs);
      if (a_.dx) {
        d_dy_.in(s, a_.dy);
        d_w_.in(s, w_);
        bwd_data_.execute(
            s, {{DNNL_ARG_DIFF_DST, d_dy_.inner}, {DNNL_ARG_WEIGHTS, d_w_.inner}, {DNNL_ARG_DIFF_SRC, dx_}});
      }
    });
  }

 private:
  std::vector<Edge*> edges() const {
    auto* self = const_cast<DenseCpu*>(this);
    return {&self->f_x_, &self->f_w_, &self->d_dy_, &self->d_w_, &self->w_x_, &self->w_dy_};
  }

  DnnlContext& dc_;
  bool bias_;
  BoundActivations a_;
  float* w_ = nullptr;
  dnnl::primitive fwd_, bwd_data_, bwd_weights_;
  Edge f_x_, f_w_, d_dy_, d_w_, w_x_, w_dy_;  // inputs of the primitives (reorders only in bf16)
  memory y_, dx_, dw_, b_, db_;               // outputs: the plain fp32 tensors themselves
};

}  // namespace

std::unique_ptr<LayerKernel> make_dense_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<DenseCpu>(static_cast<const Dense&>(l), ctx);
}

}  // namespace trainer
