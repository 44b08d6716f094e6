// maxpool1d / avgpool1d: x: (B, C, L) -> y: (B, C, OL).
// pool_size defaults to 2, strides default to pool_size (Keras and PyTorch agree); padding as
// conv1d. Average pooling excludes padded positions from the divisor, as avgpool2d does.
#pragma once

#include "lib/layers/conv1d.h"

namespace trainer {

class Pool1d : public Layer {
 public:
  enum class Kind { max, avg };
  Pool1d(const KeyValues& v, Kind kind);
  static KeySpecs keys();
  Kind kind;
  int64_t size = 2, stride = 2;
  std::string padding = "valid";
  int64_t pad = 0;
  Window w;

  void describe(YAML::Node& out) const override;

 protected:
  Shape infer(const Shape& in) override;  // (C, L) -> (C, OL)
};

}  // namespace trainer
