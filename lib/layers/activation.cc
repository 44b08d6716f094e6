#include "lib/layers/activation.h"

namespace trainer {

KeySpecs Activation::keys(ActivationKind kind) {
  if (kind == ActivationKind::leaky_relu) return {number_key("alpha", 0.01, 0.0, 1e6, "slope for x < 0")};
  return {};
}

Activation::Activation(const KeyValues& v, ActivationKind k) : kind(k) {
  if (kind == ActivationKind::leaky_relu) alpha = float(v.number("alpha"));
}

Shape Activation::infer(const Shape& in) {
  if ((kind == ActivationKind::softmax || kind == ActivationKind::log_softmax) && in.rank() != 1)
    shape_error("expects a flat input (classes), got " + in.batched_str() +
                "; add a flatten layer before it");
  return in;
}

void Activation::describe(YAML::Node& out) const {
  if (kind == ActivationKind::leaky_relu) out["alpha"] = alpha;
}

}  // namespace trainer
