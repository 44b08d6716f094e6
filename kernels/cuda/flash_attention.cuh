// Fused multi-head attention on the GPU (FlashAttention-2's algorithm, our own kernels): the
// scores and weights of a (sample, head) never leave the chip, so nothing of size L x L is stored.
// Activations bf16 or fp16, every sum in f32 (tensor-core mma.sync with f32 accumulators).
//   qkv:   rows (B, L, 3D), D = H hd: q of head h at columns h hd, k at D + h hd, v at 2D + h hd
//   O, dO: rows (B, L, D), head h at columns h hd
//   lse:   (B, H, L) f32, ln sum_j exp(scale q_i . k_j) over the keys query i sees; +INFINITY for a
//          query that sees no key (its O row is 0 and its gradients are 0)
//   ids:   optional (B, L) token ids in the activation dtype: a key whose id is 0 gets no weight
// causal: query i sees the keys j <= i. scale: 1 / sqrt(hd), as the caller chooses.
// The pointers must be 16-byte aligned (the kernels move 16 bytes at a time); hd in {32, 64, 128}.
// Every call only enqueues work on `stream` (no allocation, no host wait): a CUDA graph may
// capture it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

// Dropout on the attention weights (training): the weight of (sample b, head h, query i, key j)
// is kept, times 1 / (1 - rate), where counter_uniform(seed, dropout_stream(step, layer),
// ((b H + h) L + i) L + j) >= rate (lib/core/dropout_formula.h): the masks of the unfused path
// (attention.cu) and of the CPU. Seed and step are read from `scalars` (device memory) by every
// launch, so a captured step replays with each step's own masks. The forward's log-sum-exp is the
// weights' before dropout; backward recomputes the same masks.
struct FlashDropout {
  float rate = 0.f;  // 0: no dropout
  const StepScalars* scalars = nullptr;
  int layer = 0;  // KernelContext::layer_index
};

// Whether the fused kernels take this shape: dtype bf16 or f16, hd in {32, 64, 128}, and a current
// device of compute capability 8.0 or more (cp.async and bf16 mma.sync).
bool flash_attention_supported(DType t, int64_t head_dim);

// O (B, L, D) and lse (B, H, L) from qkv (B, L, 3D), overwritten.
void launch_flash_attention_forward(DType t, const void* qkv, void* o, float* lse, int64_t batch, int64_t len,
                                    int64_t heads, int64_t head_dim, bool causal, const void* ids,
                                    float scale, cudaStream_t stream, const FlashDropout& dropout = {});

// The backward pass's scratch in bytes: delta = rowsum(dO * O) (B, H, L) f32, then the f32 sums
// of dq (B, L, D).
size_t flash_attention_backward_scratch_bytes(int64_t batch, int64_t len, int64_t heads, int64_t head_dim);

// dqkv rows (B, L, 3D), every column overwritten, from dout (B, L, D), with the weights recomputed
// from qkv and the forward's lse; o is the forward's output (for delta). scratch: at least
// flash_attention_backward_scratch_bytes(), 16-byte aligned, contents ignored.
void launch_flash_attention_backward(DType t, const void* qkv, const void* o, const void* dout,
                                     const float* lse, void* dqkv, void* scratch, int64_t batch, int64_t len,
                                     int64_t heads, int64_t head_dim, bool causal, const void* ids,
                                     float scale, cudaStream_t stream, const FlashDropout& dropout = {});

}  // namespace trainer::cuda
