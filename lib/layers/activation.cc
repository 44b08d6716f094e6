#include "lib/layers/activation.h"

namespace trainer {

KeySpecs Activation::keys(ActivationKind kind) {
  if (kind == ActivationKind::leaky_relu) return {number_key("alpha", 0.01, 0.0, 1e6, "slope for x < 0")};
  if (kind == ActivationKind::gelu)
    return {choice_key("approximate", "none", {"none", "tanh"},
                       "none: the exact erf form; tanh: GPT-2's approximation (PyTorch's approximate)")};
  return {};
}

Activation::Activation(const KeyValues& v, ActivationKind k) : kind(k) {
  if (kind == ActivationKind::leaky_relu) alpha = float(v.number("alpha"));
  if (kind == ActivationKind::gelu) tanh_approx = v.string("approximate") == "tanh";
}

Shape Activation::infer(const Shape& in) {
  if ((kind == ActivationKind::softmax || kind == ActivationKind::log_softmax) && in.rank() != 1)
    shape_error("expects a flat input (classes), got " + in.batched_str() +
                "; add a flatten layer before it");
  return in;
}

void Activation::describe(YAML::Node& out) const {
  if (kind == ActivationKind::leaky_relu) out["alpha"] = alpha;
  if (kind == ActivationKind::gelu) out["approximate"] = tanh_approx ? "tanh" : "none";
}

}  // namespace trainer
