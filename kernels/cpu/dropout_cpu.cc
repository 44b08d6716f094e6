// dropout / dropout2d on the CPU (oneDNN 2.6 has no dropout primitive). The scaled mask is kept in
// the kernel's workspace between forward and backward.  x, y, mask: (B, ...)
#include <cstring>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ops.h"
#include "lib/core/counter_rng.h"
#include "lib/layers/dropout.h"

namespace trainer {
namespace {

class DropoutCpu : public LayerKernel {
 public:
  DropoutCpu(const Dropout& l, const KernelContext& ctx)
      : rate_(l.rate),
        n_(ctx.batch * l.input_shape().numel()),
        scalars_(ctx.scalars),
        layer_(ctx.layer_index) {
    const Shape& s = l.input_shape();
    channel_size_ = l.channelwise ? s.numel() / s[0] : 1;
  }

  size_t workspace_bytes() const override { return size_t(n_) * sizeof(float); }
  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    mask_ = static_cast<float*>(b.workspace);
  }

  void forward(bool training) override {
    const float* x = a_.x;
    float* y = a_.y;
    if (!training || rate_ == 0.f) {
      training_ = false;
      if (x != y) std::memcpy(y, x, size_t(n_) * sizeof(float));
      return;
    }
    training_ = true;
    cpu::dropout_forward(x, y, mask_, n_, channel_size_, rate_, scalars_->seed,
                         dropout_stream(scalars_->step, layer_));
  }

  void backward() override {
    const float* dy = a_.dy;
    float* dx = a_.dx;
    if (!dx) return;
    if (training_)
      cpu::dropout_backward(dy, mask_, dx, n_);
    else
      std::memcpy(dx, dy, size_t(n_) * sizeof(float));
  }

 private:
  float rate_;
  int64_t n_, channel_size_ = 1;
  const StepScalars* scalars_;
  int layer_;
  BoundActivations a_;
  float* mask_ = nullptr;
  bool training_ = false;
};

}  // namespace

std::unique_ptr<LayerKernel> make_dropout_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<DropoutCpu>(static_cast<const Dropout&>(l), ctx);
}

}  // namespace trainer
