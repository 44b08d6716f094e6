// Adam (L2 weight decay), AdamW (decoupled decay) and Nadam (Keras' momentum schedule): the
// formulas shared with the CUDA kernel (lib/core/optimizer_formulas.h).
#include "kernels/cpu/cpu_ops.h"
#include "lib/core/optimizer_formulas.h"

namespace trainer::cpu {

void adam_step(const AdamHyper& h, float* w, const float* g, float* m, float* v, int64_t n,
               const StepScalars& s) {
  if (h.variant == AdamVariant::nadam) {
    const NadamCoeffs c = nadam_coeffs(h.beta1, h.beta2, h.eps, h.weight_decay, s.lr, s.bias_correction2,
                                       s.momentum_product, s.mu_t, s.mu_next);
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) nadam_update(c, w[i], g[i], m[i], v[i]);
    return;
  }
  const AdamCoeffs c = adam_coeffs(h.beta1, h.beta2, h.eps, h.weight_decay, h.variant == AdamVariant::adamw,
                                   s.lr, s.bias_correction1, s.bias_correction2);
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) adam_update(c, w[i], g[i], m[i], v[i]);
}

}  // namespace trainer::cpu
