// The element-wise and row-wise parts of multi_head_attention on the GPU (attention_cuda.cc runs
// the matrix products with cuBLAS). Activations of dtype t (f32, bf16, fp16), arithmetic in f32.
//   rows: (B, L, G, H, hd) as the projections read and write them (G = 3: q | k | v, or 1)
//   heads: (G, B, H, L, hd), each (sample, head) a contiguous (L, hd) matrix for the batched
//          products
//   P, dS: (B H L, L), a row per query position
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

struct HeadsGeometry {
  int64_t batch = 0, length = 0, groups = 1, heads = 1, head_dim = 1;
};

// heads = rows rearranged (to_heads), or rows = heads (!to_heads); src and dst distinct.
void launch_rearrange_heads(DType t, const HeadsGeometry& g, const void* src, void* dst, bool to_heads,
                            cudaStream_t stream);

// P = softmax of each of `rows` rows of `len` scores s (f32: the products' f32 output, so the
// exponentials see unrounded scores); causal: row r is query position r % len, whose keys after it
// get P = 0. p may be s itself (t = f32).
void launch_attention_softmax(DType t, const float* s, void* p, int64_t rows, int64_t len, bool causal,
                              cudaStream_t stream);

// pd = p * dropout mask (element e of P: unit e; lib/core/dropout_formula.h), n elements.
void launch_attention_dropout(DType t, const void* p, void* pd, int64_t n, float rate, const StepScalars* s,
                              int layer_index, cudaStream_t stream);

// dS from dp, the gradient of the dropped P (dP', f32): through the dropout mask (rate > 0), then
// the softmax: dS = scale * P (dP - sum_j dP_j P_j), each row of `len`. ds may be dp itself (t = f32).
void launch_attention_softmax_backward(DType t, const void* p, const float* dp, void* ds, int64_t rows,
                                       int64_t len, float scale, float rate, const StepScalars* s,
                                       int layer_index, cudaStream_t stream);

}  // namespace trainer::cuda
