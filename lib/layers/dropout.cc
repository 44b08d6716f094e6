#include "lib/layers/dropout.h"

namespace trainer {

KeySpecs Dropout::keys() { return {number_key("rate", 0.5, 0.0, 0.999, "probability of zeroing")}; }

Dropout::Dropout(const KeyValues& v, bool cw) : rate(float(v.number("rate"))), channelwise(cw) {}

Shape Dropout::infer(const Shape& in) {
  if (channelwise && in.rank() < 2)
    shape_error("dropout2d expects (channels, height, width), got " + in.batched_str());
  return in;
}

}  // namespace trainer
