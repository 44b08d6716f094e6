#include "lib/layers/pool2d.h"

#include "lib/config/node_reader.h"

namespace trainer {

Pool2d::Pool2d(NodeReader& r, Kind k) : kind(k) {
  read_pair(r, "pool_size", 2, 2, ph, pw);
  read_pair(r, "strides", ph, pw, sh, sw);
  read_padding(r, padding, pad);
}

Shape Pool2d::infer(const Shape& in) {
  if (in.rank() != 3) shape_error("expects (channels, height, width), got " + in.batched_str());
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
