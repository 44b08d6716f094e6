// batchnorm on the GPU (batchnorm.cu), channel axis 1, with the CPU's semantics: training uses
// the batch's mean and biased variance and updates the running statistics (PyTorch's momentum
// convention, unbiased variance) in the buffers given to bind(); eval uses the running
// statistics and updates nothing. Backward after a training forward is the full
// batch-statistics gradient, after an eval forward the gradient with the statistics held
// constant; with dx = null (first layer) only dgamma and dbeta. Everything stays on the stream:
// the running update is a device kernel, so a step needs no host sync and can be captured.
//   x, y: (B, C, S...)  gamma, beta: (C) params  running_mean, running_var: (C) buffers
//   params/grads: views 0 gamma, 1 beta; buffers: views 0 running_mean, 1 running_var
//   workspace: [reduction pieces: 2 C parts doubles] [mean (C) | inv (C) | dx coefficients (3 C)]
//   (mean / inv: those the last forward normalized with, kept for the backward)
// Activations in any dtype (KernelContext::act_dtype); statistics and parameters f32. A
// channels-last input is normalized in that layout, and the output stays channels-last unless the
// consumer needs plain NCHW (then an OutputEdge transposes it, its buffer after the above).
//   workspace: ... [output edge]
// Synchronized statistics (KernelContext::stats_collective; lib/core/batchnorm_sync_formula.h):
// in training, the reductions' pieces are finished into one vector of sums per shard (forward:
// sum x, sum x^2 and the count; backward: sum dy and sum dy (x - mean), times the shard weight),
// the replicas' DeviceCollective all-reduces it on the backend's stream (double, in place), and
// the finishing kernels read the global sums: nothing waits for the host, so the step is still
// recorded as one graph. The sums are (2 C + 1) doubles of the workspace, before the output edge.
// Fused relu (KernelContext::fused_relu): the normalize pass writes z = relu(y) as the output, and
// the backward reductions and dx read the output's gradient as dz and mask it by the stored z
// (in the core's layout: with an output edge, dz is transposed into a second buffer so that the
// core's z survives). Per element, forward: a read and a write less (the relu's pass), backward:
// a write less (the relu's dy; both reductions now read z and dz where they read dy), and one
// launch less each way; bit for bit the unfused kernels' results (batchnorm.cu, relu_input_grad).
//   workspace: ... [output edge] [dz edge: fused relu with an output edge only]
// Normalize handed over (KernelContext::normalize_to_next, NormalizeHandoff): where the pooling
// that alone reads the output applies the normalization (and the fused relu) as it reads x, the
// forward computes the statistics only and writes no output. Offered only where every pass goes
// by packs in the output's own layout, whose backward takes the relu's mask from x (the output is
// never read).
#include "kernels/cuda/batchnorm.cuh"
#include "kernels/cuda/channels_last.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "lib/backend/device_collective.h"
#include "lib/core/error.h"
#include "lib/layers/batchnorm.h"

namespace trainer {
namespace {

class BatchNormCuda : public LayerKernel {
 public:
  BatchNormCuda(const BatchNorm& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        name_(l.name()),
        g_(cuda::batchnorm_geometry(ctx.batch, l.channels(), l.spatial(),
                                    cuda::is_channels_last(ctx.input_layout), ctx.act_dtype)),
        momentum_(l.momentum),
        eps_(l.epsilon),
        dtype_(ctx.act_dtype),
        out_nhwc_(g_.channels_last && cuda::may_write_channels_last(ctx)),
        out_(dtype_, g_.channels_last, out_nhwc_, ctx.batch, l.channels(), l.spatial(), 1),
        relu_(ctx.fused_relu),
        takes_bias_(ctx.takes_bias),
        collective_(ctx.stats_collective),
        shard_weight_(ctx.scalars ? &ctx.scalars->shard_weight : nullptr),
        to_next_(ctx.normalize_to_next) {
    if (ctx.stats_comm)
      throw InternalError("batchnorm '" + name_ +
                          "' on the GPU synchronizes through a device collective only");
  }

  std::shared_ptr<const Layout> output_layout() const override {
    return out_nhwc_ ? cuda::channels_last() : nullptr;
  }

  size_t workspace_bytes() const override {
    return stats_bytes() + sums_bytes() + (relu_ ? 2 : 1) * align_up(out_.workspace_bytes());
  }

  // Backward reads x, the statistics and dy; y only as a fused relu's mask.
  bool backward_reads_output() const override { return relu_; }

  void bind(const KernelBinding& b) override {
    const int64_t C = g_.channels;
    a_ = TypedActivations(b, dtype_);
    gamma_ = b.param(0).f32();
    beta_ = b.param(1).f32();
    dgamma_ = b.grad(0).f32();
    dbeta_ = b.grad(1).f32();
    running_mean_ = b.buffer(0).f32();
    running_var_ = b.buffer(1).f32();
    if (takes_bias_) {
      bias_ = b.taken_bias.f32();
      dbias_ = b.taken_bias_grad.f32();
      if (!bias_ || !dbias_) throw InternalError("batchnorm '" + name_ + "': no taken bias bound");
    }
    char* base = static_cast<char*>(b.workspace);
    partial_ = reinterpret_cast<double*>(base);
    mean_ = reinterpret_cast<float*>(base + align_up(cuda::batchnorm_partial_bytes(g_)));
    inv_ = mean_ + C;
    coef_ = inv_ + C;
    sums_ = reinterpret_cast<double*>(base + stats_bytes());
    char* edge = base + stats_bytes() + sums_bytes();
    out_.bind(edge, a_.y, a_.dy, relu_ ? edge + align_up(out_.workspace_bytes()) : nullptr);
    if (to_next_) {
      NormalizeHandoff& h = *to_next_;
      h = NormalizeHandoff{};
      h.x = a_.x;
      h.y = a_.y;
      h.mean = mean_;
      h.inv = inv_;
      h.gamma = gamma_;
      h.beta = beta_;
      h.relu = relu_;
      h.ok = out_.core_y() == a_.y && cuda::batchnorm_by_packs(g_, dtype_, {a_.x, a_.y, a_.dy, a_.dx});
    }
  }

  void forward(bool training) override {
    if (!running_mean_) throw InternalError("batchnorm '" + name_ + "': no running statistics bound");
    trained_ = training;
    if (training && collective_) {
      cuda::launch_batchnorm_stat_sums(g_, dtype_, a_.x, partial_, sums_, be_.stream());
      synchronize_stats();
    } else if (training)
      cuda::launch_batchnorm_batch_stats(g_, dtype_, a_.x, momentum_, eps_, partial_, mean_, inv_,
                                         running_mean_, running_var_, be_.stream(), bias_);
    else
      cuda::launch_batchnorm_running_stats(g_, running_mean_, running_var_, eps_, mean_, inv_, be_.stream(),
                                           bias_);
    if (to_next_ && to_next_->taken) return;  // the pooling after it normalizes as it reads x
    cuda::launch_batchnorm_normalize(g_, dtype_, a_.x, mean_, inv_, gamma_, beta_, relu_, out_.core_y(),
                                     be_.stream());
    out_.finish_forward(be_.stream());
  }

  void backward() override {
    const void* dy = out_.core_dy(be_.stream());
    const void* z = relu_ ? out_.core_y() : nullptr;  // the fused relu's output, in the core's layout
    if (!(trained_ && collective_)) {
      cuda::launch_batchnorm_backward(g_, dtype_, a_.x, dy, z, mean_, inv_, gamma_, beta_, trained_, partial_,
                                      coef_, dgamma_, dbeta_, a_.dx, be_.stream(), dbias_);
      return;
    }
    cuda::launch_batchnorm_grad_sums(g_, dtype_, a_.x, dy, z, mean_, inv_, gamma_, beta_, shard_weight_,
                                     partial_, sums_, dgamma_, dbeta_, be_.stream(), dbias_);
    collective_->all_reduce_sum(sums_, 2 * g_.channels);
    cuda::launch_batchnorm_dx_from_sums(g_, dtype_, a_.x, dy, z, mean_, inv_, gamma_, beta_, sums_, coef_,
                                        a_.dx, be_.stream());
  }

  void forward_no_rows() override {
    if (!collective_) return;
    be_.zero(sums_, sums_bytes());
    synchronize_stats();
  }
  void backward_no_rows() override {
    if (!collective_) return;
    be_.zero(sums_, sums_bytes());
    collective_->all_reduce_sum(sums_, 2 * g_.channels);
  }

 private:
  // The replicas' stat sums into mean_ / inv_ and the running statistics, alike on every replica.
  void synchronize_stats() {
    if (!running_mean_) throw InternalError("batchnorm '" + name_ + "': no running statistics bound");
    collective_->all_reduce_sum(sums_, 2 * g_.channels + 1);
    cuda::launch_batchnorm_stats_from_sums(g_.channels, sums_, momentum_, eps_, mean_, inv_, running_mean_,
                                           running_var_, be_.stream(), bias_);
  }
  // Synchronized statistics: per channel two sums, then the count of values.
  size_t sums_bytes() const {
    return collective_ ? align_up(size_t(2 * g_.channels + 1) * sizeof(double)) : 0;
  }

  // [reduction pieces] [mean | inv | dx coefficients]
  size_t stats_bytes() const {
    return align_up(cuda::batchnorm_partial_bytes(g_)) + align_up(size_t(5 * g_.channels) * sizeof(float));
  }

  TypedActivations a_;
  CudaBackend& be_;
  std::string name_;
  cuda::BatchNormGeometry g_;
  float momentum_, eps_;
  DType dtype_;
  bool out_nhwc_;
  cuda::OutputEdge out_;
  bool relu_;        // KernelContext::fused_relu
  bool takes_bias_;  // KernelContext::takes_bias: bias_ and dbias_ are the layer before's
  bool trained_ = false;
  const float* bias_ = nullptr;
  float* dbias_ = nullptr;
  const float *gamma_ = nullptr, *beta_ = nullptr;
  float *dgamma_ = nullptr, *dbeta_ = nullptr, *running_mean_ = nullptr, *running_var_ = nullptr;
  double* partial_ = nullptr;
  float *mean_ = nullptr, *inv_ = nullptr, *coef_ = nullptr;
  DeviceCollective* collective_;               // synchronized statistics: the replicas' collective, else null
  const float* shard_weight_;                  // StepScalars::shard_weight (device memory)
  double* sums_ = nullptr;                     // (2 C + 1) in the workspace, synchronized statistics only
  std::shared_ptr<NormalizeHandoff> to_next_;  // KernelContext::normalize_to_next
};

}  // namespace

std::unique_ptr<LayerKernel> make_batchnorm_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<BatchNormCuda>(static_cast<const BatchNorm&>(l), ctx);
}

}  // namespace trainer
