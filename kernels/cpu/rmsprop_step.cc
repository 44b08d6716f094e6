// RMSprop as torch.optim.RMSprop (plain, centered, with momentum): the formula shared with the
// CUDA kernel (lib/core/optimizer_formulas.h).
#include "kernels/cpu/cpu_ops.h"
#include "lib/core/optimizer_formulas.h"

namespace trainer::cpu {

void rmsprop_step(const RmspropHyper& h, float* w, const float* g, float* sq, float* buf, float* avg,
                  int64_t n, const StepScalars& s) {
  const RmspropCoeffs c = rmsprop_coeffs(h.alpha, h.eps, h.momentum, h.weight_decay, h.centered, s.lr);
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) rmsprop_update(c, w[i], g[i], sq[i], buf[i], avg[i]);
}

}  // namespace trainer::cpu
