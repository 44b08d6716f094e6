// One unit's step of the recurrent backward pass through its cell (lib/core/recurrent_formula.h),
// shared by the block kernels (recurrent.cu) and the cluster kernels (recurrent_cluster.cu), which
// differ in where a unit's hidden-side gradients go (a block's rows of every unit, or a cluster
// block's share). Only included from .cu files.
#pragma once

#include <cstdint>

#include "kernels/cuda/recurrent.cuh"
#include "lib/core/recurrent_formula.h"

namespace trainer::cuda {

// Unit j (of H) of sample b at position t (tp: the step before, in the pass's direction): dh and
// dc are the gradients reaching its h and (lstm) c from later steps, and become those to pass to
// the step before (lstm: dh 0, its W_hh part added by the caller; gru: the part that skips W_hh).
// dy is y's gradient (rows `out` wide, this direction's units from `column`; seq: every position's
// h, else the last one's). Writes the input-side gradients dax (B, L, G H), gru's hidden-side
// ones dah_out (null for lstm, whose are the same), and the hidden-side gradients into
// ds[k * ds_stride] for gate k. A padding position (id 0) passes dh and dc through.
__device__ __forceinline__ void cell_backward_unit(const RecurrentPass& p, const float* gate, const float* h,
                                                   const float* state, const float* dy, int64_t out,
                                                   int64_t column, bool seq, bool first, bool last, int64_t b,
                                                   int64_t t, int64_t tp, int64_t j, int64_t H, int gates,
                                                   float& dh, float& dc, float* dax, float* dah_out,
                                                   float* ds, int64_t ds_stride) {
  const int64_t L = p.length, G = gates * H;
  const int64_t at = (b * L + t) * G + j, o = (b * L + t) * H + j, ap = (b * L + tp) * H + j;
  if (p.ids && p.ids[b * L + t] == 0.f) {  // padding: dh and dc pass through, no gate gradients
    for (int k = 0; k < gates; ++k) {
      dax[at + k * H] = ds[k * ds_stride] = 0.f;
      if (dah_out) dah_out[at + k * H] = 0.f;
    }
    if (!seq && last) dh += dy[b * out + column + j];  // y is the state carried here
    return;
  }
  float g = dh;
  if (seq)
    g += dy[(b * L + t) * out + column + j];
  else if (last)
    g += dy[b * out + column + j];
  float gv[4], da[4];
  for (int k = 0; k < gates; ++k) gv[k] = gate[at + k * H];
  if (p.lstm) {
    float c = dc;
    lstm_cell_backward(gv, state[o], first ? 0.f : state[ap], g, c, da);
    dc = c;
    dh = 0.f;
    for (int k = 0; k < 4; ++k) dax[at + k * H] = ds[k * ds_stride] = da[k];
  } else {
    float d2[3], direct;
    gru_cell_backward(gv, state[o], first ? 0.f : h[ap], g, da, d2, direct);
    dh = direct;
    for (int k = 0; k < 3; ++k) {
      dax[at + k * H] = da[k];
      dah_out[at + k * H] = ds[k * ds_stride] = d2[k];
    }
  }
}

}  // namespace trainer::cuda
