// multi_head_attention on the GPU (lib/layers/attention.h): cuBLAS for the matrix products (the
// projections over all B L rows; per (sample, head) the scores, P v and their gradients as
// batched products, reading and writing the heads in place in the rows (B, L, 3, H, hd) of qkv and
// (B, L, H, hd) of O through pointer arrays, so no tensor is rearranged), attention.cu for the
// rest. The reference path of attention: P (B, H, L, L) is kept for backward, as PyTorch's math
// attention keeps it. The products and softmaxes run by blocks of queries: causal attention of 512
// positions or more in 4 blocks, each over the keys up to the block's end only (5/8 of the
// products' work; the softmaxes write P and dS only where a product reads them; dK and dV add up
// the blocks' shares), other attention in one. Activations in the kernel's dtype (f32, or bf16 /
// fp16 with f32 accumulation); the weights' gradients in f32, overwritten.
// The projections (qkv = x Wa^T + ba, y = O Wp^T + bp and their gradients) are cuBLASLt products
// planned at bind (lt_matmul.h), their biases added in the forward's epilogue and summed in dW's
// (BIAS, BGRADB) as dense's: GPT-2 small's 24 bias passes a step (~350 us on an H200) are gone;
// cublasGemmEx and bias.cu where cuBLASLt has no algorithm.
// The fused path (flash_attention.cuh) replaces the products and softmaxes between the
// projections in bf16 and fp16, head sizes 32, 64 and 128, without --deterministic (its dq sums
// are f32 atomics): P is never stored, and backward recomputes it from qkv and each query's
// log-sum-exp, and dropout's masks from their counters (the unfused path's masks). GPT-2 small on an H200:
// the attention's 0.66 ms a layer became 0.28 ms, and the 2.4 GB of P is gone.
//   fused, kept: qkv rows, O, lse (B, H, L) f32; transient: dqkv and dO rows, the backward's
//   scratch (delta (B, H, L) and the dq sums (B, L, D), f32)
//   kept from forward to backward: qkv as rows (B, L, 3D), P, O (B, L, D), the pointer arrays
//   transient: the 16-bit weights, dqkv as rows (B, L, 3D), dO as rows, the dropped P, one block's
//   dS, the bias sums' scratch, and with 16-bit activations one block's scores S and their
//   gradient dP in f32 (B, H, L / blocks, L): the softmax and its backward read them unrounded, as
//   a fused attention keeps them in registers
#include <cmath>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/bias.cuh"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/flash_attention.cuh"
#include "kernels/cuda/lt_matmul.h"
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
        math_mode_(ctx.math),
        tune_(!ctx.deterministic && ctx.measure),
        b_(ctx.batch),
        l_(l.length()),
        d_(l.width()),
        h_(l.heads),
        hd_(l.head_dim()),
        causal_(l.causal),
        bias_(l.use_bias),
        rate_(l.dropout),
        rotary_(l.rotary),
        base_(l.rotary_base),
        scale_(float(1.0 / std::sqrt(double(l.head_dim())))),
        // Causal: the queries in blocks of L / kBlocks positions, each block's products over the keys
        // up to its end only (5/8 of the work at 4 blocks); otherwise one block, every key. Blocks of
        // fewer than 128 positions lose more to small products than they save (char_lm, L = 256,
        // on an H200: 8.6 -> 9.3 ms a step; gpt2_small, L = 1024: 31.1 -> 29.8).
        blocks_(l.causal && l.length() % kBlocks == 0 && l.length() >= kBlocks * 128 ? kBlocks : 1),
        flash_(!ctx.deterministic && cuda::flash_attention_supported(t_, hd_)),
        scalars_(ctx.scalars),
        layer_(ctx.layer_index),
        // Rows of channels: the bias sums read whole rows (as dense's)
        split_a_(cuda::bias_grad_split(ctx.batch * l.length(), 3 * l.width(), 1, true, ctx.act_dtype)),
        split_p_(cuda::bias_grad_split(ctx.batch * l.length(), l.width(), 1, true, ctx.act_dtype)) {
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
    // The biases in the activation dtype, where the executor keeps no 16-bit copy (bind).
    at_ba_ = region(t_ == DType::f32 || !bias_ ? 0 : bytes(3 * d_));
    at_bp_ = region(t_ == DType::f32 || !bias_ ? 0 : bytes(d_));
    at_rows3_ = region(bytes(rows() * 3 * d_));
    at_rows1_ = region(bytes(rows() * d_));
    if (flash_) {
      at_fa_ = region(cuda::flash_attention_backward_scratch_bytes(b_, l_, h_, hd_));
      transient_ = at;
      return;
    }
    at_pd_ = region(rate_ > 0.f ? bytes(probs()) : 0);
    // One block of queries' scores (and dP) and dS at a time: the products and softmaxes run block
    // by block.
    at_ds_ = region(bytes(block_probs()));
    at_s_ = region(t_ == DType::f32 ? 0 : size_t(block_probs()) * sizeof(float));
    transient_ = at;
  }

  size_t kept_workspace_bytes() const override {
    if (flash_)
      return align_up(bytes(rows() * 3 * d_)) + align_up(bytes(rows() * d_)) +
             align_up(size_t(b_ * h_ * l_) * sizeof(float));
    return align_up(bytes(rows() * 3 * d_)) + align_up(bytes(probs())) + align_up(bytes(rows() * d_)) +
           align_up(size_t(kArrays * kBlocks) * size_t(b_ * h_) * sizeof(void*));
  }
  // Backward reads what forward kept (qkv, P, O) and dy, never y.
  bool backward_reads_output() const override { return false; }
  size_t workspace_bytes() const override { return transient_; }
  bool wants_low_precision_params() const override { return t_ != DType::f32; }
  bool workspace_is_transient() const override { return true; }

  void bind(const KernelBinding& b) override {
    a_ = TypedActivations(b, t_);
    ids_ = b.inputs.size() > 1 ? b.input(1).as(t_) : nullptr;  // the key-padding mask's token ids
    dids_ = b.input_grads.size() > 1 ? b.input_grad(1).as(t_) : nullptr;
    size_t k = 0;
    wa_low_ = b.param_low(k, t_);
    wa_ = b.param(k).f32();
    dwa_ = b.grad(k++).f32();
    if (bias_) {
      ba_low_ = b.param_low(k, t_);
      ba_ = b.param(k).f32();
      dba_ = b.grad(k++).f32();
    }
    wp_low_ = b.param_low(k, t_);
    wp_ = b.param(k).f32();
    dwp_ = b.grad(k++).f32();
    if (bias_) {
      bp_low_ = b.param_low(k, t_);
      bp_ = b.param(k).f32();
      dbp_ = b.grad(k).f32();
    }
    char* kept = static_cast<char*>(b.kept_workspace);
    qkv_ = kept;
    ws_ = static_cast<char*>(b.workspace);
    if (flash_) {  // qkv, O, lse
      o_ = kept + align_up(bytes(rows() * 3 * d_));
      lse_ = reinterpret_cast<float*>(static_cast<char*>(o_) + align_up(bytes(rows() * d_)));
    } else {
      p_ = kept + align_up(bytes(rows() * 3 * d_));
      o_ = static_cast<char*>(p_) + align_up(bytes(probs()));
      ptrs_ = reinterpret_cast<void**>(static_cast<char*>(o_) + align_up(bytes(rows() * d_)));
      make_pointer_table();
    }
    if (bias_ && t_ != DType::f32 && !ba_low_) {  // converted before each forward product
      ba_typed_ = ws_ + at_ba_;
      bp_typed_ = ws_ + at_bp_;
      ba_low_ = ba_typed_;
      bp_low_ = bp_typed_;
    }
    in_proj_ = plan_projection(3 * int(d_), ba_, ba_low_, dba_);
    out_proj_ = plan_projection(int(d_), bp_, bp_low_, dbp_);
    if (!tune_) return;  // --deterministic, or a batch size not measured: the heuristic's choices
    // The bound tensors serve as the measurement's, as dense's: nothing has run yet.
    const void* wa = t_ == DType::f32 ? static_cast<const void*>(wa_) : wa_low_ ? wa_low_ : ws_ + at_wa_;
    const void* wp = t_ == DType::f32 ? static_cast<const void*>(wp_) : wp_low_ ? wp_low_ : ws_ + at_wp_;
    in_proj_.tune(wa, a_.x, qkv_, ws_ + at_rows3_, dwa_, a_.dx);
    out_proj_.tune(wp, o_, a_.y, a_.dy, dwp_, ws_ + at_rows1_);
  }

  void forward(bool training) override {
    const cudaStream_t s = be_.stream();
    CUBLAS_CHECK(cublasSetMathMode(be_.cublas(), math_));
    dropping_ = training && rate_ > 0.f;
    const int64_t R = rows(), D = d_, L = l_;
    const void* wa = typed(wa_, wa_low_, at_wa_, 3 * D * D);
    if (ba_typed_ && in_proj_.fwd_bias) cuda::launch_convert(ba_typed_, t_, ba_, DType::f32, 3 * D, false, s);
    if (in_proj_.fwd.ok())
      in_proj_.fwd.run(wa, a_.x, qkv_);
    else
      gemm('N', 'T', R, 3 * D, D, 1.f, a_.x, D, wa, D, qkv_, 3 * D);
    if (bias_ && !in_proj_.fwd_bias) cuda::launch_bias_add(t_, qkv_, ba_, R, 3 * D, 1, false, s);
    if (rotary_) cuda::launch_attention_rotary(t_, qkv_, b_, L, D, h_, base_, 1.f, s);
    if (flash_) {
      cuda::launch_flash_attention_forward(t_, qkv_, o_, lse_, b_, L, h_, hd_, causal_, ids_, scale_, s,
                                           flash_dropout());
      project_output();
      return;
    }
    // The arrays live in this kernel's kept memory, which other batch sizes' plans share: written
    // here each step, read by this step's backward too.
    cuda::launch_fill_pointers(ptrs_, table_, s);
    // Per block of queries r: S = scale q k^T over the keys up to the block's end, keys(r), in f32
    // (in P's rows in f32, else the block's scratch), then P = softmax(S) into the block's rows.
    const int64_t Lb = L / blocks_, pairs = b_ * h_;
    for (int r = 0; r < blocks_; ++r) {
      batched('N', 'T', Lb, keys(r), hd_, scale_, arr(kQ, r), 3 * D, arr(kK), 3 * D, arr(kS, r), L, true);
      const cuda::BlockRows rows{pairs, Lb, r * Lb, L, ids_, h_};
      void* p = static_cast<char*>(p_) + bytes(r * Lb * L);
      const bool in_place = t_ == DType::f32;  // the scores are P's rows, else the block's scratch
      const float* scores = in_place ? static_cast<float*>(p) : reinterpret_cast<float*>(ws_ + at_s_);
      cuda::launch_attention_softmax(t_, scores, in_place ? L * L : Lb * L, p, L * L, rows, causal_, Lb, s);
    }
    if (dropping_) cuda::launch_attention_dropout(t_, p_, ws_ + at_pd_, probs(), rate_, scalars_, layer_, s);
    for (int r = 0; r < blocks_; ++r)
      batched('N', 'N', Lb, hd_, keys(r), 1.f, arr(dropping_ ? kPd : kP, r), L, arr(kV), 3 * D, arr(kO, r),
              D);
    project_output();
  }

  // The fused kernels' dropout: this step's masks in a training step, none otherwise.
  cuda::FlashDropout flash_dropout() const {
    return dropping_ ? cuda::FlashDropout{rate_, scalars_, layer_} : cuda::FlashDropout{};
  }

  // y = O Wp^T + bp.
  void project_output() {
    const int64_t R = rows(), D = d_;
    const void* wp = typed(wp_, wp_low_, at_wp_, D * D);
    if (bp_typed_ && out_proj_.fwd_bias)
      cuda::launch_convert(bp_typed_, t_, bp_, DType::f32, D, false, be_.stream());
    if (out_proj_.fwd.ok())
      out_proj_.fwd.run(wp, o_, a_.y);
    else
      gemm('N', 'T', R, D, D, 1.f, o_, D, wp, D, a_.y, D);
    if (bias_ && !out_proj_.fwd_bias) cuda::launch_bias_add(t_, a_.y, bp_, R, D, 1, false, be_.stream());
  }

  void backward() override {
    const cudaStream_t s = be_.stream();
    CUBLAS_CHECK(cublasSetMathMode(be_.cublas(), math_));
    const int64_t R = rows(), D = d_, L = l_;
    // The output projection: dO = dy Wp, dWp = dy^T O, dbp = the column sums of dy.
    void* drows = ws_ + at_rows1_;
    const void* wp = typed(wp_, wp_low_, at_wp_, D * D);
    if (out_proj_.dx.ok())
      out_proj_.dx.run(wp, a_.dy, drows);
    else
      gemm('N', 'N', R, D, D, 1.f, a_.dy, D, wp, D, drows, D);
    if (out_proj_.dw.ok())
      out_proj_.dw.run(o_, a_.dy, dwp_);
    else
      gemm('T', 'N', D, D, R, 1.f, a_.dy, D, o_, D, dwp_, D, 1, 0, 0, 0, true);
    if (bias_ && !out_proj_.dw_bias)
      cuda::launch_bias_grad(split_p_, t_, a_.dy, dbp_, scratch(at_scratch_p_), s);
    if (flash_) {
      cuda::launch_flash_attention_backward(t_, qkv_, o_, drows, lse_, ws_ + at_rows3_, ws_ + at_fa_, b_, L,
                                            h_, hd_, causal_, ids_, scale_, s, flash_dropout());
      project_input_grads();
      return;
    }
    // Per (sample, head): dv = P'^T dO, dP' = dO v^T, dS through the dropout and the softmax,
    // dq = dS k, dk = dS^T q; into the rows of dqkv.
    if (dropping_) cuda::launch_attention_dropout(t_, p_, ws_ + at_pd_, probs(), rate_, scalars_, layer_, s);
    // Per block of queries r, the last first: dv (+)= P'_r^T dO_r over the keys up to the block's
    // end (the last block writes every key's, the others add), dP_r = dO_r v^T, dS_r through the
    // dropout and the softmax, dq_r = dS_r k, dk (+)= dS_r^T q_r; into the rows of dqkv.
    const int64_t pairs = b_ * h_, Lb = L / blocks_;
    void* ds = ws_ + at_ds_;
    float* dp = t_ == DType::f32 ? static_cast<float*>(ds) : reinterpret_cast<float*>(ws_ + at_s_);
    for (int r = blocks_ - 1; r >= 0; --r) {
      const float add = r + 1 < blocks_ ? 1.f : 0.f;
      batched('T', 'N', keys(r), hd_, Lb, 1.f, arr(dropping_ ? kPd : kP, r), L, arr(kdO, r), D, arr(kdV),
              3 * D, false, add);
      batched('N', 'T', Lb, keys(r), hd_, 1.f, arr(kdO, r), D, arr(kV), 3 * D, arr(kdP), L, true);
      cuda::launch_attention_softmax_backward(t_, static_cast<char*>(p_) + bytes(r * Lb * L), L * L, dp, ds,
                                              Lb * L, cuda::BlockRows{pairs, Lb, r * Lb, L, nullptr, h_},
                                              causal_, Lb, scale_, dropping_ ? rate_ : 0.f, scalars_, layer_,
                                              s);
      batched('N', 'N', Lb, hd_, keys(r), 1.f, arr(kdS), L, arr(kK), 3 * D, arr(kdQ, r), 3 * D);
      batched('T', 'N', keys(r), hd_, Lb, 1.f, arr(kdS), L, arr(kQ, r), 3 * D, arr(kdK), 3 * D, false, add);
    }
    project_input_grads();
  }

  // From dqkv (the transient rows): back through the rotation, then the input projection: dWa =
  // dqkv^T x, dba = the column sums of dqkv, dx = dqkv Wa; the ids get a zero gradient.
  void project_input_grads() {
    const cudaStream_t s = be_.stream();
    const int64_t R = rows(), D = d_;
    void* dqkv = ws_ + at_rows3_;
    if (rotary_) cuda::launch_attention_rotary(t_, dqkv, b_, l_, D, h_, base_, -1.f, s);
    if (in_proj_.dw.ok())
      in_proj_.dw.run(a_.x, dqkv, dwa_);
    else
      gemm('T', 'N', 3 * D, D, R, 1.f, dqkv, 3 * D, a_.x, D, dwa_, D, 1, 0, 0, 0, true);
    if (bias_ && !in_proj_.dw_bias)
      cuda::launch_bias_grad(split_a_, t_, dqkv, dba_, scratch(at_scratch_a_), s);
    if (a_.dx) {
      const void* wa = typed(wa_, wa_low_, at_wa_, 3 * D * D);
      if (in_proj_.dx.ok())
        in_proj_.dx.run(wa, dqkv, a_.dx);
      else
        gemm('N', 'N', R, D, 3 * D, 1.f, dqkv, 3 * D, wa, D, a_.dx, D);
    }
    if (dids_) CUDA_CHECK(cudaMemsetAsync(dids_, 0, size_t(b_ * l_) * dtype_bytes(t_), s));
  }

 private:
  // A projection's three products over the B L rows, as dense's (dense_cuda.cc): x (R, in), W
  // (out, in), y = x W^T + b (R, out); dW (out, in) f32 with db summed in its epilogue; dx = dy W.
  struct Projection {
    cuda::LtMatmul fwd, dw, dx;
    bool fwd_bias = false, dw_bias = false;  // the bias (gradient) in the product's epilogue
    // Measures each product's candidates on these tensors (plan time; dx may be null: not wanted).
    void tune(const void* w, const void* x, void* y, const void* dy, float* dw_out, void* dx_out) {
      if (fwd.ok()) fwd.tune(w, x, y);
      if (dw.ok() && dy) dw.tune(x, dy, dw_out);
      if (dx.ok() && dy && dx_out) dx.tune(w, dy, dx_out);
    }
  };
  Projection plan_projection(int out, const float* bias, const void* bias_low, const float* dbias) {
    const int R = int(rows()), in = int(d_);
    Projection p;
    size_t which = 0;
    const std::vector<cuda::LtEpilogue> fwd = cuda::bias_tries(CUBLASLT_EPILOGUE_BIAS, bias, bias_low, t_);
    p.fwd = cuda::plan_first(be_, math_mode_, CUBLAS_OP_T, CUBLAS_OP_N, out, R, in, t_, t_, fwd, &which);
    p.fwd_bias = bias && which < fwd.size();
    const std::vector<cuda::LtEpilogue> dw =
        cuda::bias_tries(CUBLASLT_EPILOGUE_BGRADB, dbias, nullptr, DType::f32);
    p.dw =
        cuda::plan_first(be_, math_mode_, CUBLAS_OP_N, CUBLAS_OP_T, in, out, R, t_, DType::f32, dw, &which);
    p.dw_bias = dbias && which < dw.size();
    p.dx = cuda::plan_first(be_, math_mode_, CUBLAS_OP_N, CUBLAS_OP_N, in, R, out, t_, t_, {}, &which);
    return p;
  }

  int64_t rows() const { return b_ * l_; }
  int64_t probs() const { return b_ * h_ * l_ * l_; }
  int64_t block_probs() const { return b_ * h_ * (l_ / blocks_) * l_; }  // one block of queries'
  size_t bytes(int64_t n) const { return size_t(n) * dtype_bytes(t_); }
  // The pointer arrays, B H pointers each, (sample, head) in order: where each product's operand of
  // that sample and head starts.
  // One array per block of queries: where the block's rows start (the same for every block where
  // a product reads or writes from key 0, or a block's scratch).
  enum Array { kQ, kK, kV, kS, kP, kPd, kO, kdO, kdP, kdS, kdQ, kdK, kdV, kArrays };
  static constexpr int kBlocks = 4;
  static_assert(kArrays * kBlocks <= cuda::PointerTable::kMax, "the device table holds kMax arrays");
  void* const* arr(Array a, int block = 0) const {
    return ptrs_ + size_t(a * kBlocks + block) * size_t(b_ * h_);
  }
  // The keys a block r of queries reads (causal: up to the block's end).
  int64_t keys(int r) const { return (r + 1) * (l_ / blocks_); }
  // The table the device fills the arrays from (cuda::PointerTable): base, then bytes a sample
  // and a head further.
  void make_pointer_table() {
    const int64_t D = d_, L = l_, pair = L * L;  // a (sample, head)'s scores, P, dP, dS: L x L
    const int64_t Lb = L / blocks_;
    cuda::PointerTable& t = table_;
    t.arrays = kArrays * kBlocks;
    t.samples = b_;
    t.heads = h_;
    // step: elements from one block's start to the next's (0: every block starts at one place).
    const auto set = [&](Array a, void* base, size_t elem, int64_t per_sample, int64_t per_head,
                         int64_t step) {
      for (int k = 0; k < kBlocks; ++k) {
        const int i = a * kBlocks + k;
        t.base[i] = static_cast<char*>(base) + int64_t(k < blocks_ ? k : 0) * step * int64_t(elem);
        t.per_sample[i] = per_sample * int64_t(elem);
        t.per_head[i] = per_head * int64_t(elem);
      }
    };
    const size_t e = dtype_bytes(t_), f = sizeof(float);  // the scores and dP are f32 in every dtype
    char* qkv = static_cast<char*>(qkv_);
    // rows3, rows1: a block's rows of qkv and O; block: its rows of P, and one block's scratch.
    const int64_t rows3 = Lb * 3 * D, rows1 = Lb * D, block = Lb * L;
    set(kQ, qkv, e, L * 3 * D, hd_, rows3);
    set(kK, qkv + bytes(D), e, L * 3 * D, hd_, 0);
    set(kV, qkv + bytes(2 * D), e, L * 3 * D, hd_, 0);
    // The scores: P's rows in f32 (the softmax runs in place), else the block's scratch.
    if (t_ == DType::f32)
      set(kS, p_, f, h_ * pair, pair, block);
    else
      set(kS, ws_ + at_s_, f, h_ * block, block, 0);
    set(kP, p_, e, h_ * pair, pair, block);
    set(kPd, ws_ + at_pd_, e, h_ * pair, pair, block);
    set(kO, o_, e, L * D, hd_, rows1);
    set(kdO, ws_ + at_rows1_, e, L * D, hd_, rows1);
    // dP: the block's dS scratch in f32 (the softmax's backward runs in place), else its f32 scratch.
    set(kdP, t_ == DType::f32 ? ws_ + at_ds_ : ws_ + at_s_, f, h_ * block, block, 0);
    set(kdS, ws_ + at_ds_, e, h_ * block, block, 0);
    set(kdQ, ws_ + at_rows3_, e, L * 3 * D, hd_, rows3);
    set(kdK, ws_ + at_rows3_ + bytes(D), e, L * 3 * D, hd_, 0);
    set(kdV, ws_ + at_rows3_ + bytes(2 * D), e, L * 3 * D, hd_, 0);
  }
  double* scratch(size_t at) const { return reinterpret_cast<double*>(ws_ + at); }
  // A weight in the activation dtype: itself in f32, else the executor's 16-bit copy (low), else
  // converted into its transient region.
  const void* typed(const float* w, const void* low, size_t at, int64_t n) {
    if (t_ == DType::f32) return w;
    if (low) return low;
    cuda::launch_convert(ws_ + at, t_, w, DType::f32, n, false, be_.stream());
    return ws_ + at;
  }
  // One product per (sample, head): row-major C_i (m, n) = alpha op(A_i) op(B_i), the operands
  // from pointer arrays (arr()), ld* their row strides; C in the activation dtype or f32.
  void batched(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, void* const* a, int64_t lda,
               void* const* b, int64_t ldb, void* const* c, int64_t ldc, bool f32_out = false,
               float beta = 0.f) const {
    const DType ct = f32_out ? DType::f32 : t_;
    const cublasOperation_t opa = ta == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N,
                            opb = tb == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasGemmBatchedEx(
        be_.cublas(), opb, opa, int(n), int(m), int(k), &alpha, const_cast<const void* const*>(b),
        cuda_type(t_), int(ldb), const_cast<const void* const*>(a), cuda_type(t_), int(lda), &beta, c,
        cuda_type(ct), int(ldc), int(b_ * h_), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
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
  MathMode math_mode_;
  bool tune_;  // measure the cuBLASLt candidates at bind (KernelContext::measure, not --deterministic)
  Projection in_proj_, out_proj_;
  int64_t b_, l_, d_, h_, hd_;
  bool causal_, bias_;
  float rate_;
  bool rotary_;
  float base_, scale_;
  int blocks_;  // causal blocks of queries (keys()); 1: none
  bool flash_;  // the fused kernels (flash_attention.cuh)
  const StepScalars* scalars_;
  int layer_;
  cuda::BiasGradSplit split_a_, split_p_;
  size_t at_scratch_a_ = 0, at_scratch_p_ = 0, at_wa_ = 0, at_wp_ = 0, at_ba_ = 0, at_bp_ = 0, at_rows3_ = 0,
         at_rows1_ = 0, at_pd_ = 0, at_ds_ = 0, at_s_ = 0, at_fa_ = 0, transient_ = 0;
  bool dropping_ = false;
  TypedActivations a_;
  const void* ids_ = nullptr;  // the key-padding mask's token ids (B, L) in the activation dtype, or null
  void* dids_ = nullptr;
  const float *wa_ = nullptr, *ba_ = nullptr, *wp_ = nullptr, *bp_ = nullptr;
  // KernelBinding::params_low, or null
  const void *wa_low_ = nullptr, *wp_low_ = nullptr, *ba_low_ = nullptr, *bp_low_ = nullptr;
  void *ba_typed_ = nullptr, *bp_typed_ = nullptr;  // the biases converted in the workspace, or null
  float *dwa_ = nullptr, *dba_ = nullptr, *dwp_ = nullptr, *dbp_ = nullptr;
  void *qkv_ = nullptr, *p_ = nullptr, *o_ = nullptr;
  float* lse_ = nullptr;   // fused: each query's log-sum-exp (B, H, L)
  void** ptrs_ = nullptr;  // kArrays arrays of B H pointers (device memory)
  cuda::PointerTable table_;
  char* ws_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_attention_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<AttentionCuda>(static_cast<const MultiHeadAttention&>(l), ctx);
}

}  // namespace trainer
