// maxpool1d / avgpool1d and global_avg_pool / global_max_pool on the shared oneDNN pooling kernel
// (dnnl_pooling.h), which takes 1-D pooling's input in any layout (nCw16c from conv1d...).
//   pool1d:          x: (B, C, L)  -> y: (B, C, OL)
//   global_avg_pool: x: (B, C, S...) -> y: (B, C), planned as a window covering all of S with the
//                    output (B, C, 1, ...), which is the same memory as (B, C); with channels_last
//                    x: (B, S..., C), plain loops (GlobalPoolRowsCpu).
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_pooling.h"
#include "lib/layers/global_pool.h"
#include "lib/layers/pool1d.h"

namespace trainer {

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
  g.algo = pooling_algorithm(l.kind == Pool1d::Kind::max);
  return make_dnnl_pooling(g, ctx);
}

namespace {

// global_avg_pool / global_max_pool with channels_last: x (B, S, C) -> y (B, C), a loop per
// (sample, channel) over the positions in order (oneDNN's pooling takes channels first). Max keeps
// the first position of the maximum (kept workspace) for backward, which writes dy there and 0
// elsewhere; avg's backward spreads dy / S.
class GlobalPoolRowsCpu : public LayerKernel {
 public:
  GlobalPoolRowsCpu(const GlobalPool& l, const KernelContext& ctx, bool max)
      : max_(max), b_(ctx.batch), s_(l.spatial()), c_(l.channels()) {}
  size_t kept_workspace_bytes() const override { return max_ ? size_t(b_ * c_) * sizeof(int64_t) : 0; }
  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    argmax_ = static_cast<int64_t*>(b.kept_workspace);
  }
  void forward(bool) override {
    const float* x = a_.x;
    float* y = a_.y;
#pragma omp parallel for if (b_ * s_ * c_ > 65536)
    for (int64_t bc = 0; bc < b_ * c_; ++bc) {
      const int64_t b = bc / c_, c = bc % c_;
      const float* xp = x + b * s_ * c_ + c;
      if (!max_) {
        double sum = 0;
        for (int64_t j = 0; j < s_; ++j) sum += double(xp[j * c_]);
        y[bc] = float(sum / double(s_));
        continue;
      }
      int64_t at = 0;
      for (int64_t j = 1; j < s_; ++j)
        if (xp[j * c_] > xp[at * c_]) at = j;
      y[bc] = xp[at * c_];
      argmax_[bc] = at;
    }
  }
  void backward() override {
    float* dx = a_.dx;
    const float* dy = a_.dy;
    if (!dx) return;
#pragma omp parallel for if (b_ * s_ * c_ > 65536)
    for (int64_t b = 0; b < b_; ++b)
      for (int64_t j = 0; j < s_; ++j)
        for (int64_t c = 0; c < c_; ++c) {
          const int64_t bc = b * c_ + c;
          dx[(b * s_ + j) * c_ + c] = max_ ? (argmax_[bc] == j ? dy[bc] : 0.f) : dy[bc] / float(s_);
        }
  }

 private:
  bool max_;
  int64_t b_, s_, c_;
  BoundActivations a_;
  int64_t* argmax_ = nullptr;
};

}  // namespace

// global_avg_pool and global_max_pool: one window over every spatial position.
static std::unique_ptr<LayerKernel> make_global_pool_cpu(const Layer& layer, const KernelContext& ctx,
                                                         bool max) {
  const auto& pool = static_cast<const GlobalPool&>(layer);
  if (pool.channels_last) return std::make_unique<GlobalPoolRowsCpu>(pool, ctx, max);
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
  g.algo = pooling_algorithm(max);
  return make_dnnl_pooling(g, ctx);
}

std::unique_ptr<LayerKernel> make_global_avg_pool_cpu(const Layer& layer, const KernelContext& ctx) {
  return make_global_pool_cpu(layer, ctx, false);
}

std::unique_ptr<LayerKernel> make_global_max_pool_cpu(const Layer& layer, const KernelContext& ctx) {
  return make_global_pool_cpu(layer, ctx, true);
}

}  // namespace trainer
