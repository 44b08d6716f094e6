// batchnorm on oneDNN batch_normalization (use_scale | use_shift), channel axis 1.
//   x, y: (B, C, S...)  gamma, beta: (C) params  running_mean, running_var: (C) buffers
// Training forward: oneDNN computes the batch mean and biased variance into the workspace
// (kept for the backward); the running statistics are then updated here with PyTorch's rule
// (see lib/layers/batchnorm.h). Eval forward: use_global_stats with the running statistics.
// Backward: after a training forward, the full batch-statistics gradient; after an eval forward,
// the gradient with the statistics held constant (use_global_stats), so both modes are exact.
// Views: params/grads 0 gamma, 1 beta; buffers 0 running_mean, 1 running_var.
// Layouts: x (and dx) come in the layout the previous kernel chose (a convolution's blocked
// nChw16c or channels-last: oneDNN's jit batchnorm; plain NCHW runs its much slower reference-like
// ncsp kernel); y and dy keep that layout when the next kernel accepts any, else they are reordered
// to plain at the edge, as in eltwise_cpu.cc.
// Synchronized statistics (KernelContext::stats_comm, CPU ranks; lib/core/batchnorm_sync_formula.h):
// in training, loops in x's layout (kernels/cpu/channel_addressing.h) sum this shard per channel
// in double, the host Communicator all-reduces the sums, and oneDNN normalizes with the global
// statistics as given ones (use_global_stats); backward sums dy and dy (x - mean) in x's layout
// (dy reordered to it at the edge), all-reduces them weighted by the shard weight, and writes dx
// in loops. The sums are (2 C + 1) doubles of the workspace, after the batch statistics.
// Fused relu (KernelContext::fused_relu): y is made z = relu(y) in place after the normalization,
// and backward first masks the output's gradient in place, dz -> z > 0 ? dz : 0 dz (the relu's
// own gradient, which nothing reads after this kernel), then runs as above: in y's layout, element
// by element (a blocked layout's padding is zero in both). The same arithmetic as the separate relu
// kernel, so the same results; on the CPU it saves the relu's output and gradient tensors and its
// layout edges, not passes (oneDNN's fuse_norm_relu keeps its mask in an opaque workspace that the
// synchronized and first-layer loops could not read).
#include <cmath>
#include <cstring>

#include "kernels/cpu/channel_addressing.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_edge.h"
#include "lib/core/batchnorm_sync_formula.h"
#include "lib/core/relu_formula.h"
#include "lib/dist/communicator.h"
#include "lib/layers/batchnorm.h"

namespace trainer {
namespace {

using dnnl::memory;
using flags = dnnl::normalization_flags;

class BatchNormCpu : public LayerKernel {
 public:
  BatchNormCpu(const BatchNorm& l, const KernelContext& ctx)
      : dc_(dnnl_of(ctx)),
        C_(l.channels()),
        S_(l.spatial()),
        n_(ctx.batch * l.spatial()),
        momentum_(l.momentum),
        eps_(l.epsilon),
        comm_(ctx.stats_comm),
        relu_(ctx.fused_relu),
        scalars_(ctx.scalars) {
    if (ctx.stats_collective) throw InternalError("batchnorm on the CPU was given a device collective");
    memory::dims dims{ctx.batch};
    for (int64_t d : l.input_shape().dims) dims.push_back(d);
    const memory::desc x_md = input_md(ctx, dims), c_md = plain_md({C_});
    y_md_ = ctx.input_layout && !ctx.output_layout_free ? plain_md(dims) : x_md;
    y_layout_ = layout_of(y_md_);
    if (comm_) x_at_ = cpu::channel_addressing(x_md);
    const flags affine = flags::use_scale | flags::use_shift;
    const flags global = affine | flags::use_global_stats;
    const auto train = dnnl::prop_kind::forward_training;
    DNNL_CHECK({
      dnnl::batch_normalization_forward::primitive_desc fwd_pd(
          dnnl::batch_normalization_forward::desc(train, x_md, eps_, affine), dc_.engine);
      dnnl::batch_normalization_forward::primitive_desc fwd_global_pd(
          dnnl::batch_normalization_forward::desc(train, x_md, eps_, global), dc_.engine);
      fwd_ = dnnl::batch_normalization_forward(fwd_pd);
      fwd_global_ = dnnl::batch_normalization_forward(fwd_global_pd);
      bwd_ = dnnl::batch_normalization_backward(dnnl::batch_normalization_backward::primitive_desc(
          dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, x_md, x_md, eps_, affine),
          dc_.engine, fwd_pd));
      bwd_global_ = dnnl::batch_normalization_backward(dnnl::batch_normalization_backward::primitive_desc(
          dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, x_md, x_md, eps_, global),
          dc_.engine, fwd_global_pd));
      for (memory* m : {&x_, &dx_}) *m = memory(x_md, dc_.engine, DNNL_MEMORY_NONE);
      y_.init(y_md_, x_md, dc_.engine, false, true);
      dy_.init(y_md_, x_md, dc_.engine, true, false);
      for (memory* m : {&gamma_, &beta_, &dgamma_, &dbeta_, &mean_, &var_, &rmean_, &rvar_})
        *m = memory(c_md, dc_.engine, DNNL_MEMORY_NONE);
    });
  }

  std::shared_ptr<const Layout> output_layout() const override { return y_layout_; }
  size_t output_bytes() const override { return y_md_.get_size(); }
  // The batch mean and variance, from forward to backward; then the edges' scratch.
  size_t workspace_bytes() const override {
    return stats_bytes() + sums_bytes() + y_.scratch_bytes + dy_.scratch_bytes;
  }

  // Backward reads x, the statistics and dy; y only as a fused relu's mask.
  bool backward_reads_output() const override { return relu_; }

  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    x_.set_data_handle(a_.x);
    y_.set_out(a_.y);
    if (a_.dx) dx_.set_data_handle(a_.dx);
    gamma_.set_data_handle(b.param(0).f32());
    beta_.set_data_handle(b.param(1).f32());
    dgamma_.set_data_handle(b.grad(0).f32());
    dbeta_.set_data_handle(b.grad(1).f32());
    running_mean_ = b.buffer(0).f32();
    running_var_ = b.buffer(1).f32();
    rmean_.set_data_handle(running_mean_);
    rvar_.set_data_handle(running_var_);
    batch_ = static_cast<float*>(b.workspace);
    mean_.set_data_handle(batch_);
    var_.set_data_handle(batch_ + C_);
    char* p = static_cast<char*>(b.workspace) + stats_bytes();
    sums_ = reinterpret_cast<double*>(p);
    p += sums_bytes();
    p += y_.bind_scratch(p);
    dy_.bind_scratch(p);
  }

  void forward(bool training) override {
    trained_ = training;
    forward_normalized(training);
    if (relu_) relu_in_place();
  }

  void backward() override {
    if (relu_) relu_mask_gradient();
    backward_unfused();
  }

  void forward_no_rows() override {
    if (!comm_) return;
    std::memset(sums_, 0, sums_bytes());
    synchronize_stats();
  }
  void backward_no_rows() override {
    if (!comm_) return;
    std::memset(sums_, 0, sums_bytes());
    comm_->all_reduce_sum(sums_, 2 * C_);
  }

 private:
  // y and dy, in y's layout (padding included).
  int64_t y_floats() const { return int64_t(y_md_.get_size() / sizeof(float)); }
  // The relu kernel's rule (eltwise_cpu.cc: oneDNN's relu, alpha 0) on the stored output.
  void relu_in_place() {
    dc_.stream.wait();
    float* y = a_.y;
    const int64_t n = y_floats();
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) y[i] = relu_forward(y[i]);
  }
  // dz -> the batchnorm output's gradient, in place.
  void relu_mask_gradient() {
    const float* z = a_.y;
    float* dz = a_.dy;
    const int64_t n = y_floats();
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) dz[i] = relu_grad_from_output(z[i], dz[i]);
  }

  void forward_normalized(bool training) {
    if (training && comm_) return forward_synchronized();
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, x_}, {DNNL_ARG_DST, y_.inner}, {DNNL_ARG_SCALE, gamma_}, {DNNL_ARG_SHIFT, beta_}};
    args[DNNL_ARG_MEAN] = training ? mean_ : rmean_;
    args[DNNL_ARG_VARIANCE] = training ? var_ : rvar_;
    DNNL_CHECK({
      (training ? fwd_ : fwd_global_).execute(dc_.stream, args);
      y_.out(dc_.stream);
    });
    if (!training) return;
    dc_.stream.wait();
    const float m = momentum_, unbias = n_ > 1 ? float(n_) / float(n_ - 1) : 1.f;
    float *rm = running_mean_, *rv = running_var_;
    for (int64_t c = 0; c < C_; ++c) {
      rm[c] = (1.f - m) * rm[c] + m * batch_[c];
      rv[c] = (1.f - m) * rv[c] + m * batch_[C_ + c] * unbias;
    }
  }

  void backward_unfused() {
    if (trained_ && comm_) return backward_synchronized();
    const memory& mean = trained_ ? mean_ : rmean_;
    const memory& var = trained_ ? var_ : rvar_;
    if (!a_.dx) {  // first layer (plain x and dy): only dgamma and dbeta (oneDNN would need a scratch
                   // diff_src)
      param_grads_only(a_.x, a_.dy, static_cast<const float*>(mean.get_data_handle()),
                       static_cast<const float*>(var.get_data_handle()));
      return;
    }
    DNNL_CHECK(dy_.in(dc_.stream, a_.dy));
    DNNL_CHECK((trained_ ? bwd_ : bwd_global_)
                   .execute(dc_.stream, {{DNNL_ARG_SRC, x_},
                                         {DNNL_ARG_MEAN, mean},
                                         {DNNL_ARG_VARIANCE, var},
                                         {DNNL_ARG_DIFF_DST, dy_.inner},
                                         {DNNL_ARG_SCALE, gamma_},
                                         {DNNL_ARG_SHIFT, beta_},
                                         {DNNL_ARG_DIFF_SRC, dx_},
                                         {DNNL_ARG_DIFF_SCALE, dgamma_},
                                         {DNNL_ARG_DIFF_SHIFT, dbeta_}}));
  }

  size_t stats_bytes() const { return align_up(size_t(2 * C_) * sizeof(float)); }  // mean, variance
  // Synchronized statistics: per channel two sums, then the count of values.
  size_t sums_bytes() const { return comm_ ? align_up(size_t(2 * C_ + 1) * sizeof(double)) : 0; }

  void forward_synchronized() {
    const float* x = a_.x;
    const int64_t B = n_ / S_;
#pragma omp parallel for schedule(static) if (n_ * C_ > 65536)
    for (int64_t c = 0; c < C_; ++c) {
      double sum = 0, sum_sq = 0;
      for (int64_t b = 0; b < B; ++b) {
        const float* xs = x + x_at_.at(b, c, 0);
        for (int64_t s = 0; s < S_; ++s) {
          const double v = xs[s * x_at_.s_stride];
          sum += v;
          sum_sq += v * v;
        }
      }
      sums_[2 * c] = sum;
      sums_[2 * c + 1] = sum_sq;
    }
    sums_[2 * C_] = double(n_);
    synchronize_stats();
    DNNL_CHECK({
      fwd_global_.execute(dc_.stream, {{DNNL_ARG_SRC, x_},
                                       {DNNL_ARG_DST, y_.inner},
                                       {DNNL_ARG_SCALE, gamma_},
                                       {DNNL_ARG_SHIFT, beta_},
                                       {DNNL_ARG_MEAN, mean_},
                                       {DNNL_ARG_VARIANCE, var_}});
      y_.out(dc_.stream);
    });
  }

  // The replicas' sums (sums_: 2 C + 1) into the global batch's mean and variance (batch_) and the
  // running statistics, the same on every replica.
  void synchronize_stats() {
    comm_->all_reduce_sum(sums_, 2 * C_ + 1);
    const double n = sums_[2 * C_];
    for (int64_t c = 0; c < C_; ++c) {
      const BatchNormStats st = batchnorm_stats(sums_[2 * c], sums_[2 * c + 1], n, eps_);
      batch_[c] = st.mean;
      batch_[C_ + c] = st.var;
      batchnorm_running_update(running_mean_[c], running_var_[c], st, n, momentum_);
    }
  }

  void backward_synchronized() {
    DNNL_CHECK({
      dy_.in(dc_.stream, a_.dy);
      dc_.stream.wait();
    });
    const float* x = a_.x;
    const float* dy = static_cast<const float*>(dy_.inner.get_data_handle());  // in x's layout
    const float* gamma = static_cast<const float*>(gamma_.get_data_handle());
    float* dgamma = static_cast<float*>(dgamma_.get_data_handle());
    float* dbeta = static_cast<float*>(dbeta_.get_data_handle());
    const double weight = scalars_->shard_weight;
    const int64_t B = n_ / S_, s_stride = x_at_.s_stride;
#pragma omp parallel for schedule(static) if (n_ * C_ > 65536)
    for (int64_t c = 0; c < C_; ++c) {
      const float mean = batch_[c], inv = batchnorm_inv(batch_[C_ + c], eps_);
      double sum_dy = 0, sum_dy_xc = 0;
      for (int64_t b = 0; b < B; ++b) {
        const int64_t at = x_at_.at(b, c, 0);
        for (int64_t s = 0; s < S_; ++s) {
          const double g = dy[at + s * s_stride];
          sum_dy += g;
          sum_dy_xc += g * (double(x[at + s * s_stride]) - mean);
        }
      }
      dgamma[c] = float(sum_dy_xc * inv);  // this shard's own sums: the gradient all-reduce adds them
      dbeta[c] = float(sum_dy);
      sums_[2 * c] = weight * sum_dy;
      sums_[2 * c + 1] = weight * sum_dy_xc;
    }
    comm_->all_reduce_sum(sums_, 2 * C_);
    float* dx = a_.dx;
    if (!dx) return;
#pragma omp parallel for schedule(static) if (n_ * C_ > 65536)
    for (int64_t c = 0; c < x_at_.channels_padded; ++c) {
      const bool pad = c >= C_;  // a blocked layout's padding channels hold zeros
      const float mean = pad ? 0.f : batch_[c];
      const BatchNormDx d = pad ? BatchNormDx{}
                                : batchnorm_sync_dx(sums_[2 * c], sums_[2 * c + 1], gamma[c],
                                                    batchnorm_inv(batch_[C_ + c], eps_), double(n_));
      for (int64_t b = 0; b < B; ++b) {
        const int64_t at = x_at_.at(b, c, 0);
        for (int64_t s = 0; s < S_; ++s) {
          const int64_t i = at + s * s_stride;
          dx[i] = pad ? 0.f : d.scale * (dy[i] - d.shift - (x[i] - mean) * d.slope);
        }
      }
    }
  }

  // dgamma[c] = sum dy * (x - mean) / sqrt(var + eps), dbeta[c] = sum dy, over (B, S).
  void param_grads_only(const float* x, const float* dy, const float* mean, const float* var) {
    float* dg = static_cast<float*>(dgamma_.get_data_handle());
    float* db = static_cast<float*>(dbeta_.get_data_handle());
    const int64_t B = n_ / S_;
    for (int64_t c = 0; c < C_; ++c) {
      const double inv = 1.0 / std::sqrt(double(var[c]) + eps_);
      double sg = 0, sb = 0;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S_; ++s) {
          const int64_t i = (b * C_ + c) * S_ + s;
          sg += double(dy[i]) * (double(x[i]) - mean[c]) * inv;
          sb += dy[i];
        }
      dg[c] = float(sg);
      db[c] = float(sb);
    }
  }

  DnnlContext& dc_;
  int64_t C_, S_, n_;
  float momentum_, eps_;
  Communicator* comm_;           // synchronized statistics: the replicas' host communicator
  bool relu_;                    // KernelContext::fused_relu
  const StepScalars* scalars_;   // shard_weight
  cpu::ChannelAddressing x_at_;  // x, dx and the reordered dy (synchronized statistics only)
  double* sums_ = nullptr;       // (2 C + 1) in the workspace, synchronized statistics only
  bool trained_ = false;
  BoundActivations a_;
  float* running_mean_ = nullptr;  // buffers 0 and 1: (C) each
  float* running_var_ = nullptr;
  float* batch_ = nullptr;  // batch mean (C) then batch variance (C), in the workspace
  dnnl::primitive fwd_, fwd_global_, bwd_, bwd_global_;
  memory::desc y_md_;                       // y and dy
  std::shared_ptr<const Layout> y_layout_;  // y_md_ when not plain
  memory x_, dx_, gamma_, beta_, dgamma_, dbeta_, mean_, var_, rmean_, rvar_;
  Edge y_, dy_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_batchnorm_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<BatchNormCpu>(static_cast<const BatchNorm&>(l), ctx);
}

}  // namespace trainer
