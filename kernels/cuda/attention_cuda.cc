// multi_head_attention on the GPU (lib/layers/attention.h): cuBLAS for the matrix products (the
// projections over all B L rows; per (sample, head) the scores and P v as strided batches over the
// heads' layout), attention.cu for the rest. The reference path of attention: P (B, H, L, L) is
// kept for backward, as PyTorch's math attention keeps it. Activations in the kernel's dtype
// (f32, or bf16 / fp16 with f32 accumulation); the weights' gradients in f32, overwritten.
//   kept from forward to backward: qkv in the heads' layout (3, B, H, L, hd), P, O (B, L, D)
//   transient: the 16-bit weights, qkv / dqkv as rows (B, L, 3D), dqkv in the heads' layout, dO
//   as rows and O / dO in the heads' layout, the dropped P, dS, the bias sums' scratch, and with
//   16-bit activations the scores S and their gradient dP in f32 (B, H, L, L): the softmax and its
//   backward read them unrounded, as a fused attention keeps them in registers
#include <cmath>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/bias.cuh"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "lib/layers/attention.h"

namespace trainer {
namespace {

cudaDataType_t cuda_type(DType t) {
  return t == DType::bf16 ? CUDA_R_16BF : t == DType::f16 ? CUDA_R_16F : CUDA_R_32F;
}

class AttentionCuda : public LayerKernel {
 public:
  AttentionCuda(const MultiHeadAttention& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        t_(ctx.act_dtype),
        math_(ctx.math == MathMode::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
        b_(ctx.batch),
        l_(l.length()),
        d_(l.width()),
        h_(l.heads),
        hd_(l.head_dim()),
        causal_(l.causal),
        bias_(l.use_bias),
        rate_(l.dropout),
        scale_(float(1.0 / std::sqrt(double(l.head_dim())))),
        scalars_(ctx.scalars),
        layer_(ctx.layer_index),
        split_a_(cuda::bias_grad_split(ctx.batch * l.length(), 3 * l.width(), 1)),
        split_p_(cuda::bias_grad_split(ctx.batch * l.length(), l.width(), 1)) {
    geometry_ = {b_, l_, 3, h_, hd_};
    // The transient regions, in order.
    size_t at = 0;
    const auto region = [&](size_t bytes) {
      const size_t here = at;
      at += align_up(bytes);
      return here;
    };
    at_scratch_a_ = region(bias_ ? cuda::bias_grad_scratch_bytes(split_a_) : 0);
    at_scratch_p_ = region(bias_ ? cuda::bias_grad_scratch_bytes(split_p_) : 0);
    at_wa_ = region(t_ == DType::f32 ? 0 : bytes(3 * d_ * d_));
    at_wp_ = region(t_ == DType::f32 ? 0 : bytes(d_ * d_));
    at_rows3_ = region(bytes(rows() * 3 * d_));
    at_heads3_ = region(bytes(rows() * 3 * d_));
    at_rows1_ = region(bytes(rows() * d_));
    at_heads1_ = region(bytes(rows() * d_));
    at_pd_ = region(rate_ > 0.f ? bytes(probs()) : 0);
    at_ds_ = region(bytes(probs()));
    at_s_ = region(t_ == DType::f32 ? 0 : size_t(probs()) * sizeof(float));
    transient_ = at;
  }

  size_t kept_workspace_bytes() const override {
    return align_up(bytes(rows() * 3 * d_)) + align_up(bytes(probs())) + align_up(bytes(rows() * d_));
  }
  size_t workspace_bytes() const override { return transient_; }
  bool workspace_is_transient() const override { return true; }

  void bind(const KernelBinding& b) override {
    a_ = TypedActivations(b, t_);
    size_t k = 0;
    wa_ = b.param(k).f32();
    dwa_ = b.grad(k++).f32();
    if (bias_) {
      ba_ = b.param(k).f32();
      dba_ = b.grad(k++).f32();
    }
    wp_ = b.param(k).f32();
    dwp_ = b.grad(k++).f32();
    if (bias_) {
      bp_ = b.param(k).f32();
      dbp_ = b.grad(k).f32();
    }
    char* kept = static_cast<char*>(b.kept_workspace);
    qkvh_ = kept;
    p_ = kept + align_up(bytes(rows() * 3 * d_));
    o_ = static_cast<char*>(p_) + align_up(bytes(probs()));
    ws_ = static_cast<char*>(b.workspace);
  }

  void forward(bool training) override {
    const cudaStream_t s = be_.stream();
    CUBLAS_CHECK(cublasSetMathMode(be_.cublas(), math_));
    dropping_ = training && rate_ > 0.f;
    const int64_t R = rows(), D = d_, L = l_;
    const void* wa = typed(wa_, at_wa_, 3 * D * D);
    void* qkv = ws_ + at_rows3_;
    gemm('N', 'T', R, 3 * D, D, 1.f, a_.x, D, wa, D, qkv, 3 * D);
    if (bias_) cuda::launch_bias_add(t_, qkv, ba_, R, 3 * D, 1, false, s);
    cuda::launch_rearrange_heads(t_, geometry_, qkv, qkvh_, true, s);
    // S = scale q k^T in f32, then P = softmax(S), per (sample, head).
    float* scores = f32_scratch(p_);
    gemm('N', 'T', L, L, hd_, scale_, q(), hd_, k(), hd_, scores, L, b_ * h_, L * hd_, L * hd_, L * L, true);
    cuda::launch_attention_softmax(t_, scores, p_, b_ * h_ * L, L, causal_, s);
    const void* used = p_;
    if (dropping_) {
      cuda::launch_attention_dropout(t_, p_, ws_ + at_pd_, probs(), rate_, scalars_, layer_, s);
      used = ws_ + at_pd_;
    }
    void* oh = ws_ + at_heads1_;
    gemm('N', 'N', L, hd_, L, 1.f, used, L, v(), hd_, oh, hd_, b_ * h_, L * L, L * hd_, L * hd_);
    cuda::launch_rearrange_heads(t_, one_group(), oh, o_, false, s);
    gemm('N', 'T', R, D, D, 1.f, o_, D, typed(wp_, at_wp_, D * D), D, a_.y, D);
    if (bias_) cuda::launch_bias_add(t_, a_.y, bp_, R, D, 1, false, s);
  }

  void backward() override {
    const cudaStream_t s = be_.stream();
    CUBLAS_CHECK(cublasSetMathMode(be_.cublas(), math_));
    const int64_t R = rows(), D = d_, L = l_;
    // The output projection: dO = dy Wp, dWp = dy^T O, dbp = the column sums of dy.
    void* drows = ws_ + at_rows1_;
    gemm('N', 'N', R, D, D, 1.f, a_.dy, D, typed(wp_, at_wp_, D * D), D, drows, D);
    gemm('T', 'N', D, D, R, 1.f, a_.dy, D, o_, D, dwp_, D, 1, 0, 0, 0, true);
    if (bias_) cuda::launch_bias_grad(split_p_, t_, a_.dy, dbp_, scratch(at_scratch_p_), s);
    void* doh = ws_ + at_heads1_;
    cuda::launch_rearrange_heads(t_, one_group(), drows, doh, true, s);
    // Per (sample, head): dv = P'^T dO, dP' = dO v^T, dS through the dropout and the softmax,
    // dq = dS k, dk = dS^T q; into dqkv in the heads' layout.
    char* dqkvh = ws_ + at_heads3_;
    const int64_t third = R * D;  // q | k | v blocks of the heads' layout
    const void* used = p_;
    if (dropping_) {
      cuda::launch_attention_dropout(t_, p_, ws_ + at_pd_, probs(), rate_, scalars_, layer_, s);
      used = ws_ + at_pd_;
    }
    const int64_t n = b_ * h_;
    gemm('T', 'N', L, hd_, L, 1.f, used, L, doh, hd_, dqkvh + bytes(2 * third), hd_, n, L * L, L * hd_,
         L * hd_);
    void* ds = ws_ + at_ds_;
    float* dp = f32_scratch(ds);
    gemm('N', 'T', L, L, hd_, 1.f, doh, hd_, v(), hd_, dp, L, n, L * hd_, L * hd_, L * L, true);
    cuda::launch_attention_softmax_backward(t_, p_, dp, ds, n * L, L, scale_, dropping_ ? rate_ : 0.f,
                                            scalars_, layer_, s);
    gemm('N', 'N', L, hd_, L, 1.f, ds, L, k(), hd_, dqkvh, hd_, n, L * L, L * hd_, L * hd_);
    gemm('T', 'N', L, hd_, L, 1.f, ds, L, q(), hd_, dqkvh + bytes(third), hd_, n, L * L, L * hd_, L * hd_);
    void* dqkv = ws_ + at_rows3_;
    cuda::launch_rearrange_heads(t_, geometry_, dqkvh, dqkv, false, s);
    // The input projection: dWa = dqkv^T x, dba = the column sums of dqkv, dx = dqkv Wa.
    gemm('T', 'N', 3 * D, D, R, 1.f, dqkv, 3 * D, a_.x, D, dwa_, D, 1, 0, 0, 0, true);
    if (bias_) cuda::launch_bias_grad(split_a_, t_, dqkv, dba_, scratch(at_scratch_a_), s);
    if (a_.dx) gemm('N', 'N', R, D, 3 * D, 1.f, dqkv, 3 * D, typed(wa_, at_wa_, 3 * D * D), D, a_.dx, D);
  }

 private:
  int64_t rows() const { return b_ * l_; }
  int64_t probs() const { return b_ * h_ * l_ * l_; }
  size_t bytes(int64_t n) const { return size_t(n) * dtype_bytes(t_); }
  const void* q() const { return qkvh_; }
  const void* k() const { return static_cast<const char*>(qkvh_) + bytes(rows() * d_); }
  const void* v() const { return static_cast<const char*>(qkvh_) + bytes(2 * rows() * d_); }
  cuda::HeadsGeometry one_group() const { return {b_, l_, 1, h_, hd_}; }
  double* scratch(size_t at) const { return reinterpret_cast<double*>(ws_ + at); }
  // Where the f32 scores S (and in backward dP) go: the f32 tensor they become itself (`same`: P,
  // dS) when the activations are f32, else their own transient region.
  float* f32_scratch(void* same) const {
    return static_cast<float*>(t_ == DType::f32 ? same : static_cast<void*>(ws_ + at_s_));
  }
  // A weight in the activation dtype: itself in f32, else converted into its transient region.
  const void* typed(const float* w, size_t at, int64_t n) {
    if (t_ == DType::f32) return w;
    cuda::launch_convert(ws_ + at, t_, w, DType::f32, n, false, be_.stream());
    return ws_ + at;
  }
  // Row-major C (m, n) = alpha op(A) op(B), ld* the stored widths, `batch` products at the given
  // element strides; A and B in the activation dtype, C too or f32 (f32_out: the weights'
  // gradients). cuBLAS is column-major: it computes C^T = op(B)^T op(A)^T.
  void gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a, int64_t lda,
            const void* b, int64_t ldb, void* c, int64_t ldc, int64_t batch = 1, int64_t stride_a = 0,
            int64_t stride_b = 0, int64_t stride_c = 0, bool f32_out = false) const {
    const DType ct = f32_out ? DType::f32 : t_;
    const cublasOperation_t opa = ta == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N,
                            opb = tb == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N;
    const float beta = 0.f;
    if (batch == 1) {
      CUBLAS_CHECK(cublasGemmEx(be_.cublas(), opb, opa, int(n), int(m), int(k), &alpha, b, cuda_type(t_),
                                int(ldb), a, cuda_type(t_), int(lda), &beta, c, cuda_type(ct), int(ldc),
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      return;
    }
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(be_.cublas(), opb, opa, int(n), int(m), int(k), &alpha, b,
                                            cuda_type(t_), int(ldb), stride_b, a, cuda_type(t_), int(lda),
                                            stride_a, &beta, c, cuda_type(ct), int(ldc), stride_c, int(batch),
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  CudaBackend& be_;
  DType t_;
  cublasMath_t math_;
  int64_t b_, l_, d_, h_, hd_;
  bool causal_, bias_;
  float rate_, scale_;
  const StepScalars* scalars_;
  int layer_;
  cuda::BiasGradSplit split_a_, split_p_;
  cuda::HeadsGeometry geometry_;
  size_t at_scratch_a_ = 0, at_scratch_p_ = 0, at_wa_ = 0, at_wp_ = 0, at_rows3_ = 0, at_heads3_ = 0,
         at_rows1_ = 0, at_heads1_ = 0, at_pd_ = 0, at_ds_ = 0, at_s_ = 0, transient_ = 0;
  bool dropping_ = false;
  TypedActivations a_;
  const float *wa_ = nullptr, *ba_ = nullptr, *wp_ = nullptr, *bp_ = nullptr;
  float *dwa_ = nullptr, *dba_ = nullptr, *dwp_ = nullptr, *dbp_ = nullptr;
  void *qkvh_ = nullptr, *p_ = nullptr, *o_ = nullptr;
  char* ws_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_attention_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<AttentionCuda>(static_cast<const MultiHeadAttention&>(l), ctx);
}

}  // namespace trainer
