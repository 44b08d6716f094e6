// torch.optim.RMSprop:
//   g' = g + wd*w; sq = a sq + (1-a) g'^2; var = sq - ga^2 when centered (ga = a ga + (1-a) g')
//   denom = sqrt(var) + eps; momentum: buf = mu buf + g'/denom, w -= lr buf; else w -= lr g'/denom
// lr from device memory; explicitly rounded intrinsics match the CPU's float arithmetic exactly.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/rmsprop_step.cuh"

namespace trainer::cuda {
namespace {

__global__ void rmsprop_kernel(RmspropHyper h, float* w, const float* g, float* sq, float* buf, float* avg,
                               int64_t n, const StepScalars* s) {
  if (s->nonfinite & kNonfiniteSkipsUpdate) return;  // non-finite loss or gradient: no update
  const float lr = s->lr, a = h.alpha, one_a = 1.f - h.alpha;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float wi = w[i];
    const float gi = __fadd_rn(g[i], __fmul_rn(h.weight_decay, wi));
    const float sqi = __fadd_rn(__fmul_rn(a, sq[i]), __fmul_rn(__fmul_rn(one_a, gi), gi));
    sq[i] = sqi;
    float var = sqi;
    if (h.centered) {
      const float ai = __fadd_rn(__fmul_rn(a, avg[i]), __fmul_rn(one_a, gi));
      avg[i] = ai;
      var = __fsub_rn(var, __fmul_rn(ai, ai));
    }
    const float denom = __fadd_rn(__fsqrt_rn(var), h.eps);
    if (h.momentum > 0.f) {
      const float b = __fadd_rn(__fmul_rn(h.momentum, buf[i]), __fdiv_rn(gi, denom));
      buf[i] = b;
      w[i] = __fsub_rn(wi, __fmul_rn(lr, b));
    } else {
      w[i] = __fsub_rn(wi, __fdiv_rn(__fmul_rn(lr, gi), denom));
    }
  }
}

}  // namespace

void launch_rmsprop_step(const RmspropHyper& h, float* w, const float* g, float* sq, float* buf, float* avg,
                         int64_t n, const StepScalars* s, cudaStream_t stream) {
  if (n <= 0) return;
  rmsprop_kernel<<<grid_for(n), kThreads, 0, stream>>>(h, w, g, sq, buf, avg, n, s);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
