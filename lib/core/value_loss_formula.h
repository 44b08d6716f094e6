// The losses on float targets, one element at a time, written once for the CPU and CUDA kernels
// (kernels/cpu/value_loss_cpu.cc, kernels/cuda/value_loss.cu) and the tests' references.
// PyTorch's definitions, reduction 'mean' over every element of the (B, K) output:
//   mse    MSELoss            (o - y)^2
//   mae    L1Loss             |o - y|                       gradient sign(o - y), 0 at 0
//   huber  HuberLoss(delta)   0.5 e^2 for |e| <= delta, else delta (|e| - 0.5 delta)
//          SmoothL1Loss(beta) is huber(delta = beta) / beta: the kernel's `scale`
//   bce    BCEWithLogitsLoss(pos_weight) on logits x and targets y in [0, 1]:
//            -[p y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))]
//          = (1 - y) x + (1 + (p - 1) y) (log(1 + exp(-|x|)) + max(-x, 0))   (no overflow)
//          gradient sigmoid(x) (1 - y + p y) - p y
// Each function returns the element's loss in double (the batch's sum is formed in double) and
// writes d loss / d o, unscaled, to *grad; the kernel multiplies by scale / (B K).
#pragma once

#include "lib/core/host_device.h"

namespace trainer {

enum class ValueLoss : int { mse = 0, mae = 1, huber = 2, bce_logits = 3 };

TRAINER_HD double value_loss_element(ValueLoss f, float o, float y, float delta, float pos_weight,
                                     double* grad) {
  switch (f) {
    case ValueLoss::mse: {
      const double e = double(o) - double(y);
      *grad = 2.0 * e;
      return e * e;
    }
    case ValueLoss::mae: {
      const double e = double(o) - double(y);
      *grad = e > 0 ? 1.0 : (e < 0 ? -1.0 : 0.0);
      return e < 0 ? -e : e;
    }
    case ValueLoss::huber: {
      const double e = double(o) - double(y), a = e < 0 ? -e : e, d = double(delta);
      if (a <= d) {
        *grad = e;
        return 0.5 * e * e;
      }
      *grad = e > 0 ? d : -d;
      return d * (a - 0.5 * d);
    }
    case ValueLoss::bce_logits:
    default: {
      const double x = double(o), t = double(y), p = double(pos_weight);
      const double ax = x < 0 ? -x : x;
      const double softplus_neg = log1p(exp(-ax)) + (x < 0 ? -x : 0.0);  // -log sigmoid(x)
      const double sig = x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
      *grad = sig * (1.0 - t + p * t) - p * t;
      return (1.0 - t) * x + (1.0 + (p - 1.0) * t) * softplus_neg;
    }
  }
}

// The Keras AUC's thresholds: a sigmoid score s falls in bin min(int(s * kAucBins), kAucBins - 1)
// of its label's histogram (positives or negatives); ROC AUC is then the area under the curve
// through the bins' cumulative counts (lib/metrics), exact up to scores that share a bin.
constexpr int kAucBins = 200;
TRAINER_HD int auc_bin(float logit) {
  const double s =
      logit >= 0 ? 1.0 / (1.0 + exp(-double(logit))) : exp(double(logit)) / (1.0 + exp(double(logit)));
  int b = int(s * kAucBins);
  return b < 0 ? 0 : (b >= kAucBins ? kAucBins - 1 : b);
}

// The metric sums a value loss accumulates per output column k (Backend memory, summed over a
// pass; lib/metrics turns them into values):
//   regression: [sum |e|, sum e^2, sum y, sum y^2]
//   binary / multi-label (logit > 0 is a positive decision, target >= 0.5 a positive):
//     [TP, FP, FN, TN, positives' score histogram (kAucBins), negatives' (kAucBins)]
constexpr int kRegressionSums = 4;
constexpr int kBinarySums = 4 + 2 * kAucBins;

}  // namespace trainer
