// position_embedding on the GPU (position_embedding.cu).  x, y, dx, dy: (B, ...) in the activation
// dtype (f32, bf16, fp16)
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/position_embedding.cuh"
#include "lib/layers/position_embedding.h"

namespace trainer {
namespace {

class PositionEmbeddingCuda : public LayerKernel {
 public:
  PositionEmbeddingCuda(const Layer& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)), B_(ctx.batch), n_(l.input_shape().numel()), t_(ctx.act_dtype) {}

  void bind(const KernelBinding& b) override {
    a_ = TypedActivations(b, t_);
    p_ = b.param(0).f32();
    dp_ = b.grad(0).f32();
  }
  void forward(bool) override {
    cuda::launch_position_embedding_forward(t_, a_.x, p_, a_.y, B_, n_, be_.stream());
  }
  void backward() override {
    cuda::launch_position_embedding_backward(t_, a_.dy, dp_, a_.dx, B_, n_, be_.stream());
  }

 private:
  CudaBackend& be_;
  int64_t B_, n_;
  DType t_;
  TypedActivations a_;
  float *p_ = nullptr, *dp_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_position_embedding_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<PositionEmbeddingCuda>(l, ctx);
}

}  // namespace trainer
