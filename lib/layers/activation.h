// Element-wise and row-wise activations; the output has the input's shape.
//   relu, sigmoid, tanh, gelu (erf form, PyTorch's default), leaky_relu (alpha, default 0.01 as
//   in PyTorch); softmax and log_softmax over the features of a flat (B, F) input.
#pragma once

#include "lib/keys/key_spec.h"
#include "lib/registry/layer.h"

namespace trainer {

enum class ActivationKind { relu, sigmoid, tanh, gelu, leaky_relu, softmax, log_softmax };

class Activation : public Layer {
 public:
  Activation(const KeyValues& v, ActivationKind kind);
  static KeySpecs keys(ActivationKind kind);
  ActivationKind kind;
  float alpha = 0.f;  // leaky_relu slope

  void describe(YAML::Node& out) const override;

 protected:
  Shape infer(const Shape& in) override;
};

}  // namespace trainer
