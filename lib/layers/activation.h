// Element-wise and row-wise activations; the output has the input's shape.
//   relu, sigmoid, tanh, gelu (erf form, PyTorch's default; approximate: tanh is GPT-2's
//   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as nn.GELU(approximate='tanh')), leaky_relu
//   (alpha, default 0.01 as in PyTorch); softmax and log_softmax over the features of a flat (B, F) input.
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
  float alpha = 0.f;         // leaky_relu slope
  bool tanh_approx = false;  // gelu: the tanh approximation

  void describe(YAML::Node& out) const override;

 protected:
  Shape infer(const Shape& in) override;
};

}  // namespace trainer
