#include "lib/layers/dropout.h"

#include "lib/config/node_reader.h"

namespace trainer {

Dropout::Dropout(NodeReader& r, bool cw) : channelwise(cw) {
  rate = float(r.number("rate", 0.5, 0.0, 0.999));
}

Shape Dropout::infer(const Shape& in) {
  if (channelwise && in.rank() < 2)
    shape_error("dropout2d expects (channels, height, width), got " + in.batched_str());
  return in;
}

}  // namespace trainer
