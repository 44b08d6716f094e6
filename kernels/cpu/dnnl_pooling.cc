#include "kernels/cpu/dnnl_pooling.h"

#include <unordered_map>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dnnl_edge.h"

namespace trainer {
namespace {

using dnnl::memory;

// x and dx are in the input's layout (KernelContext::input_layout). With a plain input, y and dy
// are plain. With a blocked one, the primitive's dst follows it (format_tag::any picks the same
// blocking); y and dy keep that layout when the next kernel accepts any layout, else they are
// reordered to plain at the edge.
class PoolCpu : public LayerKernel {
 public:
  PoolCpu(const PoolGeometry& g, const KernelContext& ctx) : dc_(dnnl_of(ctx)) {
    auto x_md = input_md(ctx, g.x);
    const bool blocked = ctx.input_layout != nullptr;
    auto y_want =
        blocked ? memory::desc(g.y, memory::data_type::f32, memory::format_tag::any) : plain_md(g.y);
    DNNL_CHECK({
      dnnl::pooling_forward::desc fd(dnnl::prop_kind::forward_training, g.algo, x_md, y_want, g.strides,
                                     g.kernel, g.pad_l, g.pad_r);
      dnnl::pooling_forward::primitive_desc fwd_pd(fd, dc_.engine);
      fwd_ = dnnl::pooling_forward(fwd_pd);
      const auto y_inner = fwd_pd.dst_desc();
      dnnl::pooling_backward::desc bd(g.algo, x_md, y_inner, g.strides, g.kernel, g.pad_l, g.pad_r);
      bwd_ = dnnl::pooling_backward(dnnl::pooling_backward::primitive_desc(bd, dc_.engine, fwd_pd));
      ws_md_ = fwd_pd.workspace_desc();
      y_md_ = ctx.output_layout_free ? y_inner : plain_md(g.y);
      y_layout_ = layout_of(y_md_);
      x_ = memory(x_md, dc_.engine, DNNL_MEMORY_NONE);
      dx_ = memory(x_md, dc_.engine, DNNL_MEMORY_NONE);
      y_.init(y_md_, y_inner, dc_.engine, false, true);
      dy_.init(y_md_, y_inner, dc_.engine, true, false);
      if (ws_md_.get_size()) ws_ = memory(ws_md_, dc_.engine, DNNL_MEMORY_NONE);
    });
  }

  std::shared_ptr<const Layout> output_layout() const override { return y_layout_; }
  size_t output_bytes() const override { return y_md_.get_size(); }
  size_t workspace_bytes() const override {
    return align_up(ws_md_.get_size()) + y_.scratch_bytes + dy_.scratch_bytes;
  }
  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    x_.set_data_handle(a_.x);
    y_.set_out(a_.y);
    if (a_.dx) dx_.set_data_handle(a_.dx);
    char* p = static_cast<char*>(b.workspace);
    if (ws_md_.get_size()) ws_.set_data_handle(p);
    p += align_up(ws_md_.get_size());
    p += y_.bind_scratch(p);
    dy_.bind_scratch(p);
  }

  void forward(bool) override {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x_}, {DNNL_ARG_DST, y_.inner}};
    if (ws_md_.get_size()) args[DNNL_ARG_WORKSPACE] = ws_;
    DNNL_CHECK({
      fwd_.execute(dc_.stream, args);
      y_.out(dc_.stream);
    });
  }

  void backward() override {
    if (!a_.dx) return;
    DNNL_CHECK({
      dy_.in(dc_.stream, a_.dy);
      std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, dy_.inner}, {DNNL_ARG_DIFF_SRC, dx_}};
      if (ws_md_.get_size()) args[DNNL_ARG_WORKSPACE] = ws_;
      bwd_.execute(dc_.stream, args);
    });
  }

 private:
  DnnlContext& dc_;
  BoundActivations a_;
  dnnl::primitive fwd_, bwd_;
  memory::desc ws_md_, y_md_;
  std::shared_ptr<const Layout> y_layout_;  // y_md_ when not plain
  memory x_, dx_, ws_;
  Edge y_, dy_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_dnnl_pooling(const PoolGeometry& g, const KernelContext& ctx) {
  return std::make_unique<PoolCpu>(g, ctx);
}

}  // namespace trainer
