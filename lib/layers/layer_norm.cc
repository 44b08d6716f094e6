#include "lib/layers/layer_norm.h"

namespace trainer {

namespace {
constexpr double kFloat32Epsilon = 1.1920928955078125e-7;  // 2^-23, torch.finfo(torch.float32).eps
}

KeySpecs LayerNorm::keys(bool rms) {
  KeySpecs k = {number_key("epsilon", rms ? kFloat32Epsilon : 1e-5, 1e-12, 1.0,
                           rms ? "added to the mean square (PyTorch's default: float32's machine epsilon)"
                               : "added to the variance")};
  if (!rms) k.push_back(bool_key("bias", true, "learn a shift added after the scale"));
  return k;
}

LayerNorm::LayerNorm(const KeyValues& v, bool r)
    : rms(r), epsilon(float(v.number("epsilon"))), bias(!r && v.boolean("bias")) {}

Shape LayerNorm::infer(const Shape& in) {
  if (in.rank() < 1) shape_error("expects (features) or (..., features), got " + in.batched_str());
  return in;
}

std::vector<ParamSpec> LayerNorm::param_specs() const {
  const int64_t d = features();
  std::vector<ParamSpec> p = {{"weight", Shape{d}, ParamRole::gamma, d, d}};
  if (bias) p.push_back({"bias", Shape{d}, ParamRole::beta, d, d});
  return p;
}

void LayerNorm::describe(YAML::Node& out) const {
  out["epsilon"] = epsilon;
  if (!rms) out["bias"] = bias;
}

}  // namespace trainer
