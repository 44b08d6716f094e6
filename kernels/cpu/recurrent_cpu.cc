// lstm / gru on the CPU (lib/layers/recurrent.h): oneDNN's sgemm for the products (x W_ih^T over
// all B L rows at once; h W_hh^T one step at a time; the weights' gradients over all rows at once
// after the backward recursion), the cells of lib/core/recurrent_formula.h between them. The
// directions run one after the other. Weights' gradients overwrite; the bias sums go column block
// by column block, rows in order, so nothing depends on the thread count.
//   x, dx: (B, L, D)   y, dy: (B, L, dirs H) or (B, dirs H)
//   kept from forward to backward, per direction: the activated gates (B, L, G H), h (B, L, H),
//   and lstm's c or gru's hn (B, L, H)
//   transient: the input products, then their gradients dAx (B, L, G H); gru's hidden-side
//   gradients dAh (B, L, G H); one step's hidden product (B, G H); the carried dh and dc (B, H);
//   h_{t-1} of every step (B, L, H) for dW_hh
#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ops.h"
#include "lib/core/recurrent_formula.h"
#include "lib/layers/recurrent.h"

namespace trainer {
namespace {

using cpu::column_sums;
using cpu::gemm;

class RecurrentCpu : public LayerKernel {
 public:
  RecurrentCpu(const Recurrent& l, const KernelContext& ctx)
      : lstm_(l.cell == Recurrent::Cell::lstm),
        seq_(l.return_sequences),
        dirs_(l.directions()),
        b_(ctx.batch),
        l_(l.length()),
        d_(l.features()),
        h_(l.units),
        g_(l.gates() * l.units) {}

  size_t kept_workspace_bytes() const override { return floats(dirs_ * per_direction()); }
  size_t workspace_bytes() const override {
    return floats(rows() * g_ * (lstm_ ? 1 : 2) + b_ * g_ + 2 * b_ * h_ + rows() * h_);
  }
  bool workspace_is_transient() const override { return true; }

  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    ids_ = b.inputs.size() > 1 ? b.input(1).f32() : nullptr;
    dids_ = b.input_grads.size() > 1 ? b.input_grad(1).f32() : nullptr;
    for (int64_t dir = 0; dir < dirs_; ++dir) {
      Dir& d = dir_[dir];
      d.wih = b.param(4 * dir).f32();
      d.whh = b.param(4 * dir + 1).f32();
      d.bih = b.param(4 * dir + 2).f32();
      d.bhh = b.param(4 * dir + 3).f32();
      d.dwih = b.grad(4 * dir).f32();
      d.dwhh = b.grad(4 * dir + 1).f32();
      d.dbih = b.grad(4 * dir + 2).f32();
      d.dbhh = b.grad(4 * dir + 3).f32();
      float* kept = static_cast<float*>(b.kept_workspace) + dir * per_direction();
      d.gate = kept;
      d.h = d.gate + rows() * g_;
      d.s = d.h + rows() * h_;
    }
    float* w = static_cast<float*>(b.workspace);
    ax_ = w;
    w += rows() * g_;
    ah_ = lstm_ ? ax_ : w;
    if (!lstm_) w += rows() * g_;
    hh_ = w;
    w += b_ * g_;
    dh_ = w;
    dc_ = dh_ + b_ * h_;
    hprev_ = dc_ + b_ * h_;
  }

  void forward(bool) override {
    const int64_t B = b_, L = l_, H = h_, G = g_, out = dirs_ * h_;
    for (int64_t dir = 0; dir < dirs_; ++dir) {
      const Dir& d = dir_[dir];
      gemm('N', 'T', rows(), G, d_, 1.f, a_.x, d_, d.wih, d_, 0.f, ax_, G);
      for (int64_t s = 0; s < L; ++s) {
        const int64_t t = dir == 0 ? s : L - 1 - s, tp = dir == 0 ? t - 1 : t + 1;
        const bool first = s == 0;
        if (!first) gemm('N', 'T', B, G, H, 1.f, d.h + tp * H, L * H, d.whh, H, 0.f, hh_, G);
        const float *bih = d.bih, *bhh = d.bhh, *ax = ax_, *hh = hh_, *ids = ids_;
        float *gate = d.gate, *hs = d.h, *st = d.s;
        const bool lstm = lstm_;
#pragma omp parallel for schedule(static)
        for (int64_t n = 0; n < B; ++n)
          for (int64_t j = 0; j < H; ++j) {
            const int64_t at = (n * L + t) * G + j, ap = (n * L + tp) * H + j, ah = n * G + j;
            if (ids && ids[n * L + t] == 0.f) {  // padding: h and c pass through
              const int64_t o = (n * L + t) * H + j;
              hs[o] = first ? 0.f : hs[ap];
              st[o] = first || !lstm ? 0.f : st[ap];
              for (int k = 0; k < (lstm ? 4 : 3); ++k) gate[at + k * H] = 0.f;
              continue;
            }
            const auto pre = [&](int k) {
              return ax[at + k * H] + bih[k * H + j] + bhh[k * H + j] + (first ? 0.f : hh[ah + k * H]);
            };
            float g4[4];
            const int64_t o = (n * L + t) * H + j;
            if (lstm) {
              lstm_cell_forward(pre(0), pre(1), pre(2), pre(3), first ? 0.f : st[ap], g4, st[o], hs[o]);
              for (int k = 0; k < 4; ++k) gate[at + k * H] = g4[k];
            } else {
              const float hn = bhh[2 * H + j] + (first ? 0.f : hh[ah + 2 * H]);
              const auto side = [&](int k) { return bhh[k * H + j] + (first ? 0.f : hh[ah + k * H]); };
              gru_cell_forward(ax[at] + bih[j], ax[at + H] + bih[H + j], ax[at + 2 * H] + bih[2 * H + j],
                               side(0), side(1), hn, first ? 0.f : hs[ap], g4, hs[o]);
              st[o] = hn;
              for (int k = 0; k < 3; ++k) gate[at + k * H] = g4[k];
            }
          }
      }
      // y: every position's h, or the last one's (t = L - 1 forward, t = 0 reverse).
      float* y = a_.y;
      const float* hs = d.h;
      const int64_t last = dir == 0 ? L - 1 : 0;
#pragma omp parallel for schedule(static)
      for (int64_t n = 0; n < B; ++n) {
        if (seq_)
          for (int64_t t = 0; t < L; ++t) {
            float* row = y + (n * L + t) * out + dir * H;
            if (ids_ && ids_[n * L + t] == 0.f)
              std::fill(row, row + H, 0.f);  // a padding position's output
            else
              std::memcpy(row, hs + (n * L + t) * H, size_t(H) * sizeof(float));
          }
        else
          std::memcpy(y + n * out + dir * H, hs + (n * L + last) * H, size_t(H) * sizeof(float));
      }
    }
  }

  void backward() override {
    const int64_t B = b_, L = l_, H = h_, G = g_, out = dirs_ * h_;
    for (int64_t dir = 0; dir < dirs_; ++dir) {
      const Dir& d = dir_[dir];
      std::fill(dh_, dh_ + B * H, 0.f);
      std::fill(dc_, dc_ + B * H, 0.f);
      for (int64_t s = L - 1; s >= 0; --s) {
        const int64_t t = dir == 0 ? s : L - 1 - s, tp = dir == 0 ? t - 1 : t + 1;
        const bool first = s == 0, last = s == L - 1;
        const float *gate = d.gate, *hs = d.h, *st = d.s, *dy = a_.dy, *ids = ids_;
        float *ax = ax_, *ah = ah_, *dh = dh_, *dc = dc_;
        const bool lstm = lstm_, seq = seq_;
#pragma omp parallel for schedule(static)
        for (int64_t n = 0; n < B; ++n)
          for (int64_t j = 0; j < H; ++j) {
            const int64_t at = (n * L + t) * G + j, o = (n * L + t) * H + j, ap = (n * L + tp) * H + j;
            const int64_t c = n * H + j;
            if (ids && ids[n * L + t] == 0.f) {  // padding: dh and dc pass through, no gate gradients
              for (int k = 0; k < (lstm ? 4 : 3); ++k) ax[at + k * H] = ah[at + k * H] = 0.f;
              if (!seq && last) dh[c] += dy[n * out + dir * H + j];  // y is the state carried here
              continue;
            }
            float g = dh[c];
            if (seq)
              g += dy[(n * L + t) * out + dir * H + j];
            else if (last)
              g += dy[n * out + dir * H + j];
            const float* gt = gate + at;
            float gv[4], da[4];
            for (int k = 0; k < (lstm ? 4 : 3); ++k) gv[k] = gt[k * H];
            if (lstm) {
              lstm_cell_backward(gv, st[o], first ? 0.f : st[ap], g, dc[c], da);
              for (int k = 0; k < 4; ++k) ax[at + k * H] = da[k];
              dh[c] = 0.f;
            } else {
              float dah[3];
              gru_cell_backward(gv, st[o], first ? 0.f : hs[ap], g, da, dah, dh[c]);
              for (int k = 0; k < 3; ++k) {
                ax[at + k * H] = da[k];
                ah[at + k * H] = dah[k];
              }
            }
          }
        // dh_{t-1} = the part that skips W_hh (gru's z dh, a padding position's whole dh; lstm's 0)
        // + dAh_t W_hh; nothing reaches before the first step.
        if (!first) gemm('N', 'N', B, H, G, 1.f, ah_ + t * G, L * G, d.whh, H, 1.f, dh_, H);
      }
      // h_{t-1} of every step (zero at the first), then the weights' gradients over all rows.
      const float* hs = d.h;
      float* hp = hprev_;
#pragma omp parallel for schedule(static)
      for (int64_t n = 0; n < B; ++n)
        for (int64_t t = 0; t < L; ++t) {
          const int64_t tp = dir == 0 ? t - 1 : t + 1;
          float* row = hp + (n * L + t) * H;
          if (tp < 0 || tp >= L)
            std::fill(row, row + H, 0.f);
          else
            std::memcpy(row, hs + (n * L + tp) * H, size_t(H) * sizeof(float));
        }
      gemm('T', 'N', G, d_, rows(), 1.f, ax_, G, a_.x, d_, 0.f, d.dwih, d_);
      gemm('T', 'N', G, H, rows(), 1.f, ah_, G, hprev_, H, 0.f, d.dwhh, H);
      column_sums(ax_, rows(), G, d.dbih);
      column_sums(ah_, rows(), G, d.dbhh);
      if (a_.dx) gemm('N', 'N', rows(), d_, G, 1.f, ax_, G, d.wih, d_, dir == 0 ? 0.f : 1.f, a_.dx, d_);
    }
    if (dids_) std::fill(dids_, dids_ + B * L, 0.f);  // token ids: no gradient
  }

 private:
  struct Dir {
    const float *wih = nullptr, *whh = nullptr, *bih = nullptr, *bhh = nullptr;
    float *dwih = nullptr, *dwhh = nullptr, *dbih = nullptr, *dbhh = nullptr;
    float *gate = nullptr, *h = nullptr, *s = nullptr;  // kept: gates, h, and c (lstm) or hn (gru)
  };
  static size_t floats(int64_t n) { return size_t(n) * sizeof(float); }
  int64_t rows() const { return b_ * l_; }
  int64_t per_direction() const { return rows() * (g_ + 2 * h_); }

  bool lstm_, seq_;
  int64_t dirs_, b_, l_, d_, h_, g_;
  BoundActivations a_;
  const float* ids_ = nullptr;  // the mask's token ids (B, L), or null
  float* dids_ = nullptr;
  Dir dir_[2];
  float *ax_ = nullptr, *ah_ = nullptr, *hh_ = nullptr, *dh_ = nullptr, *dc_ = nullptr, *hprev_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_recurrent_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<RecurrentCpu>(static_cast<const Recurrent&>(l), ctx);
}

}  // namespace trainer
