// global_avg_pool: the mean over every spatial position of each channel (Keras'
// GlobalAveragePooling1D/2D, PyTorch's AdaptiveAvgPool to size 1 followed by flatten).
// global_max_pool: the maximum instead (GlobalMaxPooling, AdaptiveMaxPool); its gradient goes to
// the first position holding the maximum, as PyTorch's does.
//   x: (B, C, d1, ...) -> y: (B, C); the input needs at least one spatial axis.
// channels_last: x: (B, d1, ..., C) -> y: (B, C), a row of channels per position, as an embedding
// with channels_first: false and the transformer layers give it (Keras' default data_format, and
// torch's x.mean(dim=1) on (B, L, D)).
#pragma once

#include <yaml-cpp/yaml.h>

#include "lib/keys/key_spec.h"
#include "lib/registry/layer.h"

namespace trainer {

class GlobalPool : public Layer {
 public:
  explicit GlobalPool(const KeyValues& v) : channels_last(v.boolean("channels_last")) {}
  static KeySpecs keys() {
    return {bool_key("channels_last", false,
                     "the input is (positions..., channels), a row per position (after an embedding with "
                     "channels_first: false, layer_norm or multi_head_attention): pool over every axis but "
                     "the last")};
  }
  bool channels_last = false;
  int64_t channels() const {
    return channels_last ? input_shape()[input_shape().rank() - 1] : input_shape()[0];
  }
  int64_t spatial() const { return input_shape().numel() / channels(); }
  void describe(YAML::Node& out) const override {
    if (channels_last) out["channels_last"] = true;
  }

 protected:
  Shape infer(const Shape& in) override {
    if (channels_last) {
      if (in.rank() < 2)
        shape_error("with channels_last expects (positions..., channels), got " + in.batched_str());
      return Shape{in[in.rank() - 1]};
    }
    if (in.rank() < 2 || in.rank() > 4)
      shape_error(
          "expects (channels, length), (channels, height, width) or (channels, depth, height, width), got " +
          in.batched_str() + " (for (length, channels), a row per position, set channels_last: true)");
    return Shape{in[0]};
  }
};

class GlobalAvgPool : public GlobalPool {
 public:
  using GlobalPool::GlobalPool;
};
class GlobalMaxPool : public GlobalPool {
 public:
  using GlobalPool::GlobalPool;
};

}  // namespace trainer
