// dropout2d on the CPU, in whatever layout its neighbours chose (plain, channels-last nhwc or
// oneDNN's channel blocks; kernels/cpu/channel_addressing.h), so a convolution's blocked or
// channels-last output needs no reorder around it. One draw per (sample, channel): unit n*C + c,
// the same counter-based mask as the element-wise kernel and the CUDA one
// (lib/core/dropout_formula.h).
//   x, dx: (B, C, spatial...) in the input's layout; y, dy: in the output's (the input's when the
//   next kernel takes any layout, else plain); scale (the kept mask): (B, C) floats, 0 or 1/(1-rate)
#include <algorithm>
#include <vector>

#include "kernels/cpu/channel_addressing.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_edge.h"
#include "lib/core/dropout_formula.h"
#include "lib/layers/dropout.h"

namespace trainer {
namespace {

class Dropout2dCpu : public LayerKernel {
 public:
  Dropout2dCpu(const Dropout& l, const KernelContext& ctx)
      : rate_(l.rate), scalars_(ctx.scalars), layer_(ctx.layer_index) {
    const Shape& s = l.input_shape();
    dnnl::memory::dims dims{ctx.batch};
    for (int64_t d : s.dims) dims.push_back(d);
    batch_ = ctx.batch;
    channels_ = s[0];
    spatial_ = s.numel() / s[0];
    const auto x_md = input_md(ctx, dims);
    y_md_ = ctx.output_layout_free ? x_md : plain_md(dims);
    y_layout_ = layout_of(y_md_);
    x_at_ = cpu::channel_addressing(x_md);
    y_at_ = cpu::channel_addressing(y_md_);
  }

  std::shared_ptr<const Layout> output_layout() const override { return y_layout_; }
  size_t output_bytes() const override { return y_md_.get_size(); }
  size_t workspace_bytes() const override { return size_t(batch_ * channels_) * sizeof(float); }
  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    scale_ = static_cast<float*>(b.workspace);
  }

  void forward(bool training) override {
    const float* x = a_.x;
    float* y = a_.y;
    training_ = training && rate_ > 0.f;
    const float keep = dropout_keep_scale(rate_);
    const uint64_t seed = scalars_->seed, stream = dropout_stream(scalars_->step, layer_);
    const int64_t units = batch_ * channels_;
#pragma omp parallel for schedule(static) if (units * spatial_ > 65536)
    for (int64_t u = 0; u < units; ++u) {
      const float m = !training_ ? 1.f : dropout_mask(seed, stream, uint64_t(u), rate_, keep);
      scale_[u] = m;
      copy_scaled(x, x_at_, y, y_at_, u / channels_, u % channels_, m);
    }
    zero_padding(y, y_at_);
  }

  void backward() override {
    const float* dy = a_.dy;
    float* dx = a_.dx;
    if (!dx) return;
    const int64_t units = batch_ * channels_;
#pragma omp parallel for schedule(static) if (units * spatial_ > 65536)
    for (int64_t u = 0; u < units; ++u)
      copy_scaled(dy, y_at_, dx, x_at_, u / channels_, u % channels_, training_ ? scale_[u] : 1.f);
    zero_padding(dx, x_at_);
  }

 private:
  void copy_scaled(const float* from, const cpu::ChannelAddressing& fa, float* to,
                   const cpu::ChannelAddressing& ta, int64_t n, int64_t c, float m) const {
    const float* f = from + fa.at(n, c, 0);
    float* t = to + ta.at(n, c, 0);
    for (int64_t s = 0; s < spatial_; ++s) t[s * ta.s_stride] = mul_rn(f[s * fa.s_stride], m);
  }
  // Channels a blocked layout pads to a whole block hold zeros, as oneDNN expects of its inputs.
  void zero_padding(float* to, const cpu::ChannelAddressing& ta) const {
    for (int64_t n = 0; n < batch_; ++n)
      for (int64_t c = channels_; c < ta.channels_padded; ++c)
        for (int64_t s = 0; s < spatial_; ++s) to[ta.at(n, c, s)] = 0.f;
  }

  float rate_;
  const StepScalars* scalars_;
  int layer_;
  int64_t batch_ = 0, channels_ = 0, spatial_ = 0;
  dnnl::memory::desc y_md_;
  std::shared_ptr<const Layout> y_layout_;
  cpu::ChannelAddressing x_at_, y_at_;
  BoundActivations a_;
  float* scale_ = nullptr;
  bool training_ = false;
};

}  // namespace

std::unique_ptr<LayerKernel> make_dropout2d_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<Dropout2dCpu>(static_cast<const Dropout&>(l), ctx);
}

}  // namespace trainer
