#include "kernels/cpu/dnnl_weighted.h"

#include <unordered_map>

#include "kernels/cpu/cpu_backend.h"
#include "lib/model/param_layout.h"

namespace trainer {
namespace {

using dnnl::memory;

class WeightedCpu : public LayerKernel {
 public:
  WeightedCpu(const WeightedPlan& p, const KernelContext& ctx)
      : dc_(dnnl_of(ctx)), bias_(p.bias), fwd_(p.fwd), bwd_data_(p.bwd_data), bwd_weights_(p.bwd_weights) {
    DNNL_CHECK({
      x_ = memory(p.x, dc_.engine, DNNL_MEMORY_NONE);
      dx_ = memory(p.x, dc_.engine, DNNL_MEMORY_NONE);
      y_ = memory(p.y, dc_.engine, DNNL_MEMORY_NONE);
      dy_ = memory(p.y, dc_.engine, DNNL_MEMORY_NONE);
      w_ = memory(p.w, dc_.engine, DNNL_MEMORY_NONE);
      dw_ = memory(p.w, dc_.engine, DNNL_MEMORY_NONE);
      b_ = memory(p.b, dc_.engine, DNNL_MEMORY_NONE);
      db_ = memory(p.b, dc_.engine, DNNL_MEMORY_NONE);
    });
    int64_t w_numel = 1;
    for (auto d : p.w.dims()) w_numel *= d;
    bias_offset_ = param_slot_floats(w_numel);
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

std::unique_ptr<LayerKernel> make_dnnl_weighted(const WeightedPlan& p, const KernelContext& ctx) {
  return std::make_unique<WeightedCpu>(p, ctx);
}

}  // namespace trainer
