// layer_norm / rms_norm on the GPU (layer_norm.cu). The workspace keeps each row's mean and
// 1/std from forward to backward, then the parameter gradients' partial sums. Backward adds into
// the input's gradient where the executor asks (a residual stream's other consumer wrote it first),
// which saves the executor a scratch gradient and a pass to add it. Where the input is a two-input
// add's output that only this layer reads first (AddHandoff), forward computes the sum itself:
// a and b read once, the sum written beside y (GPT-2 small: 24 adds a step fewer).
//   x, y, dy, dx: (B, ..., D) in the activation dtype (f32, bf16, fp16); w, b and the statistics f32
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/layer_norm.cuh"
#include "lib/layers/layer_norm.h"

namespace trainer {
namespace {

class LayerNormCuda : public LayerKernel {
 public:
  LayerNormCuda(const LayerNorm& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        rms_(l.rms),
        bias_(l.bias),
        eps_(l.epsilon),
        rows_(ctx.batch * l.rows_per_sample()),
        d_(l.features()),
        t_(ctx.act_dtype),
        from_add_(ctx.add_from_input) {}

  bool accumulates_input_grads() const override { return true; }
  size_t workspace_bytes() const override {
    return size_t(2 * rows_ + 2 * cuda::layer_norm_chunks(rows_, d_) * d_) * sizeof(float);
  }
  void bind(const KernelBinding& b) override {
    a_ = TypedActivations(b, t_);
    accumulate_ = !b.accumulate_input_grads.empty() && b.accumulate_input_grads[0];
    w_ = b.param(0).f32();
    dw_ = b.grad(0).f32();
    if (bias_) {
      b_ = b.param(1).f32();
      db_ = b.grad(1).f32();
    }
    stats_ = static_cast<float*>(b.workspace);
    partials_ = stats_ + 2 * rows_;
    if (from_add_ && from_add_->ok && from_add_->sum == a_.x && from_add_->n == rows_ * d_)
      from_add_->taken = true;
  }

  void forward(bool) override {
    if (from_add_ && from_add_->taken)
      cuda::launch_layer_norm_forward(t_, from_add_->a, w_, b_, a_.y, stats_, rows_, d_, eps_, rms_,
                                      be_.stream(), from_add_->b, const_cast<void*>(a_.x));
    else
      cuda::launch_layer_norm_forward(t_, a_.x, w_, b_, a_.y, stats_, rows_, d_, eps_, rms_, be_.stream());
  }
  void backward() override {
    cuda::launch_layer_norm_backward(t_, a_.x, a_.dy, w_, stats_, a_.dx, accumulate_, dw_, db_, partials_,
                                     rows_, d_, rms_, be_.stream());
  }

 private:
  CudaBackend& be_;
  bool rms_, bias_;
  bool accumulate_ = false;  // add into the input's gradient
  float eps_;
  int64_t rows_, d_;
  DType t_;
  TypedActivations a_;
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr, *stats_ = nullptr, *partials_ = nullptr;
  std::shared_ptr<AddHandoff> from_add_;  // the add before it, whose forward this one may do
};

}  // namespace

std::unique_ptr<LayerKernel> make_layer_norm_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<LayerNormCuda>(static_cast<const LayerNorm&>(l), ctx);
}

}  // namespace trainer
