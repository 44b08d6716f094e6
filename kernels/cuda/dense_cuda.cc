// dense on cuBLAS sgemm. cuBLAS is column-major; a row-major (r, c) matrix is the column-major
// (c, r) one, so with x: (B, in), W: (units, in), y: (B, units) all row-major:
//   forward   y^T  = W x^T        sgemm(T, N, m=units, n=B,     k=in)
//   dW        dW^T = x^T dy       sgemm(N, T, m=in,    n=units, k=B)     (overwrites)
//   dx        dx^T = W^T dy^T     sgemm(N, N, m=in,    n=B,     k=units)
// The three products are cuBLASLt matmuls planned once in bind() (kernels/cuda/lt_matmul.h), with
// the bias fused: the forward adds it in the BIAS epilogue and dW's product sums its gradient in
// the BGRADB epilogue, so a dense layer is one kernel each way instead of three (mnist_cnn: 6 fewer
// launches a step). Where cuBLASLt has no algorithm for an epilogue or a product, that step falls
// back to cublasSgemm/cublasGemmEx and the bias kernels of bias.cu. Math: strict fp32 computes
// without TF32, tf32 with it (cuBLAS's handle math mode for the fallbacks).
// Activations in bf16 (or fp16, ctx.act_dtype): cublasGemmEx on tensor cores with f32
// accumulation; W is converted into the workspace by each call that reads it, and dW is written
// in f32 directly (cuBLAS takes 16-bit A and B with an f32 C).
//   x: (B, in)  W: (units, in)  b: (units)  y: (B, units)
//   W and b: the parameter views 0 and 1 (f32).
//   workspace: [bias gradient scratch] [W in the activation dtype, when it is not f32]
#include "kernels/cuda/bias.cuh"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/lt_matmul.h"
#include "lib/layers/dense.h"

namespace trainer {
namespace {

class DenseCuda : public LayerKernel {
 public:
  DenseCuda(const Dense& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        bias_(l.use_bias && !ctx.bias_to_batchnorm),  // else the batchnorm after it takes the bias
        batch_(int(ctx.batch * l.rows())),            // per_position: every row of every sample
        in_(int(l.in_features())),
        units_(int(l.units)),
        math_mode_(ctx.math),
        tune_(!ctx.deterministic),
        math_(ctx.math == MathMode::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
        dtype_(ctx.act_dtype),
        bias_split_(cuda::bias_grad_split(ctx.batch * l.rows(), l.units, 1)) {}

  size_t workspace_bytes() const override { return bias_bytes() + weight_bytes(); }
  bool workspace_is_transient() const override { return true; }

  void bind(const KernelBinding& b) override {
    a_ = TypedActivations(b, dtype_);
    w_typed_ = weight_bytes() ? static_cast<char*>(b.workspace) + bias_bytes() : nullptr;
    w_ = b.param(0).f32();
    dw_ = b.grad(0).f32();
    if (bias_) {
      b_ = b.param(1).f32();
      db_ = b.grad(1).f32();
    }
    bias_scratch_ = static_cast<double*>(b.workspace);
    plan_products();
    if (!tune_) return;  // --deterministic: the heuristic's choices, never a timing's
    // The bound tensors serve as the measurement's: nothing has run yet, the step overwrites
    // what the trials write (y, dW, dx, the bias gradient, the 16-bit copy of W).
    const void* w = dtype_ == DType::f32 ? static_cast<const void*>(w_) : w_typed_;
    // A forward-only binding (`trainer bench`'s matmul) has no gradients to time the others on.
    if (fwd_.ok()) fwd_.tune(w, a_.x, a_.y);
    if (dw_plan_.ok() && a_.dy && dw_) dw_plan_.tune(a_.x, a_.dy, dw_);
    if (dx_plan_.ok() && a_.dy && a_.dx) dx_plan_.tune(w, a_.dy, a_.dx);
  }

  void forward(bool) override {
    const cublasHandle_t h = be_.cublas();
    CUBLAS_CHECK(cublasSetMathMode(h, math_));
    const void* w = typed_weights();
    if (fwd_.ok())
      fwd_.run(w, a_.x, a_.y);
    else
      gemm(CUBLAS_OP_T, CUBLAS_OP_N, units_, batch_, in_, w, dtype_, a_.x, dtype_, a_.y, dtype_, units_);
    if (bias_ && !fwd_bias_fused_)
      cuda::launch_bias_add(dtype_, a_.y, b_, batch_, units_, 1, false, be_.stream());
  }

  void backward() override {
    const cublasHandle_t h = be_.cublas();
    CUBLAS_CHECK(cublasSetMathMode(h, math_));
    if (dw_plan_.ok())
      dw_plan_.run(a_.x, a_.dy, dw_);
    else
      gemm(CUBLAS_OP_N, CUBLAS_OP_T, in_, units_, batch_, a_.x, dtype_, a_.dy, dtype_, dw_, DType::f32, in_);
    if (bias_ && !dw_bias_fused_)
      cuda::launch_bias_grad(bias_split_, dtype_, a_.dy, db_, bias_scratch_, be_.stream());
    if (!a_.dx) return;
    const void* w = typed_weights();
    if (dx_plan_.ok())
      dx_plan_.run(w, a_.dy, a_.dx);
    else
      gemm(CUBLAS_OP_N, CUBLAS_OP_N, in_, batch_, units_, w, dtype_, a_.dy, dtype_, a_.dx, dtype_, in_);
  }

 private:
  // The products, each with the bias fused where cuBLASLt has an algorithm for the epilogue.
  //   forward  y^T  = W x^T (+ b)     dW  dW^T = x^T dy (db = column sums of dy)    dx  dx^T = W^T dy^T
  void plan_products() {
    using cuda::LtMatmul;
    const auto plan = [&](cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, DType d,
                          cublasLtEpilogue_t epilogue, const void* vec, bool* fused) {
      if (fused) {
        LtMatmul p(be_, math_mode_, ta, tb, m, n, k, dtype_, d, epilogue, vec);
        *fused = p.ok();
        if (p.ok()) return p;
      }
      return LtMatmul(be_, math_mode_, ta, tb, m, n, k, dtype_, d, CUBLASLT_EPILOGUE_DEFAULT, nullptr);
    };
    fwd_ = plan(CUBLAS_OP_T, CUBLAS_OP_N, units_, batch_, in_, dtype_, CUBLASLT_EPILOGUE_BIAS, b_,
                bias_ ? &fwd_bias_fused_ : nullptr);
    dw_plan_ = plan(CUBLAS_OP_N, CUBLAS_OP_T, in_, units_, batch_, DType::f32, CUBLASLT_EPILOGUE_BGRADB, db_,
                    bias_ ? &dw_bias_fused_ : nullptr);
    dx_plan_ = plan(CUBLAS_OP_N, CUBLAS_OP_N, in_, batch_, units_, dtype_, CUBLASLT_EPILOGUE_DEFAULT, nullptr,
                    nullptr);
  }

  size_t bias_bytes() const { return bias_ ? align_up(cuda::bias_grad_scratch_bytes(bias_split_)) : 0; }
  size_t weight_bytes() const {
    return dtype_ == DType::f32 ? 0 : align_up(size_t(units_) * size_t(in_) * dtype_bytes(dtype_));
  }
  // W in the activation dtype (W itself in f32).
  const void* typed_weights() {
    if (dtype_ == DType::f32) return w_;
    cuda::launch_convert(w_typed_, dtype_, w_, DType::f32, int64_t(units_) * in_, false, be_.stream());
    return w_typed_;
  }
  static cudaDataType_t cuda_type(DType t) {
    return t == DType::bf16 ? CUDA_R_16BF : t == DType::f16 ? CUDA_R_16F : CUDA_R_32F;
  }
  // Column-major C (m, n) = op(A) op(B), lda = rows of A as stored (the row-major matrices' widths
  // are the leading dimensions: A's is (ta == T ? k : m), B's (tb == T ? n : k)). All f32: sgemm,
  // as before mixed precision; otherwise cublasGemmEx with f32 accumulation.
  void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a, DType at,
            const void* b, DType bt, void* c, DType ct, int ldc) {
    const int lda = ta == CUBLAS_OP_T ? k : m, ldb = tb == CUBLAS_OP_T ? n : k;
    const cublasHandle_t h = be_.cublas();
    if (at == DType::f32 && bt == DType::f32 && ct == DType::f32) {
      CUBLAS_CHECK(cublasSgemm(h, ta, tb, m, n, k, &kOne, static_cast<const float*>(a), lda,
                               static_cast<const float*>(b), ldb, &kZero, static_cast<float*>(c), ldc));
      return;
    }
    CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, &kOne, a, cuda_type(at), lda, b, cuda_type(bt), ldb, &kZero,
                              c, cuda_type(ct), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  TypedActivations a_;
  static constexpr float kOne = 1.f, kZero = 0.f;
  CudaBackend& be_;
  bool bias_;
  int batch_, in_, units_;
  MathMode math_mode_;
  bool tune_;  // measure the cuBLASLt candidates at bind (not under --deterministic)
  cublasMath_t math_;
  cuda::LtMatmul fwd_, dw_plan_, dx_plan_;
  bool fwd_bias_fused_ = false, dw_bias_fused_ = false;
  DType dtype_;
  void* w_typed_ = nullptr;
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
