// Adam (L2 weight decay), AdamW (decoupled decay) and Nadam, in PyTorch's / Keras' exact forms.
//   Adam:  g' = g + wd*w; m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2
//          w -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)            (torch.optim.Adam)
//   AdamW: w *= 1 - lr*wd first, then Adam without the L2 term          (torch.optim.AdamW)
//   Nadam: Keras' formula with momentum decay mu_t = b1 (1 - 0.5 * 0.96^(t*0.004)):
//          m_hat = mu_{t+1} m / (1 - prod_{i<=t+1} mu_i) + (1-mu_t) g / (1 - prod_{i<=t} mu_i)
//          w -= lr * m_hat / (sqrt(v / bc2) + eps)
//   s.bias_correction1 = 1 - b1^t, s.bias_correction2 = 1 - b2^t, s.momentum_product = prod mu_i
//   up to t, s.mu_t / s.mu_next: mu at t and t+1 (t counted from 1).
#include <cmath>

#include "kernels/cpu/cpu_ops.h"

namespace trainer::cpu {

void adam_step(const AdamHyper& h, float* w, const float* g, float* m, float* v, int64_t n,
               const StepScalars& s) {
  const float lr = s.lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
  if (h.variant == AdamVariant::nadam) {
    const float prod_next = s.momentum_product * s.mu_next;
    const float c_m = s.mu_next / (1.f - prod_next), c_g = (1.f - s.mu_t) / (1.f - s.momentum_product);
    const float bc2 = s.bias_correction2;
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {
      float gi = g[i] + wd * w[i];
      m[i] = b1 * m[i] + (1.f - b1) * gi;
      v[i] = b2 * v[i] + (1.f - b2) * gi * gi;
      float m_hat = c_m * m[i] + c_g * gi;
      w[i] -= lr * m_hat / (std::sqrt(v[i] / bc2) + eps);
    }
    return;
  }
  const bool decoupled = h.variant == AdamVariant::adamw;
  const float step_size = lr / s.bias_correction1;
  const float sqrt_bc2 = std::sqrt(s.bias_correction2);
  const float decay = decoupled ? 1.f - lr * wd : 1.f;
  const float l2 = decoupled ? 0.f : wd;
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    float wi = w[i] * decay;
    float gi = g[i] + l2 * wi;
    m[i] = b1 * m[i] + (1.f - b1) * gi;
    v[i] = b2 * v[i] + (1.f - b2) * gi * gi;
    w[i] = wi - step_size * m[i] / (std::sqrt(v[i]) / sqrt_bc2 + eps);
  }
}

}  // namespace trainer::cpu
