// multi_head_attention on the CPU (lib/layers/attention.h): oneDNN's sgemm for the matrix
// products (the projections over all B L rows at once; per (sample, head) the scores and P v, those
// split over threads), hand loops for the softmax, the masks and the bias sums. The weights'
// gradients overwrite; the bias sums go column block by column block, rows in order, so they do
// not depend on the thread count.
//   x, y, dx, dy: (B, L, D)   kept from forward to backward: qkv (B, L, 3D), P (B, H, L, L),
//   O (B, L, D); scratch of backward: dO (B, L, D), dqkv (B, L, 3D), dS (B, H, L, L), and with
//   dropout P's dropped copy (B, H, L, L) (forward uses it too). Dropout's mask is drawn again
//   where it is needed (lib/core/dropout_formula.h, unit = the element of P), never stored.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ops.h"
#include "lib/core/dropout_formula.h"
#include "lib/core/rotary_formula.h"
#include "lib/layers/attention.h"

namespace trainer {
namespace {

using cpu::column_sums;
using cpu::gemm;

class AttentionCpu : public LayerKernel {
 public:
  AttentionCpu(const MultiHeadAttention& l, const KernelContext& ctx)
      : b_(ctx.batch),
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
        scalars_(ctx.scalars),
        layer_(ctx.layer_index) {}

  // Kept: qkv, P, O. Scratch: dO, dqkv, dS (and the dropped P).
  size_t kept_workspace_bytes() const override { return floats(rows() * 3 * d_ + probs() + rows() * d_); }
  // Backward reads what forward kept (qkv, P, O) and dy, never y.
  bool backward_reads_output() const override { return false; }
  size_t workspace_bytes() const override {
    return floats(rows() * d_ + rows() * 3 * d_ + probs() * (rate_ > 0.f ? 2 : 1));
  }
  bool workspace_is_transient() const override { return true; }

  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    ids_ = b.inputs.size() > 1 ? b.input(1).f32() : nullptr;
    dids_ = b.input_grads.size() > 1 ? b.input_grad(1).f32() : nullptr;
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
    float* kept = static_cast<float*>(b.kept_workspace);
    qkv_ = kept;
    p_ = qkv_ + rows() * 3 * d_;
    o_ = p_ + probs();
    float* s = static_cast<float*>(b.workspace);
    do_ = s;
    dqkv_ = do_ + rows() * d_;
    ds_ = dqkv_ + rows() * 3 * d_;
    pd_ = rate_ > 0.f ? ds_ + probs() : nullptr;
  }

  void forward(bool training) override {
    const int64_t R = rows(), D = d_, L = l_;
    dropping_ = training && rate_ > 0.f;
    if (dropping_) {
      seed_ = scalars_->seed;
      stream_ = dropout_stream(scalars_->step, layer_);
    }
    gemm('N', 'T', R, 3 * D, D, 1.f, a_.x, D, wa_, D, 0.f, qkv_, 3 * D);
    if (bias_) add_rows(qkv_, R, 3 * D, ba_);
    if (rotary_) rotate(qkv_, 1.f);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < b_; ++n)
      for (int64_t h = 0; h < h_; ++h) {
        const float* q = qkv_ + n * L * 3 * D + h * hd_;
        float* p = p_ + (n * h_ + h) * L * L;
        gemm('N', 'T', L, L, hd_, scale_, q, 3 * D, q + D, 3 * D, 0.f, p, L);
        const float* keys = ids_ ? ids_ + n * L : nullptr;
        for (int64_t i = 0; i < L; ++i) softmax_row(p + i * L, causal_ ? i + 1 : L, L, keys);
        const float* used = p;
        if (dropping_) {
          float* pd = pd_ + (n * h_ + h) * L * L;
          drop(p, pd, (n * h_ + h) * L * L);
          used = pd;
        }
        gemm('N', 'N', L, hd_, L, 1.f, used, L, q + 2 * D, 3 * D, 0.f, o_ + n * L * D + h * hd_, D);
      }
    gemm('N', 'T', R, D, D, 1.f, o_, D, wp_, D, 0.f, a_.y, D);
    if (bias_) add_rows(a_.y, R, D, bp_);
  }

  void backward() override {
    const int64_t R = rows(), D = d_, L = l_;
    // The output projection: dO = dy Wp, dWp = dy^T O, dbp = sum of dy.
    gemm('N', 'N', R, D, D, 1.f, a_.dy, D, wp_, D, 0.f, do_, D);
    gemm('T', 'N', D, D, R, 1.f, a_.dy, D, o_, D, 0.f, dwp_, D);
    if (bias_) column_sums(a_.dy, R, D, dbp_);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < b_; ++n)
      for (int64_t h = 0; h < h_; ++h) {
        const int64_t at = (n * h_ + h) * L * L;
        const float* q = qkv_ + n * L * 3 * D + h * hd_;
        float* dq = dqkv_ + n * L * 3 * D + h * hd_;
        const float* dout = do_ + n * L * D + h * hd_;
        const float* p = p_ + at;
        float* ds = ds_ + at;
        if (dropping_) drop(p, pd_ + at, at);  // the dropped P that forward multiplied v by
        // dv = P'^T dO, dP' = dO v^T; through the dropout: dP = dP' * mask.
        gemm('T', 'N', L, hd_, L, 1.f, dropping_ ? pd_ + at : p, L, dout, D, 0.f, dq + 2 * D, 3 * D);
        gemm('N', 'T', L, L, hd_, 1.f, dout, D, q + 2 * D, 3 * D, 0.f, ds, L);
        if (dropping_) {
          const float keep = dropout_keep_scale(rate_);
          for (int64_t e = 0; e < L * L; ++e)
            ds[e] *= dropout_mask(seed_, stream_, uint64_t(at + e), rate_, keep);
        }
        // Softmax: dS = P (dP - sum_j dP P), times the scale of S.
        for (int64_t i = 0; i < L; ++i) {
          float* dsr = ds + i * L;
          const float* pr = p + i * L;
          double c = 0;
          for (int64_t j = 0; j < L; ++j) c += double(dsr[j]) * double(pr[j]);
          for (int64_t j = 0; j < L; ++j) dsr[j] = scale_ * pr[j] * (dsr[j] - float(c));
        }
        // dq = dS k, dk = dS^T q.
        gemm('N', 'N', L, hd_, L, 1.f, ds, L, q + D, 3 * D, 0.f, dq, 3 * D);
        gemm('T', 'N', L, hd_, L, 1.f, ds, L, q, 3 * D, 0.f, dq + D, 3 * D);
      }
    if (rotary_) rotate(dqkv_, -1.f);  // the gradients of q and k before their rotation
    // The input projection: dWa = dqkv^T x, dba = sum of dqkv, dx = dqkv Wa.
    gemm('T', 'N', 3 * D, D, R, 1.f, dqkv_, 3 * D, a_.x, D, 0.f, dwa_, D);
    if (bias_) column_sums(dqkv_, R, 3 * D, dba_);
    if (a_.dx) gemm('N', 'N', R, D, 3 * D, 1.f, dqkv_, 3 * D, wa_, D, 0.f, a_.dx, D);
    if (dids_) std::fill(dids_, dids_ + b_ * L, 0.f);  // token ids: no gradient
  }

 private:
  static size_t floats(int64_t n) { return size_t(n) * sizeof(float); }
  int64_t rows() const { return b_ * l_; }
  int64_t probs() const { return b_ * h_ * l_ * l_; }

  // q and k of every row of m (B, L, 3D) rotated in place by their positions (sign -1: back).
  void rotate(float* m, float sign) const {
    const int64_t L = l_, D = d_, hd = hd_, half = hd_ / 2, heads = h_;
    const float base = base_;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < b_ * L; ++r) {
      const int64_t pos = r % L;
      for (int part = 0; part < 2; ++part)
        for (int64_t h = 0; h < heads; ++h) {
          float* v = m + r * 3 * D + part * D + h * hd;
          for (int64_t i = 0; i < half; ++i)
            rotary_rotate(v[i], v[i + half], rotary_angle(pos, i, hd, base), sign);
        }
    }
  }
  static void add_rows(float* m, int64_t rows, int64_t cols, const float* bias) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) m[r * cols + j] += bias[j];
  }
  // The softmax of the first `n` values of a row of `len` (the rest: 0, the causal mask); keys (not
  // null): the sample's token ids, whose 0s get 0 too. A row with no key left is all 0.
  static void softmax_row(float* s, int64_t n, int64_t len, const float* keys) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j)
      if (!keys || keys[j] != 0.f) m = std::max(m, s[j]);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      s[j] = !keys || keys[j] != 0.f ? std::exp(s[j] - m) : 0.f;
      sum += s[j];
    }
    const float inv = sum > 0 ? float(1.0 / sum) : 0.f;
    for (int64_t j = 0; j < n; ++j) s[j] *= inv;
    for (int64_t j = n; j < len; ++j) s[j] = 0.f;
  }
  // pd = p * mask for one (sample, head): elements first .. first + L L of P.
  void drop(const float* p, float* pd, int64_t first) const {
    const float keep = dropout_keep_scale(rate_);
    for (int64_t e = 0; e < l_ * l_; ++e)
      pd[e] = p[e] * dropout_mask(seed_, stream_, uint64_t(first + e), rate_, keep);
  }

  int64_t b_, l_, d_, h_, hd_;
  bool causal_, bias_;
  float rate_;
  bool rotary_;
  float base_, scale_;
  const StepScalars* scalars_;
  int layer_;
  bool dropping_ = false;
  uint64_t seed_ = 0, stream_ = 0;
  BoundActivations a_;
  const float* ids_ = nullptr;  // the key-padding mask's token ids (B, L), or null
  float* dids_ = nullptr;
  float *wa_ = nullptr, *dwa_ = nullptr, *ba_ = nullptr, *dba_ = nullptr;
  float *wp_ = nullptr, *dwp_ = nullptr, *bp_ = nullptr, *dbp_ = nullptr;
  float *qkv_ = nullptr, *p_ = nullptr, *o_ = nullptr;
  float *do_ = nullptr, *dqkv_ = nullptr, *ds_ = nullptr, *pd_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_attention_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<AttentionCpu>(static_cast<const MultiHeadAttention&>(l), ctx);
}

}  // namespace trainer
