#include "lib/layers/conv1d.h"

#include "lib/config/node_reader.h"

namespace trainer {

int64_t read_single(NodeReader& r, const std::string& key, int64_t def) {
  std::vector<int64_t> v = r.integer_list(key, {def}, 1, 1 << 16);
  if (v.size() != 1) r.fail(key, "expected an integer (1-D layers take one size), e.g. " + key + ": 3");
  return v[0];
}

Conv1d::Conv1d(NodeReader& r) {
  filters = r.integer("filters", 0, 1, 1 << 20);
  if (filters == 0) r.fail("filters", "is required: the number of output channels, e.g. filters: 64");
  if (!r.has("kernel_size")) r.fail("kernel_size", "is required, e.g. kernel_size: 5");
  k = read_single(r, "kernel_size", 1);
  stride = read_single(r, "strides", 1);
  read_padding(r, padding, pad);
  use_bias = r.boolean("use_bias", true);
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
