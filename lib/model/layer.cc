#include "lib/model/layer.h"

#include "lib/core/error.h"

namespace trainer {

void Layer::build(const std::vector<Shape>& inputs, int index) {
  index_ = index;
  ins_ = inputs;
  if (int(inputs.size()) < min_inputs() || int(inputs.size()) > max_inputs())
    shape_error("takes " +
                (min_inputs() == max_inputs() ? std::to_string(min_inputs())
                                              : std::to_string(min_inputs()) + " or more") +
                " input" + (max_inputs() == 1 ? "" : "s") + ", got " + std::to_string(inputs.size()));
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
