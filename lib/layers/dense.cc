#include "lib/layers/dense.h"

namespace trainer {

KeySpecs Dense::keys() {
  return {integer_key("units", 0, 1, int64_t(1) << 31, "output features")
              .require("is required: the number of output features, e.g. units: 64"),
          bool_key("use_bias", true, "add a learned bias"),
          bool_key("per_position", false,
                   "map each position's features of a sequence (the last axis: (L, D) -> (L, units)), as "
                   "nn.Linear does; false: the input must be flat"),
          string_key("tie_to", "",
                     "an embedding layer whose table is this layer's weight (GPT-2's lm_head reads wte): "
                     "units must be its input_dim and the input features its output_dim; the tensor is "
                     "kept, trained and saved once, under the embedding's name")};
}

Dense::Dense(const KeyValues& v)
    : units(v.integer("units")),
      use_bias(v.boolean("use_bias")),
      per_position(v.boolean("per_position")),
      tied(v.has("tie_to") ? v.string("tie_to") : std::string()) {}

Shape Dense::infer(const Shape& in) {
  if (in.rank() == 1) return Shape{units};
  if (!per_position || in.rank() == 0)
    shape_error("expects a flat input (features), got " + in.batched_str() +
                "; add a flatten layer before it, or for a sequence of rows (positions, features) set "
                "per_position: true to map each row");
  Shape out = in;
  out.dims.back() = units;
  return out;
}

std::vector<ParamSpec> Dense::param_specs() const {
  std::vector<ParamSpec> p{{"weight", Shape{units, in_features()}, ParamRole::weight, in_features(), units}};
  if (use_bias) p.push_back({"bias", Shape{units}, ParamRole::bias, in_features(), units});
  return p;
}

void Dense::describe(YAML::Node& out) const {
  out["units"] = units;
  out["use_bias"] = use_bias;
  if (per_position) out["per_position"] = true;
  if (!tied.empty()) out["tie_to"] = tied;
}

}  // namespace trainer
