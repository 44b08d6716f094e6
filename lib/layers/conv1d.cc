#include "lib/layers/conv1d.h"

namespace trainer {

KeySpecs Conv1d::keys() {
  return {integer_key("filters", 0, 1, 1 << 20, "output channels")
              .require("is required: the number of output channels, e.g. filters: 64"),
          size_key("kernel_size", 0, 1, 1 << 16, "an integer").require("is required, e.g. kernel_size: 5"),
          size_key("strides", 1, 1, 1 << 16, "an integer"),
          padding_key("valid | same (TensorFlow's split) | an integer, both sides"),
          bool_key("use_bias", true, "add a learned bias per filter")};
}

Conv1d::Conv1d(const KeyValues& v)
    : filters(v.integer("filters")),
      k(v.integer("kernel_size")),
      stride(v.integer("strides")),
      use_bias(v.boolean("use_bias")) {
  padding_from(v, padding, pad);
}

Shape Conv1d::infer(const Shape& in) {
  if (in.rank() != 2) shape_error("expects (channels, length), got " + in.batched_str());
  w = Window{k, stride, 0, 0};
  int64_t ol = resolve_window(in[1], padding, pad, w);
  if (ol <= 0) shape_error("kernel " + std::to_string(k) + " does not fit input " + in.batched_str());
  return Shape{filters, ol};
}

std::vector<ParamSpec> Conv1d::param_specs() const {
  int64_t fan_in = in_channels() * k, fan_out = filters * k;
  std::vector<ParamSpec> p{{"weight", Shape{filters, in_channels(), k}, ParamRole::weight, fan_in, fan_out}};
  if (use_bias) p.push_back({"bias", Shape{filters}, ParamRole::bias, fan_in, fan_out});
  return p;
}

void Conv1d::describe(YAML::Node& out) const {
  out["filters"] = filters;
  out["kernel_size"] = k;
  out["strides"] = stride;
  if (padding == "explicit")
    out["padding"] = pad;
  else
    out["padding"] = padding;
  out["use_bias"] = use_bias;
}

}  // namespace trainer
