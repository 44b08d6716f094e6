#include "lib/layers/pool2d.h"

namespace trainer {

KeySpecs Pool2d::keys() {
  return {size_pair_key("pool_size", 2, 1, 1 << 16, "an integer or [height, width]"),
          size_pair_key("strides", 0, 1, 1 << 16, "an integer or [height, width] (default: pool_size)"),
          padding_key("valid | same | an integer, both sides")};
}

Pool2d::Pool2d(const KeyValues& v, Kind k) : kind(k) {
  const std::vector<int64_t> p = v.integers("pool_size");
  const std::vector<int64_t> s = v.has("strides") ? v.integers("strides") : p;
  ph = p[0], pw = p[1], sh = s[0], sw = s[1];
  padding_from(v, padding, pad);
}

Shape Pool2d::infer(const Shape& in) {
  if (in.rank() != 3) shape_error("expects (channels, height, width), got " + in.batched_str());
  // PyTorch's rule: padding at most half the window, so that no window lies wholly in the padding
  // (max pooling would give -inf there, average pooling a mean of pad values).
  if (padding == "explicit" && (pad > ph / 2 || pad > pw / 2))
    shape_error("padding " + std::to_string(pad) + " must be at most half of pool_size " +
                (ph == pw ? std::to_string(ph) : "[" + std::to_string(ph) + ", " + std::to_string(pw) + "]"));
  wh = Window{ph, sh, 0, 0};
  ww = Window{pw, sw, 0, 0};
  int64_t oh = resolve_window(in[1], padding, pad, wh);
  int64_t ow = resolve_window(in[2], padding, pad, ww);
  if (oh <= 0 || ow <= 0)
    shape_error("pool " + std::to_string(ph) + "x" + std::to_string(pw) + " does not fit input " +
                in.batched_str());
  return Shape{in[0], oh, ow};
}

void Pool2d::describe(YAML::Node& out) const {
  out["pool_size"] = std::vector<int64_t>{ph, pw};
  out["strides"] = std::vector<int64_t>{sh, sw};
  if (padding == "explicit")
    out["padding"] = pad;
  else
    out["padding"] = padding;
}

}  // namespace trainer
