// torch.optim.SGD: momentum, dampening, Nesterov, L2 weight decay, with the formula the CPU uses
// (lib/core/optimizer_formulas.h: explicitly rounded operations, so the bits match the CPU's).
// lr and step are read from device memory (graph-capturable).
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/nonfinite_guard.cuh"
#include "kernels/cuda/sgd_step.cuh"
#include "lib/core/host_device.h"
#include "lib/core/optimizer_formulas.h"

namespace trainer::cuda {
namespace {

__global__ void sgd_kernel(SgdHyper h, float* w, const float* g, float* velocity, int64_t n, StepScalars* s) {
  const bool skip = (s->nonfinite & kNonfiniteSkipsUpdate) != 0;  // non-finite loss or gradient: no update
  const SgdCoeffs c = sgd_coeffs(h.momentum, h.dampening, h.weight_decay, h.nesterov, s->lr, s->step);
  bool bad = false;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    if (!skip) {
      float unused = 0.f;  // no velocity without momentum (it may be null): sgd_update leaves it
      sgd_update(c, w[i], g[i], h.momentum == 0.f ? unused : velocity[i]);
    }
    bad |= nonfinite_bits(w[i]);
  }
  flag_nonfinite_weights(bad, s);
}

}  // namespace

void launch_sgd_step(const SgdHyper& h, float* w, const float* g, float* velocity, int64_t n, StepScalars* s,
                     cudaStream_t stream) {
  if (n <= 0) return;
  sgd_kernel<<<grid_for(n), kThreads, 0, stream>>>(h, w, g, velocity, n, s);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
