// dense: y = x W^T + b.  x: (B, in)  W: (units, in)  b: (units)  y: (B, units)
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
  int64_t in_features() const { return input_shape()[0]; }
  double forward_flops() const override { return 2.0 * double(in_features()) * double(units); }

  std::vector<ParamSpec> param_specs() const override;
  void describe(YAML::Node& out) const override;

 protected:
  Shape infer(const Shape& in) override;
};

}  // namespace trainer
