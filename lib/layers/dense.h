// dense: y = x W^T + b.  x: (B, in)  W: (units, in)  b: (units)  y: (B, units)
// per_position: the same map on each row of a sequence, as PyTorch's nn.Linear and Keras' Dense
// on (B, L, D) tensors: x: (B, L..., in)  y: (B, L..., units), over the last axis. Without it a
// rank-2 input is refused: a conv1d's output is (C, L), channels first, and mapping its last axis
// (the positions) is not what a Keras user means by Dense on a Conv1D.
#pragma once

#include "lib/keys/key_spec.h"
#include "lib/registry/layer.h"

namespace trainer {

class Dense : public Layer {
 public:
  explicit Dense(const KeyValues& v);
  static KeySpecs keys();
  int64_t units = 0;
  bool use_bias = true;
  bool per_position = false;
  std::string tied;  // tie_to: an embedding whose (input_dim, output_dim) table is this weight
  std::string tie_to() const override { return tied; }
  int64_t in_features() const { return input_shape()[input_shape().rank() - 1]; }
  // Rows a sample holds: 1, or per_position the positions (every axis but the last).
  int64_t rows() const { return input_shape().numel() / in_features(); }
  double forward_flops() const override {
    return 2.0 * double(rows()) * double(in_features()) * double(units);
  }

  std::vector<ParamSpec> param_specs() const override;
  void describe(YAML::Node& out) const override;

 protected:
  Shape infer(const Shape& in) override;
};

}  // namespace trainer
