// dense on cuBLAS sgemm. cuBLAS is column-major; a row-major (r, c) matrix is the column-major
// (c, r) one, so with x: (B, in), W: (units, in), y: (B, units) all row-major:
//   forward   y^T  = W x^T        sgemm(T, N, m=units, n=B,     k=in)
//   dW        dW^T = x^T dy       sgemm(N, T, m=in,    n=units, k=B)     (overwrites)
//   dx        dx^T = W^T dy^T     sgemm(N, N, m=in,    n=B,     k=units)
// Bias add and bias gradient are own kernels (bias.cu). The handle's math mode is set from
// ctx.math before each call (host-side state, no sync): strict fp32 = CUBLAS_DEFAULT_MATH (no
// TF32), tf32 = CUBLAS_TF32_TENSOR_OP_MATH. cuBLAS scratch is the backend's workspace.
//   x: (B, in)  W: (units, in)  b: (units)  y: (B, units)
//   W and b: the parameter views 0 and 1.
#include "kernels/cuda/bias.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "lib/layers/dense.h"

namespace trainer {
namespace {

class DenseCuda : public LayerKernel {
 public:
  DenseCuda(const Dense& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        bias_(l.use_bias),
        batch_(int(ctx.batch)),
        in_(int(l.in_features())),
        units_(int(l.units)),
        math_(ctx.math == MathMode::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
        bias_split_(cuda::bias_grad_split(ctx.batch, l.units, 1)) {}

  // The bias gradient's scratch.
  size_t workspace_bytes() const override {
    return bias_ ? align_up(cuda::bias_grad_scratch_bytes(bias_split_)) : 0;
  }
  bool workspace_is_transient() const override { return true; }

  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    w_ = b.param(0).f32();
    dw_ = b.grad(0).f32();
    if (bias_) {
      b_ = b.param(1).f32();
      db_ = b.grad(1).f32();
    }
    bias_scratch_ = static_cast<double*>(b.workspace);
  }

  void forward(bool) override {
    const float* x = a_.x;
    float* y = a_.y;
    const cublasHandle_t h = be_.cublas();
    CUBLAS_CHECK(cublasSetMathMode(h, math_));
    CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, units_, batch_, in_, &kOne, w_, in_, x, in_, &kZero,
                             y, units_));
    if (bias_) cuda::launch_bias_add(y, b_, batch_, units_, 1, be_.stream());
  }

  void backward() override {
    const float *x = a_.x, *dy = a_.dy;
    float* dx = a_.dx;
    const cublasHandle_t h = be_.cublas();
    CUBLAS_CHECK(cublasSetMathMode(h, math_));
    CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, in_, units_, batch_, &kOne, x, in_, dy, units_,
                             &kZero, dw_, in_));
    if (bias_) cuda::launch_bias_grad(bias_split_, dy, db_, bias_scratch_, be_.stream());
    if (dx)
      CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in_, batch_, units_, &kOne, w_, in_, dy, units_,
                               &kZero, dx, in_));
  }

 private:
  BoundActivations a_;
  static constexpr float kOne = 1.f, kZero = 0.f;
  CudaBackend& be_;
  bool bias_;
  int batch_, in_, units_;
  cublasMath_t math_;
  cuda::BiasGradSplit bias_split_;
  double* bias_scratch_ = nullptr;
  const float *w_ = nullptr, *b_ = nullptr;
  float *dw_ = nullptr, *db_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_dense_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<DenseCuda>(static_cast<const Dense&>(l), ctx);
}

}  // namespace trainer
