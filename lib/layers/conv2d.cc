#include "lib/layers/conv2d.h"

namespace trainer {

int64_t resolve_window(int64_t in, const std::string& padding, int64_t explicit_pad, Window& w) {
  if (padding == "same") {
    int64_t out = (in + w.stride - 1) / w.stride;
    int64_t total = std::max<int64_t>((out - 1) * w.stride + w.kernel - in, 0);
    w.pad_begin = total / 2;
    w.pad_end = total - w.pad_begin;
  } else {
    w.pad_begin = w.pad_end = (padding == "valid") ? 0 : explicit_pad;
  }
  int64_t span = in + w.pad_begin + w.pad_end - w.kernel;
  return span < 0 ? 0 : span / w.stride + 1;
}

void padding_from(const KeyValues& v, std::string& mode, int64_t& pad) {
  mode = v.string("padding");
  if (mode == "valid" || mode == "same") return;
  pad = v.integer("padding");
  mode = "explicit";
}

KeySpecs Conv2d::keys() {
  return {integer_key("filters", 0, 1, 1 << 20, "output channels")
              .require("is required: the number of output channels, e.g. filters: 32"),
          size_pair_key("kernel_size", 0, 1, 1 << 16, "an integer or [height, width]")
              .require("is required, e.g. kernel_size: 3 or [3, 3]"),
          size_pair_key("strides", 1, 1, 1 << 16, "an integer or [height, width]"),
          padding_key("valid | same (TensorFlow's split) | an integer, both sides"),
          bool_key("use_bias", true, "add a learned bias per filter"),
          integer_key("groups", 1, 1, 1 << 20,
                      "channel groups convolved separately; divides the input channels and filters "
                      "(channels = filters = groups: depthwise)")};
}

Conv2d::Conv2d(const KeyValues& v)
    : filters(v.integer("filters")), use_bias(v.boolean("use_bias")), groups(v.integer("groups")) {
  if (filters % groups != 0)
    v.fail("groups", std::to_string(groups) + " does not divide filters (" + std::to_string(filters) + ")");
  const std::vector<int64_t> k = v.integers("kernel_size"), s = v.integers("strides");
  kh = k[0], kw = k[1], sh = s[0], sw = s[1];
  padding_from(v, padding, pad);
}

Shape Conv2d::infer(const Shape& in) {
  if (in.rank() != 3) shape_error("expects (channels, height, width), got " + in.batched_str());
  if (in[0] % groups != 0)
    shape_error("groups " + std::to_string(groups) + " does not divide the input's " + std::to_string(in[0]) +
                " channels (input " + in.batched_str() + ")");
  check_size("parameter 'weight'", Shape{filters, in[0] / groups, kh, kw}, false);  // bounds the fans too
  wh = Window{kh, sh, 0, 0};
  ww = Window{kw, sw, 0, 0};
  int64_t oh = resolve_window(in[1], padding, pad, wh);
  int64_t ow = resolve_window(in[2], padding, pad, ww);
  if (oh <= 0 || ow <= 0)
    shape_error("kernel " + std::to_string(kh) + "x" + std::to_string(kw) + " does not fit input " +
                in.batched_str());
  return Shape{filters, oh, ow};
}

std::vector<ParamSpec> Conv2d::param_specs() const {
  // PyTorch's fans for a grouped weight (filters, C/G, kh, kw): its dims 1.. and 0, 2..
  int64_t fan_in = in_channels() / groups * kh * kw, fan_out = filters / groups * kh * kw;
  std::vector<ParamSpec> p{
      {"weight", Shape{filters, in_channels() / groups, kh, kw}, ParamRole::weight, fan_in, fan_out}};
  if (use_bias) p.push_back({"bias", Shape{filters}, ParamRole::bias, fan_in, fan_out});
  return p;
}

void Conv2d::describe(YAML::Node& out) const {
  out["filters"] = filters;
  out["kernel_size"] = std::vector<int64_t>{kh, kw};
  out["strides"] = std::vector<int64_t>{sh, sw};
  if (padding == "explicit")
    out["padding"] = pad;
  else
    out["padding"] = padding;
  out["use_bias"] = use_bias;
  if (groups != 1) out["groups"] = groups;
}

}  // namespace trainer
