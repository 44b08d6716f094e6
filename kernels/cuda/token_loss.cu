// Three launches: count the labels, one block a row (an online softmax: the running max and the
// sum of exponentials in one read of the logits, then the gradient in a second), and one block
// that sums the rows' losses in a fixed order (the result is the same on every run).
#include <cfloat>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/token_loss.cuh"

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

// A thread's running softmax state over its columns: max m, sum of exp(x - m), and the argmax
// (the first index of the largest value, NaN never chosen, as the CPU's scan).
struct Online {
  float m;
  float s;
  float best;
  int arg;
};

__device__ __forceinline__ Online merge(Online a, Online b) {
  Online r;
  r.m = fmaxf(a.m, b.m);
  r.s = (a.s == 0.f ? 0.f : a.s * __expf(a.m - r.m)) + (b.s == 0.f ? 0.f : b.s * __expf(b.m - r.m));
  const bool take_b = b.arg >= 0 && (a.arg < 0 || b.best > a.best || (b.best == a.best && b.arg < a.arg));
  r.best = take_b ? b.best : a.best;
  r.arg = take_b ? b.arg : a.arg;
  return r;
}

// T: the logits' and their gradient's dtype (f32 arithmetic in every one).
template <class T>
__global__ void __launch_bounds__(kRowThreads)
    token_rows(const T* out, const int32_t* labels, int64_t classes, int32_t ignore, T* dout,
               TokenLossScratch* s) {
  const int64_t row = blockIdx.x;
  const T* o = out + row * classes;
  T* d = dout + row * classes;
  float* row_loss = reinterpret_cast<float*>(s + 1);
  const int32_t y = labels[row];
  if (y == ignore) {
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) d[c] = from_f32<T>(0.f);
    if (threadIdx.x == 0) row_loss[row] = 0.f;
    return;
  }
  Online st{-FLT_MAX, 0.f, 0.f, -1};
  const auto take = [&](float x, int64_t c) {
    if (nan_bits(x)) {
      st.s = __int_as_float(0x7fc00000);  // NaN: the loss becomes NaN, which the guard sees
      return;
    }
    if (x > st.m) {
      st.s = st.s * __expf(st.m - x) + 1.f;
      st.m = x;
    } else {
      st.s += __expf(x - st.m);
    }
    if (st.arg < 0 || x > st.best) st.best = x, st.arg = int(c);
  };
  // Four loads in flight before their (dependent) updates, in column order.
  constexpr int64_t kStep = kRowThreads;
  int64_t c = threadIdx.x;
  for (; c + 3 * kStep < classes; c += 4 * kStep) {
    const float x0 = to_f32(o[c]), x1 = to_f32(o[c + kStep]), x2 = to_f32(o[c + 2 * kStep]),
                x3 = to_f32(o[c + 3 * kStep]);
    take(x0, c);
    take(x1, c + kStep);
    take(x2, c + 2 * kStep);
    take(x3, c + 3 * kStep);
  }
  for (; c < classes; c += kStep) take(to_f32(o[c]), c);
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
  if ((threadIdx.x & 31) == 0) warps[threadIdx.x / 32] = st;
  __syncthreads();
  if (threadIdx.x == 0) {
    Online t = warps[0];
    for (int w = 1; w < int(blockDim.x / 32); ++w) t = merge(t, warps[w]);
    // The CPU takes index 0 when o[0] is NaN (nothing beats a NaN start).
    if (nan_bits(to_f32(o[0]))) t.arg = 0;
    all = t;
  }
  __syncthreads();
  const float log_z = all.m + logf(all.s);
  const float inv = 1.f / float(s->counted);
#pragma unroll 4
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    const float p = __expf(to_f32(o[c]) - log_z);
    d[c] = from_f32<T>((p - (c == y ? 1.f : 0.f)) * inv);
  }
  if (threadIdx.x == 0) {
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
                       int32_t ignore, int64_t batch, void* dout, float* loss_sum, TokenLossScratch* scratch,
                       cudaStream_t stream, StepScalars* guard, uint32_t guard_bit, float* sums) {
  count_labels<<<1, kSumThreads, 0, stream>>>(labels, rows, ignore, scratch);
  CUDA_CHECK_LAUNCH();
  if (rows > 0) {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      token_rows<T><<<unsigned(rows), kRowThreads, 0, stream>>>(static_cast<const T*>(out), labels, classes,
                                                                ignore, static_cast<T*>(dout), scratch);
    });
    CUDA_CHECK_LAUNCH();
  }
  sum_rows<<<1, kSumThreads, 0, stream>>>(labels, rows, ignore, batch, scratch, loss_sum, guard, guard_bit,
                                          sums);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
