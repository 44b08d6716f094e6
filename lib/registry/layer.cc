#include "lib/registry/layer.h"

#include "lib/core/error.h"

namespace trainer {

void Layer::build(const std::vector<Shape>& inputs, int index) {
  index_ = index;
  ins_ = inputs;
  // Name the bound that is crossed: "2 or more" for 65 inputs would blame the wrong limit.
  const int n = int(inputs.size());
  const std::string plural = max_inputs() == 1 ? "" : "s";
  if (min_inputs() == max_inputs() && n != min_inputs())
    shape_error("takes " + std::to_string(min_inputs()) + " input" + plural + ", got " + std::to_string(n));
  if (n < min_inputs())
    shape_error("takes " + std::to_string(min_inputs()) + " or more inputs, got " + std::to_string(n));
  if (n > max_inputs())
    shape_error("takes at most " + std::to_string(max_inputs()) + " inputs, got " + std::to_string(n) +
                "; join them in steps (a " + type() + " of " + type() + "s)");
  for (const Shape& s : inputs) check_size("input", s);  // infer() may multiply dimensions
  out_ = infer_inputs(inputs);
  for (int64_t d : out_.dims)
    if (d <= 0) shape_error("input " + inputs[0].str() + " gives an empty output " + out_.str());
  check_size("output", out_);
  for (const ParamSpec& p : param_specs()) check_size("parameter '" + p.name + "'", p.shape, false);
}

void Layer::check_size(const std::string& what, const Shape& shape, bool per_sample) const {
  if (shape.fits()) return;
  shape_error(what + " " + (per_sample ? shape.batched_str() : shape.str()) + " has " + shape.numel_str() +
              (per_sample ? " elements per sample" : " elements") + "; one tensor may hold at most " +
              with_thousands(kMaxTensorElements) + " (2^31 - 1)");
}

int64_t Layer::num_params() const {
  int64_t n = 0;
  for (const auto& p : param_specs()) n += p.shape.numel();
  return n;
}

void Layer::shape_error(const std::string& what) const {
  throw ConfigError("model.layers." + std::to_string(index_) + " (" + type_ + " '" + name_ + "'): " + what);
}

}  // namespace trainer
