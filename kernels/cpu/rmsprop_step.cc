// RMSprop as torch.optim.RMSprop:
//   g' = g + wd*w; sq = a sq + (1-a) g'^2; avg = sq - ga^2 when centered (ga = a ga + (1-a) g')
//   denom = sqrt(avg) + eps; momentum: buf = mu buf + g'/denom, w -= lr buf; else w -= lr g'/denom
#include <cmath>

#include "kernels/cpu/cpu_ops.h"

namespace trainer::cpu {

void rmsprop_step(const RmspropHyper& h, float* w, const float* g, float* sq, float* buf, float* avg,
                  int64_t n, const StepScalars& s) {
  const float lr = s.lr, a = h.alpha;
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i] + h.weight_decay * w[i];
    sq[i] = a * sq[i] + (1.f - a) * gi * gi;
    float var = sq[i];
    if (h.centered) {
      avg[i] = a * avg[i] + (1.f - a) * gi;
      var -= avg[i] * avg[i];
    }
    float denom = std::sqrt(var) + h.eps;
    if (h.momentum > 0.f) {
      buf[i] = h.momentum * buf[i] + gi / denom;
      w[i] -= lr * buf[i];
    } else {
      w[i] -= lr * gi / denom;
    }
  }
}

}  // namespace trainer::cpu
