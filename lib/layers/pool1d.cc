#include "lib/layers/pool1d.h"

#include "lib/config/node_reader.h"

namespace trainer {

Pool1d::Pool1d(NodeReader& r, Kind k) : kind(k) {
  size = read_single(r, "pool_size", 2);
  stride = read_single(r, "strides", size);
  read_padding(r, padding, pad);
}

Shape Pool1d::infer(const Shape& in) {
  if (in.rank() != 2) shape_error("expects (channels, length), got " + in.batched_str());
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
