// maxpool2d / avgpool2d: x: (B, C, H, W) -> y: (B, C, OH, OW).
// pool_size defaults to 2, strides default to pool_size (Keras and PyTorch agree).
#pragma once

#include "lib/layers/conv2d.h"

namespace trainer {

class Pool2d : public Layer {
 public:
  enum class Kind { max, avg };
  Pool2d(const KeyValues& v, Kind kind);
  static KeySpecs keys();
  Kind kind;
  int64_t ph = 2, pw = 2, sh = 2, sw = 2;
  std::string padding = "valid";
  int64_t pad = 0;
  Window wh, ww;

  void describe(YAML::Node& out) const override;

 protected:
  Shape infer(const Shape& in) override;
};

}  // namespace trainer
