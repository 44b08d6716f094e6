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
#include <type_traits>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vector_math.h"
#include "lib/core/recurrent_formula.h"
#include "lib/layers/recurrent.h"

namespace trainer {
namespace {

using cpu::column_sums;
using cpu::gemm;

// One row (sample) of one step, over its H units, sixteen at a time (cpu::f16: AVX-512 where the
// CPU has it, TRAINER_AVX512_CLONES), then four (cpu::f4), then one by one:
// the cell inlined with activations of our own (kernels/cpu/vector_math.h; libm's scalar expf and
// tanhf took ~27% of a one-thread reuters_lstm step), the same operations either way, so a unit's
// results do not depend on H. First: the sequence's first step (no previous state, no hidden
// product); HasDy: a gradient reaches y at this position. Each pointer is a row of its own.
// f(std::true_type{}) or f(std::false_type{}): a run-time flag as a template argument of the rows.
template <class F>
void with_flag(bool flag, const F& f) {
  if (flag)
    f(std::true_type{});
  else
    f(std::false_type{});
}

// Inlined, with the row's lambda, into the row functions, whose AVX-512 clones then run the f16
// units in zmm registers (a call left between them ran f16 as four SSE vectors, slower than f4).
template <class F>
TRAINER_HD_INLINE void over_units(int64_t H, const F& unit) {
  int64_t j = 0;
  for (; j + 16 <= H; j += 16) unit(cpu::f16{}, j);
  for (; j + 4 <= H; j += 4) unit(cpu::f4{}, j);
  for (; j < H; ++j) unit(0.f, j);
}

template <bool First>
TRAINER_AVX512_CLONES void lstm_row_forward(int64_t H, const float* ax, const float* bih, const float* bhh,
                                            const float* hh, const float* c_prev, float* gate, float* c,
                                            float* h) {
  over_units(
      H, [&](auto tag, int64_t j) __attribute__((always_inline)) {
        using T = decltype(tag);
        using cpu::load;
        T pre[4], g4[4], cj, hj;
        for (int k = 0; k < 4; ++k) {
          const int64_t at = k * H + j;
          pre[k] =
              load<T>(ax + at) + load<T>(bih + at) + load<T>(bhh + at) + (First ? T{} : load<T>(hh + at));
        }
        lstm_cell_forward<cpu::VectorActivations>(pre[0], pre[1], pre[2], pre[3],
                                                  First ? T{} : load<T>(c_prev + j), g4, cj, hj);
        cpu::store(c + j, cj);
        cpu::store(h + j, hj);
        for (int k = 0; k < 4; ++k) cpu::store(gate + k * H + j, g4[k]);
      });
}

template <bool First>
TRAINER_AVX512_CLONES void gru_row_forward(int64_t H, const float* ax, const float* bih, const float* bhh,
                                           const float* hh, const float* h_prev, float* gate, float* hn,
                                           float* h) {
  over_units(
      H, [&](auto tag, int64_t j) __attribute__((always_inline)) {
        using T = decltype(tag);
        using cpu::load;
        T side[3], x[3], g3[3], hj;
        for (int k = 0; k < 3; ++k) {
          const int64_t at = k * H + j;
          side[k] = load<T>(bhh + at) + (First ? T{} : load<T>(hh + at));
          x[k] = load<T>(ax + at) + load<T>(bih + at);
        }
        gru_cell_forward<cpu::VectorActivations>(x[0], x[1], x[2], side[0], side[1], side[2],
                                                 First ? T{} : load<T>(h_prev + j), g3, hj);
        cpu::store(hn + j, side[2]);
        cpu::store(h + j, hj);
        for (int k = 0; k < 3; ++k) cpu::store(gate + k * H + j, g3[k]);
      });
}

// The gradient reaching unit j's h_t: the one carried from t + 1, plus y's at this position.
template <class T, bool HasDy>
TRAINER_HD_INLINE T h_grad(const float* dh, const float* dy, int64_t j) {
  return HasDy ? cpu::load<T>(dh + j) + cpu::load<T>(dy + j) : cpu::load<T>(dh + j);
}

// Unit j's N activated gates (rows of H).
template <class T, int N>
TRAINER_HD_INLINE void load_gates(const float* gate, int64_t H, int64_t j, T (&gv)[N]) {
  for (int k = 0; k < N; ++k) gv[k] = cpu::load<T>(gate + k * H + j);
}

// dh: in, the gradient carried to h_t; out, the part of h_{t-1}'s that skips W_hh (lstm: 0).
// dc (lstm): in, the gradient carried to c_t; out, c_{t-1}'s.
template <bool First, bool HasDy>
TRAINER_AVX512_CLONES void lstm_row_backward(int64_t H, const float* gate, const float* c,
                                             const float* c_prev, const float* dy, float* dh, float* dc,
                                             float* dax) {
  over_units(
      H, [&](auto tag, int64_t j) __attribute__((always_inline)) {
        using T = decltype(tag);
        using cpu::load;
        const T g = h_grad<T, HasDy>(dh, dy, j);
        T gv[4], da[4], dcj = load<T>(dc + j);
        load_gates(gate, H, j, gv);
        lstm_cell_backward<cpu::VectorActivations>(gv, load<T>(c + j), First ? T{} : load<T>(c_prev + j), g,
                                                   dcj, da);
        cpu::store(dc + j, dcj);
        for (int k = 0; k < 4; ++k) cpu::store(dax + k * H + j, da[k]);
        cpu::store(dh + j, T{});
      });
}

template <bool First, bool HasDy>
TRAINER_AVX512_CLONES void gru_row_backward(int64_t H, const float* gate, const float* hn,
                                            const float* h_prev, const float* dy, float* dh, float* dax,
                                            float* dah) {
  over_units(
      H, [&](auto tag, int64_t j) __attribute__((always_inline)) {
        using T = decltype(tag);
        using cpu::load;
        const T g = h_grad<T, HasDy>(dh, dy, j);
        T gv[3], da[3], dh3[3], dhj;
        load_gates(gate, H, j, gv);
        gru_cell_backward(gv, load<T>(hn + j), First ? T{} : load<T>(h_prev + j), g, da, dh3, dhj);
        cpu::store(dh + j, dhj);
        for (int k = 0; k < 3; ++k) {
          cpu::store(dax + k * H + j, da[k]);
          cpu::store(dah + k * H + j, dh3[k]);
        }
      });
}

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
        for (int64_t n = 0; n < B; ++n) {
          // Row n of step t: its gates, h and state; h and the state of step tp before it.
          const int64_t row = n * L + t;
          float* gr = gate + row * G;
          float *hr = hs + row * H, *sr = st + row * H;
          const float* axr = ax + row * G;
          const float* hhr = hh + n * G;
          // (a valid row when first, never read then)
          const float *hp = first ? hr : hs + (n * L + tp) * H, *sp = first ? sr : st + (n * L + tp) * H;
          if (ids && ids[row] == 0.f) {  // padding: h and c pass through
            for (int64_t j = 0; j < H; ++j) {
              hr[j] = first ? 0.f : hp[j];
              sr[j] = first || !lstm ? 0.f : sp[j];
            }
            std::fill(gr, gr + G, 0.f);
            continue;
          }
          with_flag(first, [&](auto first_tag) {
            constexpr bool kFirst = decltype(first_tag)::value;
            if (lstm)
              lstm_row_forward<kFirst>(H, axr, bih, bhh, hhr, sp, gr, sr, hr);
            else
              gru_row_forward<kFirst>(H, axr, bih, bhh, hhr, hp, gr, sr, hr);
          });
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
        for (int64_t n = 0; n < B; ++n) {
          const int64_t row = n * L + t;
          const float *gr = gate + row * G, *sr = st + row * H;
          const float *hp = first ? hs + row * H : hs + (n * L + tp) * H,
                      *sp = first ? sr : st + (n * L + tp) * H;
          float *axr = ax + row * G, *ahr = ah + row * G, *dhr = dh + n * H, *dcr = dc + n * H;
          // The gradient reaching y at this position (sequences: every one; else the last).
          const float* dyr = seq ? dy + row * out + dir * H : last ? dy + n * out + dir * H : nullptr;
          if (ids && ids[row] == 0.f) {  // padding: dh and dc pass through, no gate gradients
            std::fill(axr, axr + G, 0.f);
            std::fill(ahr, ahr + G, 0.f);
            if (!seq && last)
              for (int64_t j = 0; j < H; ++j) dhr[j] += dyr[j];  // y is the state carried here
            continue;
          }
          with_flag(first, [&](auto first_tag) {
            with_flag(dyr != nullptr, [&](auto dy_tag) {
              constexpr bool kFirst = decltype(first_tag)::value, kDy = decltype(dy_tag)::value;
              if (lstm)
                lstm_row_backward<kFirst, kDy>(H, gr, sr, sp, dyr, dhr, dcr, axr);
              else
                gru_row_backward<kFirst, kDy>(H, gr, sr, hp, dyr, dhr, axr, ahr);
            });
          });
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
