// softmax / log_softmax over the features on cuDNN (CUDNN_SOFTMAX_ACCURATE / CUDNN_SOFTMAX_LOG,
// mode INSTANCE), the tensor described as (B, F, 1, 1) once in the constructor. Backward uses y.
//   x, y, dy, dx: (B, F)
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_util.h"
#include "lib/layers/activation.h"

namespace trainer {
namespace {

class SoftmaxCuda : public LayerKernel {
 public:
  SoftmaxCuda(const Activation& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        algo_(l.kind == ActivationKind::log_softmax ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE) {
    cuda::set_nchw(desc_, ctx.batch, l.input_shape()[0], 1, 1);
  }

  void bind(const KernelBinding& b) override { a_ = BoundActivations(b); }

  void forward(bool) override {
    const float* x = a_.x;
    float* y = a_.y;
    CUDNN_CHECK(cudnnSoftmaxForward(be_.cudnn(), algo_, CUDNN_SOFTMAX_MODE_INSTANCE, &kOne, desc_, x, &kZero,
                                    desc_, y));
  }

  void backward() override {
    const float *y = a_.y, *dy = a_.dy;
    float* dx = a_.dx;
    if (!dx) return;
    CUDNN_CHECK(cudnnSoftmaxBackward(be_.cudnn(), algo_, CUDNN_SOFTMAX_MODE_INSTANCE, &kOne, desc_, y, desc_,
                                     dy, &kZero, desc_, dx));
  }

 private:
  BoundActivations a_;
  static constexpr float kOne = 1.f, kZero = 0.f;
  CudaBackend& be_;
  cudnnSoftmaxAlgorithm_t algo_;
  cuda::TensorDesc desc_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_softmax_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<SoftmaxCuda>(static_cast<const Activation&>(l), ctx);
}

}  // namespace trainer
