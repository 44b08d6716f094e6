#include "lib/model/layer.h"

#include "lib/core/error.h"

namespace trainer {

void Layer::build(const Shape& input, int index) {
  index_ = index;
  in_ = input;
  out_ = infer(input);
  for (int64_t d : out_.dims)
    if (d <= 0) shape_error("input " + input.str() + " gives an empty output " + out_.str());
}

int64_t Layer::num_params() const {
  int64_t n = 0;
  for (const auto& p : param_specs()) n += p.shape.numel();
  return n;
}

void Layer::shape_error(const std::string& what) const {
  throw ConfigError("model.layers." + std::to_string(index_) + " (" + type_ + " '" + name_ +
                    "'): " + what);
}

}  // namespace trainer
