// SGD with momentum, dampening, Nesterov and L2 weight decay: torch.optim.SGD's update.
//   g' = g + wd*w;  b = g' on the first step, else mu*b + (1-dampening)*g'
//   d = nesterov ? g' + mu*b : b;  w -= lr*d
#include "kernels/cpu/cpu_ops.h"

namespace trainer::cpu {

void sgd_step(const SgdHyper& h, float* w, const float* g, float* velocity, int64_t n, const StepScalars& s) {
  const float lr = s.lr, mu = h.momentum, wd = h.weight_decay, damp = 1.f - h.dampening;
  const bool first = s.step == 0;
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i] + wd * w[i];
    if (mu != 0.f) {
      float b = first ? gi : mu * velocity[i] + damp * gi;
      velocity[i] = b;
      gi = h.nesterov ? gi + mu * b : b;
    }
    w[i] -= lr * gi;
  }
}

}  // namespace trainer::cpu
