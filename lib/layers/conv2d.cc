#include "lib/layers/conv2d.h"

#include "lib/config/node_reader.h"

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

void read_padding(NodeReader& r, std::string& mode, int64_t& pad) {
  if (r.has("padding")) {
    std::string s = r.string("padding", "valid");
    if (s == "valid" || s == "same") {
      mode = s;
      return;
    }
    pad = r.integer("padding", 0, 0, 1 << 16);
    mode = "explicit";
    return;
  }
  r.accept({"padding"});
}

void read_pair(NodeReader& r, const std::string& key, int64_t def_h, int64_t def_w, int64_t& h, int64_t& w) {
  std::vector<int64_t> v = r.integer_list(key, {def_h, def_w}, 1, 1 << 16);
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) r.fail(key, "expected an integer or a [height, width] pair");
  h = v[0];
  w = v[1];
}

Conv2d::Conv2d(NodeReader& r) {
  filters = r.integer("filters", 0, 1, 1 << 20);
  if (filters == 0) r.fail("filters", "is required: the number of output channels, e.g. filters: 32");
  if (!r.has("kernel_size")) r.fail("kernel_size", "is required, e.g. kernel_size: 3 or [3, 3]");
  read_pair(r, "kernel_size", 1, 1, kh, kw);
  read_pair(r, "strides", 1, 1, sh, sw);
  read_padding(r, padding, pad);
  use_bias = r.boolean("use_bias", true);
}

Shape Conv2d::infer(const Shape& in) {
  if (in.rank() != 3) shape_error("expects (channels, height, width), got " + in.batched_str());
  check_size("parameter 'weight'", Shape{filters, in[0], kh, kw}, false);  // bounds the fans too
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
  int64_t fan_in = in_channels() * kh * kw, fan_out = filters * kh * kw;
  std::vector<ParamSpec> p{
      {"weight", Shape{filters, in_channels(), kh, kw}, ParamRole::weight, fan_in, fan_out}};
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
}

}  // namespace trainer
