// nll and sparse categorical crossentropy, mean over the batch, with optional label smoothing s:
// the target q = (1 - s) one_hot(y) + s / C, the loss -sum_c q_c log p_c (PyTorch's
// label_smoothing for cross_entropy, and for nll on log-probabilities, which is the same network
// through log_softmax; Keras' for probabilities), the gradient (p - q) for logits, -q for
// log-probabilities, -q / p for probabilities. s = 0 takes the exact path of the plain losses.
//   out: (B, C)  labels: (B)  dout: (B, C) = d(mean loss)/d(out)
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ops.h"
#include "lib/core/error.h"

namespace trainer::cpu {

namespace {

// One row of logits o (classes) with label y: d = (softmax(o) - one_hot(y)) * scale, and the
// row's loss -log softmax(o)[y] returned in double. arg (not null): the argmax, the first of the
// largest (as std::max_element).
double logits_row(const float* o, int64_t classes, int32_t y, float scale, float* d, int64_t* arg = nullptr) {
  const float* top = std::max_element(o, o + classes);
  if (arg) *arg = top - o;
  const float mx = *top;
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c) sum += std::exp(double(o[c] - mx));
  const double log_z = mx + std::log(sum);
  for (int64_t c = 0; c < classes; ++c) d[c] = float(std::exp(double(o[c]) - log_z)) * scale;
  d[y] -= scale;
  return log_z - double(o[y]);
}

void smoothed_loss(ClassScores scores, const float* out, const int32_t* labels, int64_t batch,
                   int64_t classes, float* dout, float* loss_sum, float s, const float* weights) {
  const double off = double(s) / double(classes), on = 1.0 - double(s) + off;
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const float* o = out + i * classes;
    float* d = dout + i * classes;
    const int32_t y = labels[i];
    const double w = weights ? double(weights[y]) : 1.0, inv_b = w / double(batch);
    const double before = total;
    auto q = [&](int64_t c) { return c == y ? on : off; };
    switch (scores) {
      case ClassScores::log_probabilities:
        for (int64_t c = 0; c < classes; ++c) {
          d[c] = float(-q(c) * inv_b);
          total -= q(c) * double(o[c]);
        }
        break;
      case ClassScores::logits: {
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
      case ClassScores::probabilities: {
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

void classification_loss(ClassScores scores, const float* out, const int32_t* labels, int64_t batch,
                         int64_t classes, float* dout, float* loss_sum, float smoothing,
                         const float* weights) {
  if (smoothing != 0.f)
    return smoothed_loss(scores, out, labels, batch, classes, dout, loss_sum, smoothing, weights);
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const float* o = out + i * classes;
    float* d = dout + i * classes;
    const int32_t y = labels[i];
    // A class weight (Keras' class_weight): the row's loss and gradient times it; 1 without.
    const float w = weights ? weights[y] : 1.f, inv_b = (1.f / float(batch)) * w;
    switch (scores) {
      case ClassScores::log_probabilities:
        std::fill(d, d + classes, 0.f);
        d[y] = -inv_b;
        total -= double(w) * double(o[y]);
        break;
      case ClassScores::logits:
        total += double(w) * logits_row(o, classes, y, inv_b, d);
        break;
      case ClassScores::probabilities: {
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

void token_loss(const float* out, const int32_t* labels, int64_t rows, int64_t classes, int32_t ignore,
                int64_t batch, float* dout, float* loss_sum, double* row_loss, float* sums) {
  int64_t counted = 0;
  for (int64_t i = 0; i < rows; ++i) counted += labels[i] != ignore;
  const float inv = counted > 0 ? 1.f / float(counted) : 0.f;
  // row_loss[i]: the row's loss, or -1 - the loss for a wrong argmax (the loss is never negative):
  // one pass, summed in row order afterwards so the result does not depend on the threads.
#pragma omp parallel for schedule(static) if (rows * classes > 65536)
  for (int64_t i = 0; i < rows; ++i) {
    const float* o = out + i * classes;
    float* d = dout + i * classes;
    const int32_t y = labels[i];
    if (y == ignore) {
      std::fill(d, d + classes, 0.f);
      row_loss[i] = 0;
      continue;
    }
    int64_t arg = 0;
    const double loss = logits_row(o, classes, y, inv, d, &arg);
    row_loss[i] = arg == y ? loss : -1.0 - loss;  // decoded below
  }
  double total = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < rows; ++i) {
    if (labels[i] == ignore) continue;
    const double v = row_loss[i];
    if (v >= 0) {
      total += v;
      ++correct;
    } else {
      total += -1.0 - v;
    }
  }
  *loss_sum += counted > 0 ? float(total / double(counted) * double(batch)) : 0.f;
  if (sums) {
    sums[0] += float(correct);
    sums[1] += float(counted);
  }
}

}  // namespace trainer::cpu

namespace trainer {
namespace {

// The losses on class indices (nll, cross_entropy, sparse_categorical_crossentropy) as a
// LossKernel: the loss above, then the guard, the top-k counts and the confusion matrix.
class ClassificationLossCpu : public LossKernel {
 public:
  explicit ClassificationLossCpu(const LossSpec& s) : s_(s) {
    if (s.on_values())
      throw InternalError("loss '" + s.type + "': the classification kernel takes class indices");
    if (s.positions > 1) {
      if (s.scores != ClassScores::logits || s.smoothing != 0.f || !s.class_weights.empty() ||
          !s.top_k.empty())
        throw InternalError("loss '" + s.type +
                            "' over positions: logits only, no smoothing, weights or top-k");
      row_loss_.resize(size_t(s.max_batch * s.positions));
    }
  }

  void run(const LossRun& r) override {
    const auto* labels = static_cast<const int32_t*>(r.targets);
    const int64_t C = s_.width;
    if (s_.positions > 1) {
      cpu::token_loss(r.out_f32(), labels, r.batch * s_.positions, C, s_.ignore_index, r.batch, r.dout_f32(),
                      r.loss_sum, row_loss_.data(), r.sums);
      if (r.guard) cpu::check_finite(r.loss_sum, 1, r.guard_bit, *r.guard);
      return;
    }
    const float* weights = r.training && !s_.class_weights.empty() ? s_.class_weights.data() : nullptr;
    cpu::classification_loss(s_.scores, r.out_f32(), labels, r.batch, C, r.dout_f32(), r.loss_sum,
                             s_.smoothing, weights);
    if (r.guard) cpu::check_finite(r.loss_sum, 1, r.guard_bit, *r.guard);
    if (!r.sums) return;
    for (size_t k = 0; k < s_.top_k.size(); ++k)
      cpu::topk_correct(r.out_f32(), labels, r.batch, C, s_.top_k[k], r.sums + k);
    cpu::confusion_accumulate(r.out_f32(), labels, r.batch, C, r.sums + s_.top_k.size());
  }

 private:
  LossSpec s_;
  std::vector<double> row_loss_;  // a loss over positions: each row's, summed in order
};

}  // namespace

std::unique_ptr<LossKernel> make_classification_loss_cpu(const LossSpec& s) {
  return std::make_unique<ClassificationLossCpu>(s);
}

}  // namespace trainer
