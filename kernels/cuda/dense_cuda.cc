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
// The bias is f32; where cuBLASLt has no algorithm for an f32 bias beside a 16-bit y (the bf16
// products of GPT-2's MLP), the forward's epilogue takes the executor's 16-bit copy of it (or,
// without that copy, the bias converted into the workspace before the product: the same bits).
// A gelu (tanh form) after the layer runs in the forward product's epilogue
// (KernelContext::fused_gelu, GELU_AUX_BIAS): y = gelu(W x + b), and the pre-activation W x + b
// is kept (the aux matrix, kept workspace) for backward, which first makes the gradient at the
// pre-activation (eltwise.cu's gelu backward, over the output's gradient, which nothing reads
// after this layer: KernelContext::fused_relu's rule) and runs the products on it. Without an
// algorithm for that epilogue the product writes the pre-activation and eltwise.cu's gelu makes y
// from it.
// That gelu's backward is taken over by the dense layer after it where it alone reads the gelu's
// output (KernelContext::gelu_to_next / gelu_from_input, GeluHandoff): that layer's dx product
// multiplies by gelu' at the kept pre-activation in its DGELU epilogue, so GPT-2's MLP runs no
// gelu kernel either way.
// Activations in bf16 (or fp16, ctx.act_dtype): cublasGemmEx on tensor cores with f32
// accumulation; W is converted into the workspace by each call that reads it, and dW is written
// in f32 directly (cuBLAS takes 16-bit A and B with an f32 C).
// A 16-bit row of y whose bytes are not a multiple of 16 (GPT-2's 50,257 logits) leaves cuBLAS
// only its unaligned kernels (sm75 CUTLASS, align1: 14.5 of a 53 ms GPT-2 step): a large such
// layer computes as if it had padded_ units, a multiple of 8: the 16-bit copy of W gets zero rows
// up to padded_, y and dy are copied out of / into buffers of padded rows (cudaMemcpy2DAsync; the
// pad of dy zeroed), and the bias, if any, is added to y after the copy. The padded buffer holds
// a chunk of rows (at most 256 MiB, a divisor of the rows; GPT-2 small's logits at batch 8: 4
// chunks of 2,048 rows instead of one 823 MB copy, which was the step's largest transient buffer;
// chunks of 64 MiB cost 1.3 ms a step more on an H200): the products run chunk by chunk, dW adding
// each chunk's share in f32.
// Where the output goes to a loss that reads rows at a pitch (KernelContext::output_pitch_ok, the
// token loss; without a bias or a fused gelu here), y and dy are themselves the padded rows
// (direct_, output_pitch()): no chunks, no copies (1.2 ms of GPT-2 small's step on an H200), and
// backward zeroes dy's pad columns in place (the loss leaves them; nothing reads dy after).
//   x: (B, in)  W: (units, in)  b: (units)  y: (B, units)
//   W and b: the parameter views 0 and 1 (f32).
//   workspace: [bias gradient scratch] [W in the activation dtype, when it is not f32 and not
//              padded] [y or dy with padded rows (B, padded_), when padded_ and not direct_] [b in
//              the activation dtype, when the executor keeps no 16-bit copy of it]
//   kept workspace: [with a fused gelu: the pre-activation (B, units)] [padded_: W in the
//              activation dtype with its zero rows, made by forward, read by backward]
#include <algorithm>
#include <memory>
#include <type_traits>

#include "kernels/cuda/bias.cuh"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/eltwise.cuh"
#include "kernels/cuda/lt_matmul.h"
#include "lib/layers/dense.h"

namespace trainer {
namespace {

class DenseCuda : public LayerKernel {
 public:
  DenseCuda(const Dense& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        bias_(l.use_bias && !ctx.bias_to_batchnorm),  // else the batchnorm after it takes the bias
        gelu_(ctx.fused_gelu),
        gelu_to_next_(ctx.gelu_to_next),
        gelu_from_input_(ctx.gelu_from_input),
        batch_(int(ctx.batch * l.rows())),  // per_position: every row of every sample
        in_(int(l.in_features())),
        units_(int(l.units)),
        math_mode_(ctx.math),
        tune_(!ctx.deterministic && ctx.measure),
        math_(ctx.math == MathMode::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
        dtype_(ctx.act_dtype),
        padded_(padded_units(ctx.batch * l.rows(), l.units, ctx.act_dtype)),
        direct_(padded_ && ctx.output_pitch_ok && !bias_ && !gelu_),
        chunk_(padded_ && !direct_ ? chunk_rows(int(ctx.batch * l.rows()), padded_, ctx.act_dtype)
                                   : int(ctx.batch * l.rows())),
        // dy (rows, units) is channels-last with one position a row: the column sums read whole rows
        // (coalesced), not one column a block (strided: 83 us for GPT-2's 8,192 x 3,072 in bf16)
        bias_split_(cuda::bias_grad_split(ctx.batch * l.rows(), l.units, 1, true, ctx.act_dtype)) {}

  // Backward reads x, W and dy, never y.
  bool backward_reads_output() const override { return false; }
  size_t workspace_bytes() const override {
    return bias_bytes() + transient_weight_bytes() + pad_bytes() + low_bias_bytes();
  }
  // A padded layer's 16-bit W (with its zero rows) is made in forward and kept for backward: one
  // conversion a step instead of three (GPT-2's lm_head: 2 x 62 us on an H200).
  size_t kept_workspace_bytes() const override { return (gelu_ ? pre_bytes() : 0) + kept_weight_bytes(); }
  // direct_: y and dy are the padded rows themselves (read at that pitch by the loss).
  size_t output_bytes() const override {
    return direct_ ? size_t(batch_) * size_t(padded_) * dtype_bytes(dtype_) : 0;
  }
  int64_t output_pitch() const override { return direct_ ? padded_ : 0; }
  // Unpadded 16-bit products read W from the executor's 16-bit copy (padded ones need zero rows).
  bool wants_low_precision_params() const override { return dtype_ != DType::f32 && !padded_; }
  bool workspace_is_transient() const override { return true; }

  void bind(const KernelBinding& b) override {
    a_ = TypedActivations(b, dtype_);
    w_typed_ = kept_weight_bytes()        ? static_cast<char*>(b.kept_workspace) + (gelu_ ? pre_bytes() : 0)
               : transient_weight_bytes() ? static_cast<char*>(b.workspace) + bias_bytes()
                                          : nullptr;
    pad_ = padded_ ? static_cast<char*>(b.workspace) + bias_bytes() + transient_weight_bytes() : nullptr;
    dpre_ = gelu_ ? const_cast<void*>(a_.dy) : nullptr;  // the fused gelu's backward writes over dy
    pre_ = gelu_ ? b.kept_workspace : nullptr;
    if (gelu_to_next_) {  // the layer after binds next, and may take the gelu's backward over
      gelu_to_next_->pre = pre_;
      gelu_to_next_->ld = units_;
      gelu_to_next_->taken = false;
    }
    w_ = b.param(0).f32();
    w_low_ = padded_ ? nullptr : b.param_low(0, dtype_);
    dw_ = b.grad(0).f32();
    if (bias_) {
      b_ = b.param(1).f32();
      b_low_ = b.param_low(1, dtype_);
      db_ = b.grad(1).f32();
      if (!b_low_ && low_bias_bytes()) {  // converted before each forward product
        b_typed_ = static_cast<char*>(b.workspace) + bias_bytes() + transient_weight_bytes() + pad_bytes();
        b_low_ = b_typed_;
      }
    }
    bias_scratch_ = static_cast<double*>(b.workspace);
    plan_products();
    if (!tune_) return;  // --deterministic, or a batch size not measured: the heuristic's choices
    // The bound tensors serve as the measurement's: nothing has run yet, the step overwrites
    // what the trials write (y, dW, dx, the bias gradient, the 16-bit copy of W).
    const void* w = dtype_ == DType::f32 ? static_cast<const void*>(w_) : w_low_ ? w_low_ : w_typed_;
    // A forward-only binding (`trainer bench`'s matmul) has no gradients to time the others on.
    if (fwd_.ok()) fwd_.tune(w, a_.x, padded_ && !direct_ ? pad_ : fwd_gelu_fused_ || !gelu_ ? a_.y : pre_);
    const void* dy = padded_ && !direct_ ? pad_ : gelu_ ? dpre_ : a_.dy;
    if (dw_plan_.ok() && a_.dy && dw_) dw_plan_.tune(a_.x, dy, dw_);
    if (dw_tail_.ok() && a_.dy && dw_)
      dw_tail_.tune(a_.x, column_at(dy, dw_cols_), dw_ + size_t(dw_cols_) * in_);
    if (dx_plan_.ok() && a_.dy && a_.dx) dx_plan_.tune(w, dy, a_.dx);
  }

  void forward(bool) override {
    const cublasHandle_t h = be_.cublas();
    CUBLAS_CHECK(cublasSetMathMode(h, math_));
    const void* w = typed_weights();
    if (b_typed_ && fwd_bias_fused_)
      cuda::launch_convert(b_typed_, dtype_, b_, DType::f32, units_, false, be_.stream());
    void* out = gelu_ && !fwd_gelu_fused_ ? pre_ : a_.y;  // what the product writes
    if (!padded_ || direct_) {
      if (fwd_.ok())
        fwd_.run(w, a_.x, out);
      else
        gemm(CUBLAS_OP_T, CUBLAS_OP_N, w_rows(), batch_, in_, w, dtype_, a_.x, dtype_, out, dtype_,
             padded_ ? padded_ : units_);
    }
    // The padded product a chunk of rows at a time (direct_: in one product above).
    for (int c = 0; padded_ && !direct_ && c < batch_ / chunk_; ++c) {
      const void* x = row_at(a_.x, c, in_);
      if (fwd_.ok())
        fwd_.run(w, x, pad_);
      else
        gemm(CUBLAS_OP_T, CUBLAS_OP_N, padded_, chunk_, in_, w, dtype_, x, dtype_, pad_, dtype_, padded_);
      copy_rows(row_at(out, c, units_), units_, pad_, padded_);
    }
    if (bias_ && !fwd_bias_fused_)
      cuda::launch_bias_add(dtype_, out, b_, batch_, units_, 1, false, be_.stream());
    if (gelu_ && !fwd_gelu_fused_)
      cuda::launch_eltwise_forward(cuda::Eltwise::gelu_tanh, 0.f, dtype_, pre_, a_.y,
                                   int64_t(batch_) * units_, be_.stream());
  }

  void backward() override {
    const cublasHandle_t h = be_.cublas();
    CUBLAS_CHECK(cublasSetMathMode(h, math_));
    const void* w = a_.dx ? (kept_weight_bytes() ? w_typed_ : typed_weights()) : nullptr;  // kept: forward's
    const void* dy_all = a_.dy;  // the gradient at the product's output
    if (gelu_ && !(gelu_to_next_ && gelu_to_next_->taken)) {
      cuda::launch_eltwise_backward(cuda::Eltwise::gelu_tanh, 0.f, dtype_, pre_, a_.dy, dpre_,
                                    int64_t(batch_) * units_, be_.stream());
      dy_all = dpre_;
    }
    const size_t e = dtype_bytes(dtype_);
    if (direct_)  // the pad meets W's zero rows in dx: no NaN from old bytes
      CUDA_CHECK(cudaMemset2DAsync(static_cast<char*>(const_cast<void*>(a_.dy)) + size_t(units_) * e,
                                   size_t(padded_) * e, 0, size_t(padded_ - units_) * e, size_t(batch_),
                                   be_.stream()));
    for (int c = 0; c < batch_ / chunk_; ++c) {  // one chunk: every row, unless padded_ (not direct_)
      const void* dy = row_at(dy_all, c, units_);
      const void* x = row_at(a_.x, c, in_);
      if (padded_ && !direct_) {
        copy_rows(pad_, padded_, dy, units_);  // the pad zeroed, as direct_'s above
        CUDA_CHECK(cudaMemset2DAsync(static_cast<char*>(pad_) + size_t(units_) * e, size_t(padded_) * e, 0,
                                     size_t(padded_ - units_) * e, size_t(chunk_), be_.stream()));
        dy = pad_;
      }
      const float add = c > 0 ? 1.f : 0.f;  // dW: the chunks' shares summed in f32
      if (dw_plan_.ok())
        dw_plan_.run(x, dy, dw_, add);
      else
        gemm(CUBLAS_OP_N, CUBLAS_OP_T, in_, dw_cols_, chunk_, x, dtype_, dy, dtype_, dw_, DType::f32, in_,
             padded_, add);
      if (dw_cols_ < units_) {  // the rows of dW past the multiple of 8
        const void* dy_tail = column_at(dy, dw_cols_);
        float* dw_tail = dw_ + size_t(dw_cols_) * in_;
        if (dw_tail_.ok())
          dw_tail_.run(x, dy_tail, dw_tail, add);
        else
          gemm(CUBLAS_OP_N, CUBLAS_OP_T, in_, units_ - dw_cols_, chunk_, x, dtype_, dy_tail, dtype_, dw_tail,
               DType::f32, in_, padded_, add);
      }
      if (!a_.dx) continue;
      void* dx = row_at(a_.dx, c, in_);
      if (dx_plan_.ok())
        dx_plan_.run(w, dy, dx);
      else
        gemm(CUBLAS_OP_N, CUBLAS_OP_N, in_, chunk_, w_rows(), w, dtype_, dy, dtype_, dx, dtype_, in_,
             padded_);
    }
    if (bias_ && !dw_bias_fused_)
      cuda::launch_bias_grad(bias_split_, dtype_, dy_all, db_, bias_scratch_, be_.stream());
  }

 private:
  // The products, each with the bias (and a fused gelu) in its epilogue where cuBLASLt has an
  // algorithm for it: the epilogues are tried in order, the last being none.
  //   forward  y^T  = W x^T (+ b)     dW  dW^T = x^T dy (db = column sums of dy)    dx  dx^T = W^T dy^T
  void plan_products() {
    using cuda::LtEpilogue;
    // With padded_, y (the forward's D) and dy (B of dW and dx) have rows of padded_ elements, and
    // the forward and dx run over padded_ units (W's zero rows); the bias is added after the copy.
    // A chunk of rows each (every row unless padded_); the bias gradient's epilogue only for one.
    std::vector<LtEpilogue> fwd;  // the gelu (with the bias), then the bias alone
    size_t gelu_tries = 0;
    if (!padded_) {
      if (gelu_)
        fwd = bias_ ? cuda::bias_tries(CUBLASLT_EPILOGUE_GELU_AUX_BIAS, b_, b_low_, dtype_, pre_, units_)
                    : std::vector<LtEpilogue>{
                          LtEpilogue{CUBLASLT_EPILOGUE_GELU_AUX, nullptr, DType::f32, pre_, units_}};
      gelu_tries = fwd.size();
      for (const LtEpilogue& e : cuda::bias_tries(CUBLASLT_EPILOGUE_BIAS, b_, b_low_, dtype_))
        fwd.push_back(e);
    }
    size_t which = 0;
    fwd_ = cuda::plan_first(be_, math_mode_, CUBLAS_OP_T, CUBLAS_OP_N, w_rows(), chunk_, in_, dtype_, dtype_,
                            fwd, &which, 0, padded_);
    fwd_gelu_fused_ = which < gelu_tries;
    fwd_bias_fused_ = bias_ && which < fwd.size();
    const std::vector<LtEpilogue> dw =
        chunk_ == batch_ ? cuda::bias_tries(CUBLASLT_EPILOGUE_BGRADB, db_, nullptr, DType::f32)
                         : std::vector<LtEpilogue>{};
    // A padded layer without a bias computes dW's rows up to the last multiple of 8 in one product
    // and the rest in a second: with an n not a multiple of 8 (GPT-2's 50,257 rows) cuBLASLt has only
    // its sm80 CUTLASS kernels (1.26 ms on an H200, where lm_head's other two products take 0.79 and
    // 0.89 ms).
    dw_cols_ = padded_ && !bias_ && units_ > 8 ? units_ - units_ % 8 : units_;
    dw_plan_ = cuda::plan_first(be_, math_mode_, CUBLAS_OP_N, CUBLAS_OP_T, in_, dw_cols_, chunk_, dtype_,
                                DType::f32, dw, &which, padded_, 0);
    dw_bias_fused_ = which < dw.size();
    if (dw_cols_ < units_)
      dw_tail_ = cuda::LtMatmul(be_, math_mode_, CUBLAS_OP_N, CUBLAS_OP_T, in_, units_ - dw_cols_, chunk_,
                                dtype_, DType::f32, {}, padded_, 0);
    // dx through the gelu before this layer (GeluHandoff), in one product (not padded chunks).
    std::vector<LtEpilogue> dx;
    const GeluHandoff* h = gelu_from_input_.get();
    if (h && h->pre && h->ld == in_ && chunk_ == batch_ && a_.dx)
      dx.push_back(LtEpilogue{CUBLASLT_EPILOGUE_DGELU, nullptr, DType::f32, const_cast<void*>(h->pre), in_});
    dx_plan_ = cuda::plan_first(be_, math_mode_, CUBLAS_OP_N, CUBLAS_OP_N, in_, chunk_, w_rows(), dtype_,
                                dtype_, dx, &which, padded_, 0);
    if (!dx.empty() && which == 0 && dx_plan_.ok()) gelu_from_input_->taken = true;
  }

  // Units rounded up to 16 bytes of the dtype, for a layer whose rows are not already (0 when they
  // are, or when the output is under 2^20 values: there the copies would cost more than they save).
  static int padded_units(int64_t rows, int64_t units, DType d) {
    const int64_t per16 = 16 / int64_t(dtype_bytes(d));
    if (d == DType::f32 || units % per16 == 0 || rows * units < (int64_t(1) << 20)) return 0;
    return int((units + per16 - 1) / per16 * per16);
  }
  // The rows of a padded chunk: the largest divisor of `rows` whose padded rows fit in 256 MiB, if
  // it is at least a quarter of that; else every row (one chunk).
  static int chunk_rows(int rows, int padded, DType d) {
    const int64_t cap = int64_t(cuda::dense_pad_chunk_bytes());
    const int fit = int(std::max<int64_t>(1, cap / (int64_t(padded) * int64_t(dtype_bytes(d)))));
    if (rows <= fit) return rows;
    for (int c = fit; c >= std::max(1, fit / 4); --c)
      if (rows % c == 0) return c;
    return rows;
  }
  size_t pad_bytes() const {
    return padded_ && !direct_ ? align_up(size_t(chunk_) * size_t(padded_) * dtype_bytes(dtype_)) : 0;
  }
  // Chunk c's first row of a (rows, cols) activation in the activation dtype.
  template <class P>
  P* row_at(P* t, int c, int cols) const {
    using Byte = std::conditional_t<std::is_const<P>::value, const char, char>;
    return reinterpret_cast<P*>(reinterpret_cast<Byte*>(t) +
                                size_t(c) * size_t(chunk_) * size_t(cols) * dtype_bytes(dtype_));
  }
  // Column c of dy's rows (padded_ elements apart), in the activation dtype.
  const void* column_at(const void* dy, int c) const {
    return static_cast<const char*>(dy) + size_t(c) * dtype_bytes(dtype_);
  }
  // dst rows of dst_cols elements <- src rows of src_cols, the first units_ of each, chunk_ rows.
  void copy_rows(void* dst, int dst_cols, const void* src, int src_cols) {
    const size_t e = dtype_bytes(dtype_);
    CUDA_CHECK(cudaMemcpy2DAsync(dst, size_t(dst_cols) * e, src, size_t(src_cols) * e, size_t(units_) * e,
                                 size_t(chunk_), cudaMemcpyDeviceToDevice, be_.stream()));
  }

  size_t pre_bytes() const { return align_up(size_t(batch_) * size_t(units_) * dtype_bytes(dtype_)); }
  size_t low_bias_bytes() const {
    return bias_ && dtype_ != DType::f32 ? align_up(size_t(units_) * dtype_bytes(dtype_)) : 0;
  }
  size_t bias_bytes() const { return bias_ ? align_up(cuda::bias_grad_scratch_bytes(bias_split_)) : 0; }
  int w_rows() const { return padded_ ? padded_ : units_; }  // rows of the products' W
  size_t weight_bytes() const {
    return dtype_ == DType::f32 ? 0 : align_up(size_t(w_rows()) * size_t(in_) * dtype_bytes(dtype_));
  }
  size_t kept_weight_bytes() const { return padded_ ? weight_bytes() : 0; }
  size_t transient_weight_bytes() const { return padded_ ? 0 : weight_bytes(); }
  // W in the activation dtype (W itself in f32), with zero rows up to padded_.
  const void* typed_weights() {
    if (dtype_ == DType::f32) return w_;
    if (w_low_) return w_low_;
    cuda::launch_convert(w_typed_, dtype_, w_, DType::f32, int64_t(units_) * in_, false, be_.stream());
    if (padded_) {
      const size_t row = size_t(in_) * dtype_bytes(dtype_);
      CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(w_typed_) + size_t(units_) * row, 0,
                                 size_t(padded_ - units_) * row, be_.stream()));
    }
    return w_typed_;
  }
  static cudaDataType_t cuda_type(DType t) {
    return t == DType::bf16 ? CUDA_R_16BF : t == DType::f16 ? CUDA_R_16F : CUDA_R_32F;
  }
  // Column-major C (m, n) = op(A) op(B), lda = rows of A as stored (the row-major matrices' widths
  // are the leading dimensions: A's is (ta == T ? k : m), B's (tb == T ? n : k)). All f32: sgemm,
  // as before mixed precision; otherwise cublasGemmEx with f32 accumulation.
  // ldb_given > 0: B's leading dimension (padded rows) instead of the packed one.
  void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a, DType at,
            const void* b, DType bt, void* c, DType ct, int ldc, int ldb_given = 0, float beta = 0.f) {
    const int lda = ta == CUBLAS_OP_T ? k : m, ldb = ldb_given > 0 ? ldb_given : (tb == CUBLAS_OP_T ? n : k);
    const cublasHandle_t h = be_.cublas();
    if (at == DType::f32 && bt == DType::f32 && ct == DType::f32) {
      CUBLAS_CHECK(cublasSgemm(h, ta, tb, m, n, k, &kOne, static_cast<const float*>(a), lda,
                               static_cast<const float*>(b), ldb, &beta, static_cast<float*>(c), ldc));
      return;
    }
    CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, &kOne, a, cuda_type(at), lda, b, cuda_type(bt), ldb, &beta,
                              c, cuda_type(ct), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  TypedActivations a_;
  static constexpr float kOne = 1.f;
  CudaBackend& be_;
  bool bias_;
  bool gelu_;  // KernelContext::fused_gelu
  std::shared_ptr<GeluHandoff> gelu_to_next_, gelu_from_input_;
  int batch_, in_, units_;
  MathMode math_mode_;
  bool tune_;  // measure the cuBLASLt candidates at bind (KernelContext::measure, not --deterministic)
  cublasMath_t math_;
  cuda::LtMatmul fwd_, dw_plan_, dx_plan_;
  cuda::LtMatmul dw_tail_;  // dW's rows from dw_cols_ on (see plan_products), where dw_cols_ < units_
  int dw_cols_ = 0;         // the rows of dW that dw_plan_ computes
  bool fwd_bias_fused_ = false, dw_bias_fused_ = false, fwd_gelu_fused_ = false;
  DType dtype_;
  int padded_;   // > 0: the row length of the padded copy of y / dy (see the top)
  bool direct_;  // padded_ rows are y's and dy's own (KernelContext::output_pitch_ok): no copies
  int chunk_;    // rows a product covers: batch_, or with padded_ a divisor of it (see the top)
  void* w_typed_ = nullptr;
  void* pad_ = nullptr;
  void* pre_ = nullptr;   // fused gelu: the pre-activation (kept workspace)
  void* dpre_ = nullptr;  // and its gradient (over the output's gradient)
  cuda::BiasGradSplit bias_split_;
  double* bias_scratch_ = nullptr;
  const float *w_ = nullptr, *b_ = nullptr;
  const void* w_low_ = nullptr;  // KernelBinding::params_low's W, or null (then converted)
  const void* b_low_ = nullptr;  // and its b, or null
  void* b_typed_ = nullptr;      // b converted in the workspace (no 16-bit copy of it)
  float *dw_ = nullptr, *db_ = nullptr;
};

}  // namespace

size_t& cuda::dense_pad_chunk_bytes() {
  static size_t bytes = size_t(256) << 20;
  return bytes;
}

std::unique_ptr<LayerKernel> make_dense_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<DenseCuda>(static_cast<const Dense&>(l), ctx);
}

}  // namespace trainer
