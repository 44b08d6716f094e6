// torch.optim.RMSprop (plain, centered, with momentum), with the formula the CPU uses
// (lib/core/optimizer_formulas.h: explicitly rounded operations, so the bits match the CPU's).
// lr from device memory.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/nonfinite_guard.cuh"
#include "kernels/cuda/rmsprop_step.cuh"
#include "lib/core/host_device.h"
#include "lib/core/optimizer_formulas.h"

namespace trainer::cuda {
namespace {

__global__ void rmsprop_kernel(RmspropHyper h, float* w, const float* g, float* sq, float* buf, float* avg,
                               int64_t n, StepScalars* s) {
  const bool skip = (s->nonfinite & kNonfiniteSkipsUpdate) != 0;  // non-finite loss or gradient: no update
  const RmspropCoeffs c = rmsprop_coeffs(h.alpha, h.eps, h.momentum, h.weight_decay, h.centered, s->lr);
  bool bad = false;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    if (!skip) rmsprop_update(c, w[i], g[i], sq[i], buf[i], avg[i]);
    bad |= nonfinite_bits(w[i]);
  }
  flag_nonfinite_weights(bad, s);
}

}  // namespace

void launch_rmsprop_step(const RmspropHyper& h, float* w, const float* g, float* sq, float* buf, float* avg,
                         int64_t n, StepScalars* s, cudaStream_t stream) {
  if (n <= 0) return;
  rmsprop_kernel<<<grid_for(n), kThreads, 0, stream>>>(h, w, g, sq, buf, avg, n, s);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
