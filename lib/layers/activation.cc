#include "lib/layers/activation.h"

#include "lib/config/node_reader.h"

namespace trainer {

Activation::Activation(NodeReader& r, ActivationKind k) : kind(k) {
  if (kind == ActivationKind::leaky_relu) alpha = float(r.number("alpha", 0.01, 0.0, 1e6));
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

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names{"relu",       "sigmoid", "tanh",       "gelu",
                                              "leaky_relu", "softmax", "log_softmax"};
  return names;
}

}  // namespace trainer
