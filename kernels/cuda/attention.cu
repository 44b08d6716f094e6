// multi_head_attention's own kernels (attention.cuh): the pointer arrays of the batched
// products, the softmax of the scores with the causal mask, dropout on the weights, and the softmax's
// backward. One warp a row for the softmaxes; the rows are read again from L2 between the passes.
#include <cfloat>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"
#include "lib/core/dropout_formula.h"
#include "lib/core/rotary_formula.h"

namespace trainer::cuda {
namespace {

__global__ void fill_pointers_kernel(void** out, PointerTable t) {
  const int64_t pairs = t.samples * t.heads, n = pairs * t.arrays;
  for (int64_t j = global_index(); j < n; j += grid_stride()) {
    const int a = int(j / pairs);
    const int64_t i = j % pairs, b = i / t.heads, h = i % t.heads;
    out[j] = t.base[a] + b * t.per_sample[a] + h * t.per_head[a];
  }
}

// The columns of the row at position `pos` that are written: up to the end of its block of
// positions when causal.
__device__ __forceinline__ int64_t written_end(int64_t pos, int64_t len, bool causal, int64_t block) {
  if (!causal) return len;
  const int64_t end = (pos / block + 1) * block;
  return end < len ? end : len;
}

// Each lane reads an element of s before it writes the same element of p: p may alias s.
template <class T>
__global__ void softmax_kernel(const float* s, int64_t s_pair, T* p, int64_t p_pair, BlockRows b, bool causal,
                               int64_t block) {
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32), len = b.len;
  const int lane = int(threadIdx.x % 32);
  for (int64_t q = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; q < b.pairs * b.count;
       q += warps) {
    const int64_t pair = q / b.count, i = q % b.count, pos = b.first + i;
    const float* in = s + pair * s_pair + i * len;
    T* row = p + pair * p_pair + i * len;
    const int64_t n = causal ? pos + 1 : len;
    const T* keys = b.keys ? static_cast<const T*>(b.keys) + pair / b.heads * len : nullptr;
    const auto key = [&](int64_t j) { return !keys || to_f32(keys[j]) != 0.f; };
    float m = -FLT_MAX;
    for (int64_t j = lane; j < n; j += 32)
      if (key(j)) m = fmaxf(m, in[j]);
    m = warp_max(m);
    float sum = 0.f;
    for (int64_t j = lane; j < n; j += 32)
      if (key(j)) sum += __expf(in[j] - m);
    sum = warp_sum(sum);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;  // no key left: the row is 0
    const int64_t end = written_end(pos, len, causal, block);
    for (int64_t j = lane; j < end; j += 32) {
      const float v = j < n && key(j) ? __expf(in[j] - m) * inv : 0.f;
      row[j] = from_f32<T>(v);
    }
  }
}

template <class T>
__global__ void dropout_kernel(const T* p, T* pd, int64_t n, float rate, const StepScalars* s, int layer) {
  const uint64_t seed = s->seed, stream = dropout_stream(s->step, layer);
  const float keep = dropout_keep_scale(rate);
  for (int64_t i = global_index(); i < n; i += grid_stride())
    pd[i] = from_f32<T>(to_f32(p[i]) * dropout_mask(seed, stream, uint64_t(i), rate, keep));
}

// As softmax_kernel, ds may alias dpd (which it follows: d_pair). causal: P is 0 after the row's
// position, and so is dS: those columns are written, never read. The dropout mask of P's element
// (pair, pos, j) is unit (pair len + pos) len + j, as launch_attention_dropout numbers it.
template <class T>
__global__ void softmax_backward_kernel(const T* p, int64_t p_pair, const float* dpd, T* ds, int64_t d_pair,
                                        BlockRows b, bool causal, int64_t block, float scale, float rate,
                                        const StepScalars* s, int layer) {
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32), len = b.len;
  const int lane = int(threadIdx.x % 32);
  const bool drop = rate > 0.f;
  const uint64_t seed = drop ? s->seed : 0, stream = drop ? dropout_stream(s->step, layer) : 0;
  const float keep = drop ? dropout_keep_scale(rate) : 1.f;
  for (int64_t q = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; q < b.pairs * b.count;
       q += warps) {
    const int64_t pair = q / b.count, i = q % b.count, pos = b.first + i;
    const T* pr = p + pair * p_pair + i * len;
    const float* in = dpd + pair * d_pair + i * len;
    T* dr = ds + pair * d_pair + i * len;
    const uint64_t unit = uint64_t((pair * len + pos) * len);
    const auto dp = [&](int64_t j) {  // dP_j: the dropped weights' gradient through the mask
      const float d = in[j];
      return drop ? d * dropout_mask(seed, stream, unit + uint64_t(j), rate, keep) : d;
    };
    const int64_t n = causal ? pos + 1 : len;
    float c = 0.f;
    for (int64_t j = lane; j < n; j += 32) c += dp(j) * to_f32(pr[j]);
    c = warp_sum(c);
    const int64_t end = written_end(pos, len, causal, block);
    for (int64_t j = lane; j < end; j += 32) {
      const float v = j < n ? scale * to_f32(pr[j]) * (dp(j) - c) : 0.f;
      dr[j] = from_f32<T>(v);
    }
  }
}

// Blocks of 8 warps, a row a warp, as many blocks as fill the GPU.
unsigned row_blocks(int64_t rows) { return grid_for((rows + 7) / 8 * kThreads, kThreads); }

// One thread a pair (row, q or k, head, i < hd/2) of m's rows (3 d wide).
template <class T>
__global__ void rotary_kernel(T* m, int64_t len, int64_t d, int64_t hd, int64_t n, float base, float sign) {
  const int64_t half = hd / 2, per_row = 2 * d / 2;  // pairs a row: 2 parts x d / 2
  for (int64_t e = global_index(); e < n; e += grid_stride()) {
    const int64_t row = e / per_row, k = e % per_row, part = k / (d / 2), in_part = k % (d / 2);
    const int64_t head = in_part / half, i = in_part % half;
    T* v = m + row * 3 * d + part * d + head * hd;
    float a = to_f32(v[i]), b = to_f32(v[i + half]);
    rotary_rotate(a, b, rotary_angle(row % len, i, hd, base), sign);
    v[i] = from_f32<T>(a);
    v[i + half] = from_f32<T>(b);
  }
}

}  // namespace

void launch_fill_pointers(void** out, const PointerTable& t, cudaStream_t stream) {
  const int64_t n = t.samples * t.heads * t.arrays;
  if (n <= 0) return;
  fill_pointers_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, t);
  CUDA_CHECK_LAUNCH();
}

void launch_attention_softmax(DType t, const float* s, int64_t s_pair, void* p, int64_t p_pair,
                              const BlockRows& b, bool causal, int64_t block, cudaStream_t stream) {
  const int64_t rows = b.pairs * b.count;
  if (rows <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    softmax_kernel<T>
        <<<row_blocks(rows), kThreads, 0, stream>>>(s, s_pair, static_cast<T*>(p), p_pair, b, causal, block);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_attention_rotary(DType t, void* m, int64_t batch, int64_t len, int64_t d, int64_t heads,
                             float base, float sign, cudaStream_t stream) {
  const int64_t hd = d / heads, half = hd / 2, n = batch * len * 2 * heads * half;  // pairs
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    rotary_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<T*>(m), len, d, hd, n, base, sign);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_attention_dropout(DType t, const void* p, void* pd, int64_t n, float rate, const StepScalars* s,
                              int layer_index, cudaStream_t stream) {
  if (n <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    dropout_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(p), static_cast<T*>(pd), n,
                                                            rate, s, layer_index);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_attention_softmax_backward(DType t, const void* p, int64_t p_pair, const float* dp, void* ds,
                                       int64_t d_pair, const BlockRows& b, bool causal, int64_t block,
                                       float scale, float rate, const StepScalars* s, int layer_index,
                                       cudaStream_t stream) {
  const int64_t rows = b.pairs * b.count;
  if (rows <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    softmax_backward_kernel<T>
        <<<row_blocks(rows), kThreads, 0, stream>>>(static_cast<const T*>(p), p_pair, dp, static_cast<T*>(ds),
                                                    d_pair, b, causal, block, scale, rate, s, layer_index);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
