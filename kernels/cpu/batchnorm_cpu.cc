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
#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_edge.h"
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
        eps_(l.epsilon) {
    memory::dims dims{ctx.batch};
    for (int64_t d : l.input_shape().dims) dims.push_back(d);
    const memory::desc x_md = input_md(ctx, dims), c_md = plain_md({C_});
    y_md_ = ctx.input_layout && !ctx.output_layout_free ? plain_md(dims) : x_md;
    y_layout_ = layout_of(y_md_);
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
  size_t workspace_bytes() const override { return stats_bytes() + y_.scratch_bytes + dy_.scratch_bytes; }

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
    p += y_.bind_scratch(p);
    dy_.bind_scratch(p);
  }

  void forward(bool training) override {
    trained_ = training;
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

  void backward() override {
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

 private:
  size_t stats_bytes() const { return align_up(size_t(2 * C_) * sizeof(float)); }  // mean, variance

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
