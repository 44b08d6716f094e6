// The losses on float targets (value_loss.cuh). Each element's loss and gradient come from the
// shared formula (lib/core/value_loss_formula.h), in double as on the CPU; the sums differ from
// the CPU's only in their order. Score histograms (binary metrics) are counts added with float
// atomics: whole numbers below 2^24, so exact in any order.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/value_loss.cuh"

namespace trainer::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ bool finite_bits(float x) {
  return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u;
}

// Tree sum of v over the block's threads (kThreads) through s; thread 0 gets the total.
__device__ double block_sum(double v, double* s) {
  s[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) s[threadIdx.x] += s[threadIdx.x + half];
    __syncthreads();
  }
  const double total = s[0];
  __syncthreads();
  return total;
}

__global__ void __launch_bounds__(kThreads)
    value_loss_kernel(ValueLossArgs a, const float* out, const float* targets, float* dout, double* partials,
                      float* sums) {
  __shared__ double s[kThreads];
  const int64_t k = blockIdx.x, K = a.width;
  const double inv_n = double(a.scale) / double(a.batch * K), inv_k = double(a.scale) / double(K);
  const float pw = a.pos_weight ? a.pos_weight[k] : 1.f;
  double loss = 0, m0 = 0, m1 = 0, m2 = 0, m3 = 0;
  float* column = sums ? sums + k * (a.binary_metrics ? kBinarySums : kRegressionSums) : nullptr;
  for (int64_t i = threadIdx.x; i < a.batch; i += kThreads) {
    const int64_t at = i * K + k;
    const float o = out[at], y = targets[at];
    double g = 0;
    loss += value_loss_element(a.formula, o, y, a.delta, pw, &g);
    dout[at] = float(g * inv_n);
    if (!column) continue;
    if (a.binary_metrics) {
      const bool positive = y >= 0.5f, decided = o > 0.f;
      if (positive)
        (decided ? m0 : m2) += 1;
      else
        (decided ? m1 : m3) += 1;
      atomicAdd(column + 4 + (positive ? 0 : kAucBins) + auc_bin(o), 1.f);
    } else {
      const double e = double(o) - double(y);
      m0 += e < 0 ? -e : e;
      m1 += e * e;
      m2 += double(y);
      m3 += double(y) * double(y);
    }
  }
  loss = block_sum(loss, s);
  if (threadIdx.x == 0) partials[k] = loss * inv_k;
  if (!column) return;
  m0 = block_sum(m0, s);
  m1 = block_sum(m1, s);
  m2 = block_sum(m2, s);
  m3 = block_sum(m3, s);
  if (threadIdx.x == 0) {
    column[0] += float(m0);
    column[1] += float(m1);
    column[2] += float(m2);
    column[3] += float(m3);
  }
}

__global__ void value_loss_total_kernel(const double* partials, int64_t width, float* loss_sum,
                                        StepScalars* guard, uint32_t guard_bit) {
  double t = 0;
  for (int64_t k = 0; k < width; ++k) t += partials[k];
  *loss_sum += float(t);
  if (guard && !finite_bits(*loss_sum)) atomicOr(&guard->nonfinite, guard_bit);
}

}  // namespace

void launch_value_loss(const ValueLossArgs& a, const float* out, const float* targets, float* dout,
                       float* loss_sum, double* partials, StepScalars* guard, uint32_t guard_bit, float* sums,
                       cudaStream_t stream) {
  if (a.batch <= 0) return;
  value_loss_kernel<<<unsigned(a.width), kThreads, 0, stream>>>(a, out, targets, dout, partials, sums);
  CUDA_CHECK_LAUNCH();
  value_loss_total_kernel<<<1, 1, 0, stream>>>(partials, a.width, loss_sum, guard, guard_bit);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
