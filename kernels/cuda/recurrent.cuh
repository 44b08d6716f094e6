// The recurrences of lstm / gru on the GPU (lib/layers/recurrent.h; the cells are
// lib/core/recurrent_formula.h, as on the CPU). One launch runs every step of both directions: each
// block owns `samples` rows of the batch and carries their h (and c) in shared memory from step to
// step; the rows are independent, so blocks never wait for each other. Per step the block forms
// h_{t-1} W_hh^T (a thread per gate row, reading W_hh^T from L2, coalesced) and then the cells;
// backward forms dh_{t-1} = dAh_t W_hh the same way. The products over all B L rows (x W_ih^T,
// the weights' gradients) are cuBLAS's (recurrent_cuda.cc).
//   ax, dax, dah, gate: (B, L, G H)   h, state, hprev: (B, L, H)   whh: (G H, H)   wt: (H, G H)
//   state: lstm's c, gru's hn (h_{t-1} W_hn^T + b_hn). Every tensor f32.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace trainer::cuda {

// The largest hidden state the kernels take (shared memory: (2 H + 2 G H) floats a sample).
constexpr int64_t kMaxRecurrentUnits = 4096;

struct RecurrentPass {
  int64_t batch = 0, length = 0, units = 0;  // B, L, H
  bool lstm = true;
  int directions = 1;          // 2: direction 1 reads the positions from L - 1 down to 0, in the same launch
  int samples = 1;             // rows of the batch a block carries: 1, 2, 4 or 8 (recurrent_samples())
  const float* ids = nullptr;  // the mask's token ids (B, L): positions whose id is 0 are skipped; null: none
};

// One direction's tensors. Forward reads ax, w, bih, bhh and writes gate, h, state; backward reads
// gate, h, state, w and writes dax, dah.
struct RecurrentTensors {
  const float* ax = nullptr;  // x W_ih^T
  const float* w = nullptr;   // W_hh (G H, H); the forward of this file reads its transpose (H, G H)
  const float *bih = nullptr, *bhh = nullptr;
  float *gate = nullptr, *h = nullptr, *state = nullptr;
  float *dax = nullptr, *dah = nullptr;  // dah: gru only (lstm's are dax)
};

// How many batch rows a block carries for a batch of `batch`.
int recurrent_samples(int64_t batch, int64_t units);
// Opts the kernels in to the shared memory `p` needs (once, when a kernel is created).
void prepare_recurrent(const RecurrentPass& p);

// wt = whh^T, (H, G H) from (G H, H).
void launch_recurrent_transpose(const float* whh, int64_t rows, int64_t cols, float* wt, cudaStream_t stream);
// Every step of every direction (t: p.directions of them, w = W_hh^T): from ax, the biases and w,
// writes gate, h and state at every position.
void launch_recurrent_forward(const RecurrentPass& p, const RecurrentTensors* t, cudaStream_t stream);
// Every step of every direction backward, from the last position each read to the first: dy is
// the layer's output gradient, (B, L, out) with seq, else (B, out) read at each direction's last
// step; direction d's features start at d H. Writes the pre-activations' gradients dax (input
// side) and, for gru, dah (hidden side).
void launch_recurrent_backward(const RecurrentPass& p, const RecurrentTensors* t, const float* dy,
                               int64_t out, bool seq, cudaStream_t stream);
// y from h: with seq, y[b, t, column + j] = h[b, t, j] for every t (0 where ids, if not null, is
// 0); else y[b, column + j] = h[b, t_last, j]. out: y's row width.
void launch_recurrent_output(const float* h, const float* ids, int64_t batch, int64_t length, int64_t units,
                             bool seq, int64_t t_last, float* y, int64_t out, int64_t column,
                             cudaStream_t stream);
// hprev[b, t] = h[b, t + step] (step -1 forward, +1 reverse), 0 where that is outside [0, L).
void launch_recurrent_shift(const float* h, int64_t batch, int64_t length, int64_t units, int64_t step,
                            float* hprev, cudaStream_t stream);

}  // namespace trainer::cuda
