// dropout / dropout2d on the GPU with the CPU's counter-based masks (dropout.cu): seed and step
// are read from the executor's StepScalars in device memory, so masks match the CPU bit for bit
// and a captured step replays with fresh masks. The scaled mask (0 or 1/(1-rate)) is kept in
// the kernel's workspace between forward and backward; eval (or rate 0) is a device copy.
//   x, y, mask, dy, dx: (B, ...)
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dropout.cuh"
#include "lib/layers/dropout.h"

namespace trainer {
namespace {

class DropoutCuda : public LayerKernel {
 public:
  DropoutCuda(const Dropout& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        rate_(l.rate),
        n_(ctx.batch * l.input_shape().numel()),
        scalars_(ctx.scalars),
        layer_(ctx.layer_index),
        t_(ctx.act_dtype) {
    const Shape& s = l.input_shape();
    channel_size_ = l.channelwise ? s.numel() / s[0] : 1;
  }

  size_t workspace_bytes() const override { return size_t(n_) * sizeof(float); }
  void bind(const KernelBinding& b) override {
    a_ = TypedActivations(b, t_);
    mask_ = static_cast<float*>(b.workspace);
  }

  void forward(bool training) override {
    const void* x = a_.x;
    void* y = a_.y;
    training_ = training && rate_ != 0.f;
    if (!training_) {
      copy(x, y);
      return;
    }
    if (!scalars_) throw InternalError("dropout: no step scalars in the kernel context");
    cuda::launch_dropout_forward(t_, x, y, mask_, n_, channel_size_, rate_, scalars_, layer_, be_.stream());
  }

  void backward() override {
    const void* dy = a_.dy;
    void* dx = a_.dx;
    if (!dx) return;
    if (training_)
      cuda::launch_dropout_backward(t_, dy, mask_, dx, n_, be_.stream());
    else
      copy(dy, dx);
  }

 private:
  TypedActivations a_;
  void copy(const void* from, void* to) {
    if (from != to)
      CUDA_CHECK(
          cudaMemcpyAsync(to, from, size_t(n_) * dtype_bytes(t_), cudaMemcpyDeviceToDevice, be_.stream()));
  }

  CudaBackend& be_;
  float rate_;
  int64_t n_, channel_size_ = 1;
  const StepScalars* scalars_;
  int layer_;
  DType t_;
  float* mask_ = nullptr;
  bool training_ = false;
};

}  // namespace

std::unique_ptr<LayerKernel> make_dropout_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<DropoutCuda>(static_cast<const Dropout&>(l), ctx);
}

}  // namespace trainer
