// nll and sparse categorical crossentropy, mean over the batch.
//   out: (B, C)  labels: (B)  dout: (B, C) = d(mean loss)/d(out)
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_ops.h"

namespace trainer::cpu {

void classification_loss(LossKind kind, const float* out, const int32_t* labels, int64_t batch,
                         int64_t classes, float* dout, float* loss_sum) {
  const float inv_b = 1.f / float(batch);
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const float* o = out + i * classes;
    float* d = dout + i * classes;
    const int32_t y = labels[i];
    switch (kind) {
      case LossKind::nll:
        std::fill(d, d + classes, 0.f);
        d[y] = -inv_b;
        total -= o[y];
        break;
      case LossKind::cross_entropy_logits: {
        float mx = *std::max_element(o, o + classes);
        double sum = 0;
        for (int64_t c = 0; c < classes; ++c) sum += std::exp(double(o[c] - mx));
        double log_z = mx + std::log(sum);
        for (int64_t c = 0; c < classes; ++c) d[c] = float(std::exp(double(o[c]) - log_z)) * inv_b;
        d[y] -= inv_b;
        total += log_z - o[y];
        break;
      }
      case LossKind::cross_entropy_probs: {
        // Keras: clip to [eps, 1 - eps] with eps = 1e-7, then -log p[y].
        const float eps = 1e-7f;
        std::fill(d, d + classes, 0.f);
        float p = o[y];
        float pc = std::min(std::max(p, eps), 1.f - eps);
        d[y] = (p == pc) ? -inv_b / pc : 0.f;
        total -= std::log(double(pc));
        break;
      }
    }
  }
  *loss_sum += float(total);
}

}  // namespace trainer::cpu
