#include "lib/layers/batchnorm.h"

namespace trainer {

KeySpecs BatchNorm::keys() {
  return {number_key("momentum", 0.1, 0.0, 1.0, "weight of the batch in the running statistics (PyTorch's)"),
          number_key("epsilon", 1e-5, 1e-12, 1.0, "added to the variance")};
}

BatchNorm::BatchNorm(const KeyValues& v)
    : momentum(float(v.number("momentum"))), epsilon(float(v.number("epsilon"))) {}

Shape BatchNorm::infer(const Shape& in) {
  if (in.rank() < 1 || in.rank() > 4)
    shape_error(
        "expects (features), (channels, length), (channels, height, width) or "
        "(channels, depth, height, width), got " +
        in.batched_str());
  return in;
}

std::vector<ParamSpec> BatchNorm::param_specs() const {
  const int64_t c = channels();
  // PyTorch's names (weight, bias) for the scale (gamma, init 1) and the shift (beta, init 0).
  return {{"weight", Shape{c}, ParamRole::gamma, c, c}, {"bias", Shape{c}, ParamRole::beta, c, c}};
}

std::vector<BufferSpec> BatchNorm::buffer_specs() const {
  const int64_t c = channels();
  return {{"running_mean", Shape{c}, 0.f}, {"running_var", Shape{c}, 1.f}};
}

void BatchNorm::describe(YAML::Node& out) const {
  out["momentum"] = momentum;
  out["epsilon"] = epsilon;
}

}  // namespace trainer
