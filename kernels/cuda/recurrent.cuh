// The recurrences of lstm / gru on the GPU (lib/layers/recurrent.h; the cells are
// lib/core/recurrent_formula.h, as on the CPU). One launch runs every step of one direction: each
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
  bool reverse = false;  // the positions from L - 1 down to 0
  int samples = 1;       // rows of the batch a block carries: 1, 2, 4 or 8 (recurrent_samples())
};

// How many batch rows a block carries for a batch of `batch`.
int recurrent_samples(int64_t batch, int64_t units);
// Opts the kernels in to the shared memory `p` needs (once, when a kernel is created).
void prepare_recurrent(const RecurrentPass& p);

// wt = whh^T, (H, G H) from (G H, H).
void launch_recurrent_transpose(const float* whh, int64_t rows, int64_t cols, float* wt, cudaStream_t stream);
// Every step of one direction: from ax (x W_ih^T), the biases and wt, writes gate, h and state
// at every position.
void launch_recurrent_forward(const RecurrentPass& p, const float* ax, const float* wt, const float* bih,
                              const float* bhh, float* gate, float* h, float* state, cudaStream_t stream);
// Every step of one direction backward, from the last position it read to the first: dy is the
// layer's output gradient, (B, L, out) with seq, else (B, out) read at the direction's last step;
// its features start at `column`. Writes the pre-activations' gradients dax (input side) and,
// for gru, dah (hidden side; lstm's are dax).
void launch_recurrent_backward(const RecurrentPass& p, const float* gate, const float* h, const float* state,
                               const float* whh, const float* dy, int64_t out, int64_t column, bool seq,
                               float* dax, float* dah, cudaStream_t stream);
// y from h: with seq, y[b, t, column + j] = h[b, t, j] for every t; else y[b, column + j] =
// h[b, t_last, j]. out: y's row width.
void launch_recurrent_output(const float* h, int64_t batch, int64_t length, int64_t units, bool seq,
                             int64_t t_last, float* y, int64_t out, int64_t column, cudaStream_t stream);
// hprev[b, t] = h[b, t + step] (step -1 forward, +1 reverse), 0 where that is outside [0, L).
void launch_recurrent_shift(const float* h, int64_t batch, int64_t length, int64_t units, int64_t step,
                            float* hprev, cudaStream_t stream);

}  // namespace trainer::cuda
