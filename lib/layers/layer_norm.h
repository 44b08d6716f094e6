// layer_norm / rms_norm: normalization of each position's features, over the last axis of a
// sample, as PyTorch's nn.LayerNorm(D) and nn.RMSNorm(D) on (..., D) tensors.
//   x, y: (B, ..., D): every run of D values along the last axis is one row, normalized alone
//   layer_norm: y = (x - mean) / sqrt(var + epsilon) * weight + bias   (biased variance over D)
//   rms_norm:   y = x / sqrt(mean(x^2) + epsilon) * weight
//   weight: (D), init 1; bias: (D), init 0 (layer_norm with bias: true, PyTorch's default)
// Training and inference compute the same thing: no running statistics, no batch dependence.
// Defaults are PyTorch's: epsilon 1e-5 for layer_norm, and for rms_norm the float32 machine
// epsilon (2^-23 = 1.19e-7), which nn.RMSNorm takes when eps is None. Keras' LayerNormalization
// uses epsilon: 0.001.
#pragma once

#include "lib/keys/key_spec.h"
#include "lib/registry/layer.h"

namespace trainer {

class LayerNorm : public Layer {
 public:
  LayerNorm(const KeyValues& v, bool rms);
  static KeySpecs keys(bool rms);
  bool rms = false;
  float epsilon = 1e-5f;
  bool bias = true;  // layer_norm only; rms_norm has none
  // The normalized axis' length, and how many rows a sample holds.
  int64_t features() const { return input_shape()[input_shape().rank() - 1]; }
  int64_t rows_per_sample() const { return input_shape().numel() / features(); }

  std::vector<ParamSpec> param_specs() const override;
  void describe(YAML::Node& out) const override;

 protected:
  Shape infer(const Shape& in) override;
};

}  // namespace trainer
