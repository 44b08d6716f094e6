#include "lib/layers/pool1d.h"

namespace trainer {

KeySpecs Pool1d::keys() {
  return {size_key("pool_size", 2, 1, 1 << 16, "window length"),
          size_key("strides", 0, 1, 1 << 16, "step (default: pool_size)"),
          padding_key("valid | same | an integer, both sides")};
}

Pool1d::Pool1d(const KeyValues& v, Kind k) : kind(k) {
  size = v.integer("pool_size");
  stride = v.has("strides") ? v.integer("strides") : size;
  padding_from(v, padding, pad);
}

Shape Pool1d::infer(const Shape& in) {
  if (in.rank() != 2) shape_error("expects (channels, length), got " + in.batched_str());
  if (padding == "explicit" && pad > size / 2)  // PyTorch's rule, as pool2d's
    shape_error("padding " + std::to_string(pad) + " must be at most half of pool_size " +
                std::to_string(size));
  w = Window{size, stride, 0, 0};
  int64_t ol = resolve_window(in[1], padding, pad, w);
  if (ol <= 0) shape_error("pool " + std::to_string(size) + " does not fit input " + in.batched_str());
  return Shape{in[0], ol};
}

void Pool1d::describe(YAML::Node& out) const {
  out["pool_size"] = size;
  out["strides"] = stride;
  if (padding == "explicit")
    out["padding"] = pad;
  else
    out["padding"] = padding;
}

}  // namespace trainer
