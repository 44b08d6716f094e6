// Classification losses, mean over the batch, in the CPU reference's arithmetic (double
// log-sum-exp, float gradients).
// Layout: blocks of 8 warps, one row a warp (rows w, w + all warps, ... past 2,048 rows); lanes
// split the classes. One block of 32 warps walking the rows took 12-26 us for 200-512 rows of 10
// classes (ncu, H100: eight rows one after another a warp, each a chain of shuffles and double
// exp/log); every row at once is about one row's latency. The per-row losses are summed in
// double: in a warp, then over the block's warps in order into partials[block]; the block that
// finishes last (a ticket counter) adds the partials in block order, so the result is
// deterministic without float atomics, and resets the counter for the next launch. The same pass
// may also check the loss sum for the non-finite guard and add each row's (label, argmax) to the
// confusion matrix (ClassificationLossCuda): a small network's step then runs one kernel here
// instead of three.
//   out, dout: (B, C)  labels: (B)  confusion: (C, C)  scratch: LossScratch (kLossMaxBlocks partials)
#include <algorithm>

#include "kernels/cuda/classification_loss.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/nonfinite_guard.cuh"
#include "lib/core/host_device.h"

namespace trainer::cuda {
namespace {

constexpr int kWarps = 8;  // a block's warps

// A row's argmax as kernels/cpu/confusion_accumulate.cc takes it (best = 0, then each c with o[c] > o[best]):
// the first index of the largest value, a NaN never chosen, and 0 when o[0] is NaN. Each lane
// offers its candidate (not ok: none, or a NaN); the warp keeps the larger value, on a tie the
// lower index (a total order: every lane ends with the same answer).
// NaN by its bits (no compiler flag can fold the test away, as the non-finite guard's).
__device__ __forceinline__ bool nan_bits(float x) { return (__float_as_uint(x) & 0x7fffffffu) > 0x7f800000u; }

struct ArgMax {
  float v = 0.f;
  int i = 0;
  bool ok = false;
};
__device__ __forceinline__ ArgMax better(ArgMax a, ArgMax b) {
  if (!b.ok) return a;
  if (!a.ok) return b;
  return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
}
__device__ __forceinline__ int warp_argmax(ArgMax a, bool first_is_nan) {
  for (int off = 16; off > 0; off /= 2) {
    ArgMax b;
    b.v = __shfl_xor_sync(0xffffffffu, a.v, off);
    b.i = __shfl_xor_sync(0xffffffffu, a.i, off);
    b.ok = __shfl_xor_sync(0xffffffffu, int(a.ok), off) != 0;
    a = better(a, b);
  }
  return first_is_nan || !a.ok ? 0 : a.i;
}

// Label smoothing s (kernels/cpu/classification_loss.cc is the reference): target q = (1 - s)
// one_hot + s / C; one row per warp, the row's loss summed over the lanes in double.
__device__ double smoothed_row(ClassScores kind, const float* o, float* d, int32_t y, int64_t classes,
                               double inv_b, float s, int lane) {
  const double off = double(s) / double(classes), on = 1.0 - double(s) + off;
  double row = 0;
  switch (kind) {
    case ClassScores::log_probabilities:
      for (int64_t c = lane; c < classes; c += 32) {
        const double q = c == y ? on : off;
        d[c] = float(-q * inv_b);
        row -= q * double(o[c]);
      }
      break;
    case ClassScores::logits: {
      float mx = -INFINITY;
      for (int64_t c = lane; c < classes; c += 32) mx = fmaxf(mx, o[c]);
      mx = warp_max(mx);
      double sum = 0;
      for (int64_t c = lane; c < classes; c += 32) sum += exp(double(__fsub_rn(o[c], mx)));
      sum = warp_sum(sum);
      const double log_z = double(mx) + log(sum);
      for (int64_t c = lane; c < classes; c += 32) {
        const double q = c == y ? on : off;
        d[c] = float((exp(double(o[c]) - log_z) - q) * inv_b);
        row += q * (log_z - double(o[c]));
      }
      break;
    }
    case ClassScores::probabilities: {
      const float eps = 1e-7f;
      for (int64_t c = lane; c < classes; c += 32) {
        const double q = c == y ? on : off;
        const float p = o[c], pc = fminf(fmaxf(p, eps), 1.f - eps);
        d[c] = (p == pc) ? float(-q * inv_b / double(pc)) : 0.f;
        row -= q * log(double(pc));
      }
      break;
    }
  }
  return warp_sum(row);
}

__global__ void __launch_bounds__(kWarps * 32)
    classification_loss_kernel(ClassScores kind, const float* out, const int32_t* labels, int64_t batch,
                               int64_t classes, float* dout, float* loss_sum, float smoothing,
                               StepScalars* guard, uint32_t guard_bit, float* confusion, LossScratch* scratch,
                               const float* weights) {
  __shared__ double warp_totals[kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t first = int64_t(blockIdx.x) * kWarps + warp, stride = int64_t(gridDim.x) * kWarps;
  const float inv_b = 1.f / float(batch);
  double total = 0;  // meaningful in lane 0
  if (classes <= 32 && smoothing == 0.f && !weights) {
    // A row fits a warp, a class a lane: each value is loaded once, and a warp with more than
    // one row loads the next row's values before this row's reductions. The arithmetic is the
    // loop's below, term for term: the same bits.
    const bool has = lane < classes;
    float next = 0.f;
    int32_t next_y = 0;
    if (first < batch) {
      next = has ? out[first * classes + lane] : 0.f;
      next_y = labels[first];
    }
    for (int64_t i = first; i < batch; i += stride) {
      const float v = next;
      const int32_t y = next_y;
      if (i + stride < batch) {
        next = has ? out[(i + stride) * classes + lane] : 0.f;
        next_y = labels[i + stride];
      }
      float* d = dout + i * classes;
      const float oy = __shfl_sync(0xffffffffu, v, y >= 0 && y < 32 ? y : 0);
      // The row's largest value, NaNs aside (fmaxf drops them); the loss from logits needs it anyway.
      const float mx =
          kind == ClassScores::logits || confusion ? warp_max(has ? fmaxf(-INFINITY, v) : -INFINITY) : 0.f;
      if (confusion) {  // the argmax: the first lane holding mx; 0 when o[0] is NaN or none does
        const unsigned at_max = __ballot_sync(0xffffffffu, has && v == mx);
        const bool first_nan = (__ballot_sync(0xffffffffu, has && nan_bits(v)) & 1u) != 0;
        const int best = first_nan || at_max == 0 ? 0 : __ffs(int(at_max)) - 1;
        if (lane == 0) atomicAdd(confusion + int64_t(y) * classes + best, 1.f);
      }
      switch (kind) {
        case ClassScores::log_probabilities:
          if (has) d[lane] = lane == y ? -inv_b : 0.f;
          if (lane == 0) total -= oy;
          break;
        case ClassScores::logits: {  // mx: as the loop's, NaN -> -inf
          const double sum = warp_sum(has ? exp(double(__fsub_rn(v, mx))) : 0.0);
          const double log_z = double(mx) + log(sum);
          if (has) {
            const float p = __fmul_rn(float(exp(double(v) - log_z)), inv_b);
            d[lane] = lane == y ? __fsub_rn(p, inv_b) : p;
          }
          if (lane == 0) total += log_z - oy;
          break;
        }
        case ClassScores::probabilities: {
          const float eps = 1e-7f;
          const float pc = fminf(fmaxf(oy, eps), 1.f - eps);
          if (has) d[lane] = lane == y ? ((oy == pc) ? -inv_b / pc : 0.f) : 0.f;
          if (lane == 0) total -= log(double(pc));
          break;
        }
      }
    }
  } else
    for (int64_t i = first; i < batch; i += stride) {
      const float* o = out + i * classes;
      float* d = dout + i * classes;
      const int32_t y = labels[i];
      // A class weight (Keras' class_weight: the sample's loss and gradient times it); 1 without.
      const float w = weights ? weights[y] : 1.f;
      const float inv_bw = __fmul_rn(inv_b, w);
      if (confusion) {
        ArgMax a;  // this lane's classes in order, as the sequential rule
        for (int64_t c = lane; c < classes; c += 32) {
          const float x = o[c];
          if (!nan_bits(x) && (!a.ok || x > a.v)) {
            a.v = x;
            a.i = int(c);
            a.ok = true;
          }
        }
        const int best = warp_argmax(a, nan_bits(o[0]));
        if (lane == 0) atomicAdd(confusion + int64_t(y) * classes + best, 1.f);
      }
      if (smoothing != 0.f) {
        const double row = smoothed_row(kind, o, d, y, classes, double(w) / double(batch), smoothing, lane);
        if (lane == 0) total += double(w) * row;
        continue;
      }
      switch (kind) {
        case ClassScores::log_probabilities:
          for (int64_t c = lane; c < classes; c += 32) d[c] = c == y ? -inv_bw : 0.f;
          if (lane == 0) total -= double(w) * double(o[y]);
          break;
        case ClassScores::logits: {
          float mx = -INFINITY;
          for (int64_t c = lane; c < classes; c += 32) mx = fmaxf(mx, o[c]);
          mx = warp_max(mx);
          double sum = 0;
          for (int64_t c = lane; c < classes; c += 32) sum += exp(double(__fsub_rn(o[c], mx)));
          sum = warp_sum(sum);
          const double log_z = double(mx) + log(sum);
          for (int64_t c = lane; c < classes; c += 32) {
            float v = __fmul_rn(float(exp(double(o[c]) - log_z)), inv_bw);
            d[c] = c == y ? __fsub_rn(v, inv_bw) : v;
          }
          if (lane == 0) total += double(w) * (log_z - o[y]);
          break;
        }
        case ClassScores::probabilities: {
          // Keras: clip to [eps, 1 - eps] with eps = 1e-7, then -log p[y].
          const float eps = 1e-7f;
          const float p = o[y];
          const float pc = fminf(fmaxf(p, eps), 1.f - eps);
          for (int64_t c = lane; c < classes; c += 32) d[c] = c == y ? ((p == pc) ? -inv_bw / pc : 0.f) : 0.f;
          if (lane == 0) total -= double(w) * log(double(pc));
          break;
        }
      }
    }
  if (lane == 0) warp_totals[warp] = total;
  __syncthreads();
  if (threadIdx.x != 0) return;
  double t = 0;
  for (int w = 0; w < kWarps; ++w) t += warp_totals[w];
  if (gridDim.x > 1) {
    // Publish this block's sum, then take a ticket: the last block sees every partial.
    scratch->partials[blockIdx.x] = t;
    __threadfence();
    if (atomicAdd(&scratch->arrived, 1u) != gridDim.x - 1) return;
    __threadfence();
    t = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) t += static_cast<volatile double*>(scratch->partials)[b];
    scratch->arrived = 0;  // ready for the next launch (stream order)
  }
  *loss_sum += float(t);
  if (guard && nonfinite_bits(*loss_sum)) atomicOr(&guard->nonfinite, guard_bit);
}

}  // namespace

void launch_classification_loss(ClassScores kind, const float* out, const int32_t* labels, int64_t batch,
                                int64_t classes, float* dout, float* loss_sum, float smoothing,
                                LossScratch* scratch, cudaStream_t stream, StepScalars* guard,
                                uint32_t guard_bit, float* confusion, const float* weights) {
  if (batch <= 0) {  // nothing to add; the guard still checks the sum, as check_finite would
    if (guard) launch_check_finite(loss_sum, 1, guard_bit, guard, stream);
    return;
  }
  // One row a warp, up to kLossMaxBlocks blocks (2,048 rows).
  const int blocks = int(std::min<int64_t>((batch + kWarps - 1) / kWarps, kLossMaxBlocks));
  classification_loss_kernel<<<blocks, kWarps * 32, 0, stream>>>(kind, out, labels, batch, classes, dout,
                                                                 loss_sum, smoothing, guard, guard_bit,
                                                                 confusion, scratch, weights);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
