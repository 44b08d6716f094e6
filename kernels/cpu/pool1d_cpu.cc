// maxpool1d / avgpool1d and global_avg_pool on oneDNN pooling: one kernel for any spatial rank,
// planned from the geometry. Max pooling's workspace (the argmax indices) lives in the kernel's
// arena slice between forward and backward.
//   pool1d:          x: (B, C, L)  -> y: (B, C, OL)
//   global_avg_pool: x: (B, C, S...) -> y: (B, C), planned as a window covering all of S with the
//                    output (B, C, 1, ...), which is the same memory as (B, C).
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "lib/layers/global_pool.h"
#include "lib/layers/pool1d.h"

namespace trainer {
namespace {

using dnnl::memory;

struct PoolGeometry {
  memory::dims x, y, kernel, strides, pad_l, pad_r;  // x, y with batch and channels
  dnnl::algorithm algo;
};

class PoolCpu : public LayerKernel {
 public:
  PoolCpu(const PoolGeometry& g, const KernelContext& ctx) : dc_(dnnl_of(ctx)) {
    auto x_md = plain_md(g.x), y_md = plain_md(g.y);
    DNNL_CHECK({
      dnnl::pooling_forward::desc fd(dnnl::prop_kind::forward_training, g.algo, x_md, y_md, g.strides,
                                     g.kernel, g.pad_l, g.pad_r);
      dnnl::pooling_forward::primitive_desc fwd_pd(fd, dc_.engine);
      fwd_ = dnnl::pooling_forward(fwd_pd);
      dnnl::pooling_backward::desc bd(g.algo, x_md, y_md, g.strides, g.kernel, g.pad_l, g.pad_r);
      bwd_ = dnnl::pooling_backward(dnnl::pooling_backward::primitive_desc(bd, dc_.engine, fwd_pd));
      ws_md_ = fwd_pd.workspace_desc();
      x_ = memory(x_md, dc_.engine, DNNL_MEMORY_NONE);
      dx_ = memory(x_md, dc_.engine, DNNL_MEMORY_NONE);
      y_ = memory(y_md, dc_.engine, DNNL_MEMORY_NONE);
      dy_ = memory(y_md, dc_.engine, DNNL_MEMORY_NONE);
      if (ws_md_.get_size()) ws_ = memory(ws_md_, dc_.engine, DNNL_MEMORY_NONE);
    });
  }

  size_t workspace_bytes() const override { return ws_md_.get_size(); }
  void bind(float*, float*, float*, void* ws) override {
    if (ws_md_.get_size()) ws_.set_data_handle(ws);
  }

  void forward(const float* x, float* y, bool) override {
    x_.set_data_handle(const_cast<float*>(x));
    y_.set_data_handle(y);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x_}, {DNNL_ARG_DST, y_}};
    if (ws_md_.get_size()) args[DNNL_ARG_WORKSPACE] = ws_;
    DNNL_CHECK(fwd_.execute(dc_.stream, args));
  }

  void backward(const float*, const float*, const float* dy, float* dx) override {
    if (!dx) return;
    dy_.set_data_handle(const_cast<float*>(dy));
    dx_.set_data_handle(dx);
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_DIFF_SRC, dx_}};
    if (ws_md_.get_size()) args[DNNL_ARG_WORKSPACE] = ws_;
    DNNL_CHECK(bwd_.execute(dc_.stream, args));
  }

 private:
  DnnlContext& dc_;
  dnnl::primitive fwd_, bwd_;
  memory::desc ws_md_;
  memory x_, dx_, y_, dy_, ws_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_pool1d_cpu(const Layer& layer, const KernelContext& ctx) {
  const auto& l = static_cast<const Pool1d&>(layer);
  const Shape& in = l.input_shape();
  PoolGeometry g;
  g.x = {ctx.batch, in[0], in[1]};
  g.y = {ctx.batch, in[0], l.output_shape()[1]};
  g.kernel = {l.size};
  g.strides = {l.stride};
  g.pad_l = {l.w.pad_begin};
  g.pad_r = {l.w.pad_end};
  g.algo = l.kind == Pool1d::Kind::max ? dnnl::algorithm::pooling_max
                                       : dnnl::algorithm::pooling_avg_exclude_padding;
  return std::make_unique<PoolCpu>(g, ctx);
}

std::unique_ptr<LayerKernel> make_global_avg_pool_cpu(const Layer& layer, const KernelContext& ctx) {
  const Shape& in = layer.input_shape();
  PoolGeometry g;
  g.x = {ctx.batch, in[0]};
  g.y = {ctx.batch, in[0]};
  for (size_t i = 1; i < in.rank(); ++i) {
    g.x.push_back(in[i]);
    g.y.push_back(1);
    g.kernel.push_back(in[i]);
    g.strides.push_back(1);
    g.pad_l.push_back(0);
    g.pad_r.push_back(0);
  }
  g.algo = dnnl::algorithm::pooling_avg_exclude_padding;
  return std::make_unique<PoolCpu>(g, ctx);
}

}  // namespace trainer
