#include "kernels/cpu/dnnl_pooling.h"

#include <unordered_map>

#include "kernels/cpu/cpu_backend.h"

namespace trainer {
namespace {

using dnnl::memory;

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

std::unique_ptr<LayerKernel> make_dnnl_pooling(const PoolGeometry& g, const KernelContext& ctx) {
  return std::make_unique<PoolCpu>(g, ctx);
}

}  // namespace trainer
