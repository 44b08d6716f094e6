// Three launches: count the labels, one block a row (an online softmax: the running max and the
// sum of exponentials in one read of the logits, then the gradient in a second), and one block
// that sums the rows' losses in a fixed order (the result is the same on every run).
// A row's threads read and write 16 bytes at a time (a scalar head up to the row's first 16-byte
// boundary, then vectors, then a scalar tail), and fold each vector into the running sum with one
// rescale: element-wise 2-byte loads, each with a branchy update, took 1.27 ms for (8192, 50257)
// bf16 on an H200, about 3x what the kernel's 2.5 GB of traffic needs.
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/token_loss.cuh"
#include "kernels/cuda/vec16.cuh"

namespace trainer::cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr int kSumThreads = 1024;

__device__ __forceinline__ bool nan_bits(float x) { return (__float_as_uint(x) & 0x7fffffffu) > 0x7f800000u; }

__global__ void count_labels(const int32_t* labels, int64_t rows, int32_t ignore, TokenLossScratch* s) {
  __shared__ int part[kSumThreads / 32];
  int n = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) n += labels[i] != ignore;
  for (int off = 16; off > 0; off /= 2) n += __shfl_xor_sync(0xffffffffu, n, off);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = n;
  __syncthreads();
  if (threadIdx.x == 0) {
    int t = 0;
    for (int w = 0; w < int(blockDim.x / 32); ++w) t += part[w];
    s->counted = t;
  }
}

// The rows move in 16-byte accesses of kVec<T> elements (vec16.cuh).
// Whole warps, and a thread for each head and tail element (fewer than kVec<T>).
static_assert(kRowThreads % 32 == 0 && kRowThreads <= 1024);

// A row of n elements at p: `head` scalars up to its first 16-byte boundary (at most n), then
// `vecs` 16-byte vectors, then a scalar tail (fewer than kVec<T>) from column `tail`.
template <class T>
struct RowSplit {
  int64_t head, vecs, tail;
  __device__ RowSplit(const T* p, int64_t n) {
    const int64_t phase = int64_t(reinterpret_cast<uintptr_t>(p) & 15) / int64_t(sizeof(T));
    head = phase == 0 ? 0 : (kVec<T> - phase < n ? kVec<T> - phase : n);
    vecs = (n - head) / kVec<T>;
    tail = head + vecs * kVec<T>;
  }
};

// A thread's running softmax state over its columns: max m, sum of exp(x - m), and the argmax
// (the first index of the largest value, NaN never chosen, as the CPU's scan).
struct Online {
  float m;
  float s;
  float best;
  int arg;
};

// Folds N logits from column c (N = 1, or one vector) into st, columns in increasing order: the
// sum is rescaled once for the N. fmaxf skips a NaN in the max, while __expf (ex2.approx, NaN in
// NaN out) carries it into the sum: the loss becomes NaN, which the guard sees. arg: the first
// column of the N whose max rose above best (strictly, so an earlier tie stays), resolved to the
// element's column after the scan.
template <int N>
__device__ __forceinline__ void fold(Online& st, const float (&x)[N], int64_t c) {
  float top[N];
#pragma unroll
  for (int j = 0; j < N; ++j) top[j] = x[j];
#pragma unroll
  for (int w = 1; w < N; w *= 2)
#pragma unroll
    for (int j = 0; j + w < N; j += 2 * w) top[j] = fmaxf(top[j], top[j + w]);
  if (top[0] > st.m) {
    st.s *= __expf(st.m - top[0]);
    st.m = top[0];
  }
  float e[N];
#pragma unroll
  for (int j = 0; j < N; ++j) e[j] = __expf(x[j] - st.m);
#pragma unroll
  for (int w = 1; w < N; w *= 2)
#pragma unroll
    for (int j = 0; j + w < N; j += 2 * w) e[j] += e[j + w];
  st.s += e[0];
  if (top[0] > st.best) {
    st.best = top[0];
    st.arg = int(c);
  }
}

__device__ __forceinline__ Online merge(Online a, Online b) {
  Online r;
  r.m = fmaxf(a.m, b.m);
  r.s = (a.s == 0.f ? 0.f : a.s * __expf(a.m - r.m)) + (b.s == 0.f ? 0.f : b.s * __expf(b.m - r.m));
  const bool take_b = b.arg >= 0 && (a.arg < 0 || b.best > a.best || (b.best == a.best && b.arg < a.arg));
  r.best = take_b ? b.best : a.best;
  r.arg = take_b ? b.arg : a.arg;
  return r;
}

// Vectors a thread keeps in flight before their updates.
constexpr int kLoads = 4;

// T: the logits' and their gradient's dtype (f32 arithmetic in every one).
template <class T>
__global__ void __launch_bounds__(kRowThreads)
    token_rows(const T* out, const int32_t* labels, int64_t classes, int64_t pitch, int32_t ignore, T* dout,
               TokenLossScratch* s) {
  constexpr int V = kVec<T>;
  constexpr int64_t kStride = kRowThreads;
  const int64_t row = blockIdx.x;
  const int t = int(threadIdx.x);
  const T* o = out + row * pitch;
  T* d = dout + row * pitch;
  float* row_loss = reinterpret_cast<float*>(s + 1);
  const int32_t y = labels[row];
  if (y == ignore) {
    const RowSplit<T> ds(d, classes);
    if (t < ds.head) d[t] = from_f32<T>(0.f);
    uint4* dv = reinterpret_cast<uint4*>(d + ds.head);
    for (int64_t k = t; k < ds.vecs; k += kStride) __stcs(dv + k, make_uint4(0, 0, 0, 0));
    if (ds.tail + t < classes) d[ds.tail + t] = from_f32<T>(0.f);
    if (t == 0) row_loss[row] = 0.f;
    return;
  }
  const float inv = 1.f / float(s->counted);  // read before the scan, which hides its latency
  const RowSplit<T> rs(o, classes);
  const uint4* ov = reinterpret_cast<const uint4*>(o + rs.head);
  // Each thread's columns in increasing order: its head element, its vectors, its tail element.
  Online st{-FLT_MAX, 0.f, -INFINITY, -1};
  if (t < rs.head) {
    const float x[1] = {to_f32(o[t])};
    fold(st, x, t);
  }
  int64_t k = t;
  for (; k + (kLoads - 1) * kStride < rs.vecs; k += kLoads * kStride) {
    uint4 u[kLoads];
#pragma unroll
    for (int i = 0; i < kLoads; ++i) u[i] = ov[k + i * kStride];
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      float x[V];
      unpack<T>(u[i], x);
      fold(st, x, rs.head + (k + i * kStride) * V);
    }
  }
  for (; k < rs.vecs; k += kStride) {
    float x[V];
    unpack<T>(ov[k], x);
    fold(st, x, rs.head + k * V);
  }
  if (rs.tail + t < classes) {
    const float x[1] = {to_f32(o[rs.tail + t])};
    fold(st, x, rs.tail + t);
  }
  // The argmax's column: the first of its vector equal to the max.
  if (st.arg >= 0) {
    int c = st.arg;
    for (int j = 1; j < V && to_f32(o[c]) != st.best; ++j) ++c;
    st.arg = c;
  }
  for (int off = 16; off > 0; off /= 2) {
    Online b;
    b.m = __shfl_xor_sync(0xffffffffu, st.m, off);
    b.s = __shfl_xor_sync(0xffffffffu, st.s, off);
    b.best = __shfl_xor_sync(0xffffffffu, st.best, off);
    b.arg = __shfl_xor_sync(0xffffffffu, st.arg, off);
    st = merge(st, b);
  }
  __shared__ Online warps[kRowThreads / 32];
  __shared__ Online all;
  if ((t & 31) == 0) warps[t / 32] = st;
  __syncthreads();
  if (t == 0) {
    Online r = warps[0];
    for (int w = 1; w < kRowThreads / 32; ++w) r = merge(r, warps[w]);
    // The CPU takes index 0 when o[0] is NaN (nothing beats a NaN start).
    if (nan_bits(to_f32(o[0]))) r.arg = 0;
    all = r;
  }
  __syncthreads();
  const float log_z = all.m + logf(all.s);
  const auto grad = [&](float x, int64_t c) { return (__expf(x - log_z) - (c == y ? 1.f : 0.f)) * inv; };
  if (((reinterpret_cast<uintptr_t>(o) ^ reinterpret_cast<uintptr_t>(d)) & 15) != 0) {
    // out and dout 16-byte aligned at different columns: element by element.
    for (int64_t c = t; c < classes; c += kStride) d[c] = from_f32<T>(grad(to_f32(o[c]), c));
  } else {
    // The logits' last read and the gradient's write both streamed (evict first): L2 is left to
    // the rows of the other blocks, whose logits are read a second time.
    if (t < rs.head) d[t] = from_f32<T>(grad(to_f32(o[t]), t));
    uint4* dv = reinterpret_cast<uint4*>(d + rs.head);
    const auto put = [&](uint4 u, int64_t k) {
      const int64_t c0 = rs.head + k * V;
      float x[V];
      unpack<T>(u, x);
#pragma unroll
      for (int j = 0; j < V; ++j) x[j] = __expf(x[j] - log_z);
      if (c0 <= y && y < c0 + V) {
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (c0 + j == y) x[j] -= 1.f;
      }
#pragma unroll
      for (int j = 0; j < V; ++j) x[j] *= inv;
      __stcs(dv + k, pack<T>(x));
    };
    int64_t k = t;
    for (; k + (kLoads - 1) * kStride < rs.vecs; k += kLoads * kStride) {
      uint4 u[kLoads];
#pragma unroll
      for (int i = 0; i < kLoads; ++i) u[i] = __ldcs(ov + k + i * kStride);
#pragma unroll
      for (int i = 0; i < kLoads; ++i) put(u[i], k + i * kStride);
    }
    for (; k < rs.vecs; k += kStride) put(__ldcs(ov + k), k);
    if (rs.tail + t < classes) d[rs.tail + t] = from_f32<T>(grad(to_f32(o[rs.tail + t]), rs.tail + t));
  }
  if (t == 0) {
    const float loss = log_z - to_f32(o[y]);
    row_loss[row] = all.arg == y ? loss : -1.f - loss;
  }
}

__global__ void sum_rows(const int32_t* labels, int64_t rows, int32_t ignore, int64_t batch,
                         const TokenLossScratch* s, float* loss_sum, StepScalars* guard, uint32_t guard_bit,
                         float* sums) {
  const float* row_loss = reinterpret_cast<const float*>(s + 1);
  __shared__ double part[kSumThreads];
  __shared__ int hits[kSumThreads];
  double total = 0;
  int correct = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    if (labels[i] == ignore) continue;
    const float v = row_loss[i];
    if (v >= 0.f) {
      total += double(v);
      ++correct;
    } else {
      total += double(-1.f - v);  // also a NaN, which stays NaN
    }
  }
  part[threadIdx.x] = total;
  hits[threadIdx.x] = correct;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) {
      part[threadIdx.x] += part[threadIdx.x + half];
      hits[threadIdx.x] += hits[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  const int counted = s->counted;
  if (counted > 0) *loss_sum += float(part[0] / double(counted) * double(batch));
  if (sums) {
    sums[0] += float(hits[0]);
    sums[1] += float(counted);
  }
  const uint32_t bits = __float_as_uint(*loss_sum) & 0x7fffffffu;
  if (guard && bits >= 0x7f800000u) atomicOr(&guard->nonfinite, guard_bit);
}

}  // namespace

void launch_token_loss(DType t, const void* out, const int32_t* labels, int64_t rows, int64_t classes,
                       int64_t pitch, int32_t ignore, int64_t batch, void* dout, float* loss_sum,
                       TokenLossScratch* scratch, cudaStream_t stream, StepScalars* guard, uint32_t guard_bit,
                       float* sums) {
  count_labels<<<1, kSumThreads, 0, stream>>>(labels, rows, ignore, scratch);
  CUDA_CHECK_LAUNCH();
  if (rows > 0) {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      token_rows<T><<<unsigned(rows), kRowThreads, 0, stream>>>(
          static_cast<const T*>(out), labels, classes, pitch, ignore, static_cast<T*>(dout), scratch);
    });
    CUDA_CHECK_LAUNCH();
  }
  sum_rows<<<1, kSumThreads, 0, stream>>>(labels, rows, ignore, batch, scratch, loss_sum, guard, guard_bit,
                                          sums);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
