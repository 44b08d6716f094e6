// SGD with momentum, dampening, Nesterov and L2 weight decay: torch.optim.SGD's update, the
// formula shared with the CUDA kernel (lib/core/optimizer_formulas.h).
#include "kernels/cpu/cpu_ops.h"
#include "lib/core/optimizer_formulas.h"

namespace trainer::cpu {

void sgd_step(const SgdHyper& h, float* w, const float* g, float* velocity, int64_t n, const StepScalars& s) {
  const SgdCoeffs c = sgd_coeffs(h.momentum, h.dampening, h.weight_decay, h.nesterov, s.lr, s.step);
  if (h.momentum == 0.f) {  // no velocity (it may be null): sgd_update does not touch it
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {
      float unused = 0.f;
      sgd_update(c, w[i], g[i], unused);
    }
    return;
  }
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) sgd_update(c, w[i], g[i], velocity[i]);
}

}  // namespace trainer::cpu
