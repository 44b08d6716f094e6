// nll and sparse categorical crossentropy, mean over the batch, with optional label smoothing s:
// the target q = (1 - s) one_hot(y) + s / C, the loss -sum_c q_c log p_c (PyTorch's
// label_smoothing for cross_entropy, and for nll on log-probabilities, which is the same network
// through log_softmax; Keras' for probabilities), the gradient (p - q) for logits, -q for
// log-probabilities, -q / p for probabilities. s = 0 takes the exact path of the plain losses.
//   out: (B, C)  labels: (B)  dout: (B, C) = d(mean loss)/d(out)
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_ops.h"

namespace trainer::cpu {

namespace {

void smoothed_loss(LossKind kind, const float* out, const int32_t* labels, int64_t batch, int64_t classes,
                   float* dout, float* loss_sum, float s, const float* weights) {
  const double off = double(s) / double(classes), on = 1.0 - double(s) + off;
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const float* o = out + i * classes;
    float* d = dout + i * classes;
    const int32_t y = labels[i];
    const double w = weights ? double(weights[y]) : 1.0, inv_b = w / double(batch);
    const double before = total;
    auto q = [&](int64_t c) { return c == y ? on : off; };
    switch (kind) {
      case LossKind::nll:
        for (int64_t c = 0; c < classes; ++c) {
          d[c] = float(-q(c) * inv_b);
          total -= q(c) * double(o[c]);
        }
        break;
      case LossKind::cross_entropy_logits: {
        float mx = *std::max_element(o, o + classes);
        double sum = 0;
        for (int64_t c = 0; c < classes; ++c) sum += std::exp(double(o[c] - mx));
        const double log_z = mx + std::log(sum);
        for (int64_t c = 0; c < classes; ++c) {
          d[c] = float((std::exp(double(o[c]) - log_z) - q(c)) * inv_b);
          total += q(c) * (log_z - double(o[c]));
        }
        break;
      }
      case LossKind::cross_entropy_probs: {
        const float eps = 1e-7f;
        for (int64_t c = 0; c < classes; ++c) {
          const float p = o[c], pc = std::min(std::max(p, eps), 1.f - eps);
          d[c] = (p == pc) ? float(-q(c) * inv_b / double(pc)) : 0.f;
          total -= q(c) * std::log(double(pc));
        }
        break;
      }
    }
    if (weights) total = before + w * (total - before);  // the row's loss times its weight
  }
  *loss_sum += float(total);
}

}  // namespace

void classification_loss(LossKind kind, const float* out, const int32_t* labels, int64_t batch,
                         int64_t classes, float* dout, float* loss_sum, float smoothing,
                         const float* weights) {
  if (smoothing != 0.f)
    return smoothed_loss(kind, out, labels, batch, classes, dout, loss_sum, smoothing, weights);
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const float* o = out + i * classes;
    float* d = dout + i * classes;
    const int32_t y = labels[i];
    // A class weight (Keras' class_weight): the row's loss and gradient times it; 1 without.
    const float w = weights ? weights[y] : 1.f, inv_b = (1.f / float(batch)) * w;
    switch (kind) {
      case LossKind::nll:
        std::fill(d, d + classes, 0.f);
        d[y] = -inv_b;
        total -= double(w) * double(o[y]);
        break;
      case LossKind::cross_entropy_logits: {
        float mx = *std::max_element(o, o + classes);
        double sum = 0;
        for (int64_t c = 0; c < classes; ++c) sum += std::exp(double(o[c] - mx));
        double log_z = mx + std::log(sum);
        for (int64_t c = 0; c < classes; ++c) d[c] = float(std::exp(double(o[c]) - log_z)) * inv_b;
        d[y] -= inv_b;
        total += double(w) * (log_z - o[y]);
        break;
      }
      case LossKind::cross_entropy_probs: {
        // Keras: clip to [eps, 1 - eps] with eps = 1e-7, then -log p[y].
        const float eps = 1e-7f;
        std::fill(d, d + classes, 0.f);
        float p = o[y];
        float pc = std::min(std::max(p, eps), 1.f - eps);
        d[y] = (p == pc) ? -inv_b / pc : 0.f;
        total -= double(w) * std::log(double(pc));
        break;
      }
    }
  }
  *loss_sum += float(total);
}

}  // namespace trainer::cpu
