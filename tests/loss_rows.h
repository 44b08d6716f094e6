// The loss conformance table: a row for every registered loss (lib/losses/losses.cc), each a loss
// section and a float64 reference of the published formula, written here from the definitions
// and not from the kernels:
//   nll                              PyTorch's NLLLoss on log-probabilities
//   cross_entropy                    PyTorch's CrossEntropyLoss on logits (label_smoothing as PyTorch's)
//   sparse_categorical_crossentropy  Keras' on probabilities clipped to [1e-7, 1 - 1e-7], or logits
//   class_weights                    Keras' class_weight: each sample's loss times its label's
//                                    weight, the mean over the batch (training runs only)
//   mse, mae / l1, huber, smooth_l1  PyTorch's MSELoss, L1Loss, HuberLoss, SmoothL1Loss (mean)
//   binary_cross_entropy             PyTorch's BCEWithLogitsLoss with pos_weight (mean)
// tests/test_loss_rows.cc runs every row on the CPU against its reference and finite differences
// (and fails for a registered loss without a row); trainer_gpu_tests runs every row on the GPU
// against the CPU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lib/core/rng.h"

namespace trainer::test {

struct LossRow {
  enum Ref { log_probabilities, logits, probabilities, mse, mae, huber, bce };
  LossRow(std::string n, std::string y, Ref r, double s = 0, std::vector<double> cw = {}, double d = 1,
          double sc = 1, std::vector<double> pw = {})
      : name(std::move(n)),
        yaml(std::move(y)),
        ref(r),
        smoothing(s),
        class_weights(std::move(cw)),
        delta(d),
        scale(sc),
        pos_weight(std::move(pw)) {}
  std::string name;  // the registry's name
  std::string yaml;  // the loss section
  Ref ref;
  double smoothing = 0;               // label smoothing s
  std::vector<double> class_weights;  // empty: none
  double delta = 1, scale = 1;        // huber: delta; smooth_l1: delta = beta, scale = 1 / beta
  std::vector<double> pos_weight;     // bce: one value or one per output
  bool on_values() const { return ref >= mse; }
};

inline const std::vector<LossRow>& loss_rows() {
  static const std::vector<LossRow> rows{
      {"nll", "nll", LossRow::log_probabilities},
      {"nll",
       "{type: nll, label_smoothing: 0.1, class_weights: [0.5, 2, 1, 3, 0.25, 1.5, 4]}",
       LossRow::log_probabilities,
       0.1,
       {0.5, 2, 1, 3, 0.25, 1.5, 4}},
      {"cross_entropy", "cross_entropy", LossRow::logits},
      {"cross_entropy", "{type: cross_entropy, label_smoothing: 0.2}", LossRow::logits, 0.2},
      {"cross_entropy",
       "{type: cross_entropy, class_weights: [1, 2, 3, 4, 5, 6, 7]}",
       LossRow::logits,
       0,
       {1, 2, 3, 4, 5, 6, 7}},
      {"sparse_categorical_crossentropy", "sparse_categorical_crossentropy", LossRow::probabilities},
      {"sparse_categorical_crossentropy",
       "{type: sparse_categorical_crossentropy, label_smoothing: 0.1, class_weights: [2, 1, 1, 1, 1, 1, "
       "0.5]}",
       LossRow::probabilities,
       0.1,
       {2, 1, 1, 1, 1, 1, 0.5}},
      {"sparse_categorical_crossentropy", "{type: sparse_categorical_crossentropy, from_logits: true}",
       LossRow::logits},
      {"mse", "mse", LossRow::mse},
      {"mae", "mae", LossRow::mae},
      {"l1", "l1", LossRow::mae},
      {"huber", "{type: huber, delta: 0.7}", LossRow::huber, 0, {}, 0.7},
      {"smooth_l1", "{type: smooth_l1, beta: 0.5}", LossRow::huber, 0, {}, 0.5, 2.0},
      {"binary_cross_entropy", "binary_cross_entropy", LossRow::bce},
      {"binary_cross_entropy",
       "{type: binary_cross_entropy, pos_weight: [2, 0.5, 1, 1, 3, 1, 1]}",
       LossRow::bce,
       0,
       {},
       1,
       1,
       {2, 0.5, 1, 1, 3, 1, 1}},
      {"binary_cross_entropy",
       "{type: binary_cross_entropy, pos_weight: [3]}",
       LossRow::bce,
       0,
       {},
       1,
       1,
       {3}},
  };
  return rows;
}

// A batch for a row: outputs where the row's loss is smooth, and targets (labels as floats for
// the class rows; 0/1 for bce).
struct LossBatch {
  std::vector<float> out, values;
  std::vector<int32_t> labels;
};

inline LossBatch loss_batch(const LossRow& row, int64_t B, int64_t K, uint64_t seed) {
  SplitMix64 rng = SplitMix64::counter(seed);
  auto uniform = [&](double lo, double hi) { return float(lo + (hi - lo) * rng.uniform()); };
  LossBatch b;
  b.out.resize(size_t(B * K));
  for (float& v : b.out) {
    switch (row.ref) {
      case LossRow::log_probabilities:
        v = -uniform(0.1, 4.0);
        break;
      case LossRow::probabilities:
        v = uniform(0.05, 0.95);
        break;
      default:
        v = uniform(-3.0, 3.0);
    }
  }
  if (!row.on_values()) {
    for (int64_t i = 0; i < B; ++i) b.labels.push_back(int32_t((i * 5 + 3 + int64_t(seed)) % K));
    return b;
  }
  b.values.resize(size_t(B * K));
  for (float& v : b.values)
    v = row.ref == LossRow::bce ? (rng.uniform() < 0.4 ? 1.f : 0.f) : uniform(-2.0, 2.0);
  return b;
}

// The row's mean loss over the batch (PyTorch's reduction 'mean'), in long double.
inline long double reference_loss(const LossRow& row, const std::vector<float>& out, const LossBatch& b,
                                  int64_t B, int64_t K, bool training) {
  long double total = 0;
  if (!row.on_values()) {
    for (int64_t i = 0; i < B; ++i) {
      const float* o = out.data() + i * K;
      const int32_t y = b.labels[size_t(i)];
      std::vector<long double> logp(static_cast<size_t>(K));
      long double mx = o[0], z = 0;
      for (int64_t c = 0; c < K; ++c) mx = std::max(mx, (long double)o[c]);
      for (int64_t c = 0; c < K; ++c) z += std::exp((long double)o[c] - mx);
      for (int64_t c = 0; c < K; ++c) {
        if (row.ref == LossRow::logits) logp[size_t(c)] = o[c] - mx - std::log(z);
        if (row.ref == LossRow::log_probabilities) logp[size_t(c)] = o[c];
        if (row.ref == LossRow::probabilities)
          logp[size_t(c)] = std::log(std::min(std::max((long double)o[c], 1e-7L), 1 - 1e-7L));
      }
      long double loss = 0;
      for (int64_t c = 0; c < K; ++c) {
        const long double q = (c == y ? 1 - row.smoothing : 0) + row.smoothing / double(K);
        loss -= q * logp[size_t(c)];
      }
      const long double w = training && !row.class_weights.empty() ? row.class_weights[size_t(y)] : 1;
      total += w * loss;
    }
    return total / B;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const long double o = out[i], y = b.values[i], e = o - y, a = std::fabs(e), d = row.delta;
    switch (row.ref) {
      case LossRow::mse:
        total += e * e;
        break;
      case LossRow::mae:
        total += a;
        break;
      case LossRow::huber:
        total += row.scale * (a <= d ? 0.5L * e * e : d * (a - 0.5L * d));
        break;
      default: {
        const long double p =
            row.pos_weight.empty() ? 1 : row.pos_weight[row.pos_weight.size() == 1 ? 0 : i % size_t(K)];
        // log sigmoid(o) and log(1 - sigmoid(o)), stable
        const long double log_s = -std::log1p(std::exp(-std::fabs(o))) + std::min(o, 0.0L);
        const long double log_1ms = log_s - o;
        total += -(p * y * log_s + (1 - y) * log_1ms);
      }
    }
  }
  return total / (long double)out.size();
}

}  // namespace trainer::test
