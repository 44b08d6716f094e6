// The element-wise and row-wise parts of multi_head_attention on the GPU (attention_cuda.cc runs
// the matrix products with cuBLAS). Activations of dtype t (f32, bf16, fp16), arithmetic in f32.
//   rows: (B, L, G, H, hd) as the projections read and write them (G = 3: q | k | v, or 1); the
//         batched products read and write each (sample, head) in place through pointer arrays
//   P, dS: (B H L, L), a row per query position
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

// Pointer arrays for batched products over (sample, head) pairs: array a's entry for pair
// i = b * heads + h is base[a] + b * per_sample[a] + h * per_head[a] (bytes). Written on the
// device at the start of each step that uses them (a CUDA graph replays the writes): the
// executor's plans for other batch sizes share the memory they live in.
struct PointerTable {
  static constexpr int kMax = 64;
  char* base[kMax] = {};
  int64_t per_sample[kMax] = {}, per_head[kMax] = {};
  int arrays = 0;
  int64_t samples = 0, heads = 0;
};
void launch_fill_pointers(void** out, const PointerTable& t, cudaStream_t stream);

// The rows of a block of queries in each (sample, head) pair: `count` rows of `len` from
// position `first`, for `pairs` pairs. Each tensor of the softmaxes is addressed from the block's
// first row of pair 0, with its own stride between pairs (*_pair, elements).
// keys (not null, the softmax only): the token ids (samples, len) of the key-padding mask, in P's
// dtype; pair p is sample p / heads.
struct BlockRows {
  int64_t pairs = 0, count = 0, first = 0, len = 0;
  const void* keys = nullptr;
  int64_t heads = 1;
};

// P = softmax of each row of scores s (f32: the products' f32 output, so the exponentials see
// unrounded scores); causal: the row at position pos gets P = 0 after it, written up to the end of
// its block of `block` positions (the products of a block of queries read the keys up to there:
// attention_cuda.cc) and not beyond; the scores after pos are not read. p may be s itself (t = f32).
// With b.keys, keys whose id is 0 get P = 0 too, and a row with no key left is all 0.
void launch_attention_softmax(DType t, const float* s, int64_t s_pair, void* p, int64_t p_pair,
                              const BlockRows& b, bool causal, int64_t block, cudaStream_t stream);

// q and k of every row of m (batch, len, 3 d) in dtype t rotated in place by their positions
// (lib/core/rotary_formula.h; sign -1: the inverse, for their gradients), heads of d / heads.
void launch_attention_rotary(DType t, void* m, int64_t batch, int64_t len, int64_t d, int64_t heads,
                             float base, float sign, cudaStream_t stream);

// pd = p * dropout mask (element e of P: unit e; lib/core/dropout_formula.h), n elements.
void launch_attention_dropout(DType t, const void* p, void* pd, int64_t n, float rate, const StepScalars* s,
                              int layer_index, cudaStream_t stream);

// dS from dp, the gradient of the dropped P (dP', f32): through the dropout mask (rate > 0), then
// the softmax: dS = scale * P (dP - sum_j dP_j P_j), each row of `len`. dp and ds share a layout
// (d_pair); ds may be dp itself (t = f32). causal: the columns after the row's position are not
// read (P is 0 there) and dS there is 0, written up to the end of the row's block, as P.
void launch_attention_softmax_backward(DType t, const void* p, int64_t p_pair, const float* dp, void* ds,
                                       int64_t d_pair, const BlockRows& b, bool causal, int64_t block,
                                       float scale, float rate, const StepScalars* s, int layer_index,
                                       cudaStream_t stream);

}  // namespace trainer::cuda
