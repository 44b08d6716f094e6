// global_avg_pool: the mean over every spatial position of each channel (Keras'
// GlobalAveragePooling1D/2D, PyTorch's AdaptiveAvgPool to size 1 followed by flatten).
// global_max_pool: the maximum instead (GlobalMaxPooling, AdaptiveMaxPool); its gradient goes to
// the first position holding the maximum, as PyTorch's does.
//   x: (B, C, d1, ...) -> y: (B, C); the input needs at least one spatial axis.
#pragma once

#include "lib/registry/layer.h"

namespace trainer {

class GlobalPool : public Layer {
 public:
  int64_t channels() const { return input_shape()[0]; }
  int64_t spatial() const { return input_shape().numel() / input_shape()[0]; }

 protected:
  Shape infer(const Shape& in) override {
    if (in.rank() < 2 || in.rank() > 4)
      shape_error(
          "expects (channels, length), (channels, height, width) or (channels, depth, height, width), got " +
          in.batched_str());
    return Shape{in[0]};
  }
};

class GlobalAvgPool : public GlobalPool {};
class GlobalMaxPool : public GlobalPool {};

}  // namespace trainer
