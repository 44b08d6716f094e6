// conv1d: 1-D cross-correlation over the last axis, channels-first as in PyTorch's Conv1d.
//   x: (B, C, L)  W: (filters, C, k)  b: (filters)  y: (B, filters, OL)
// kernel_size and strides are integers (a one-element list is accepted too); padding is
// valid | same (TensorFlow's split: the extra column goes right) | an integer (both sides).
// Keras' Conv1D works on (L, C); the weights hold the same numbers, transposed.
#pragma once

#include "lib/layers/conv2d.h"

namespace trainer {

class Conv1d : public Layer {
 public:
  explicit Conv1d(const KeyValues& v);
  static KeySpecs keys();
  int64_t filters = 0;
  int64_t k = 1, stride = 1;
  std::string padding = "valid";
  int64_t pad = 0;  // when padding is an integer
  bool use_bias = true;
  Window w;  // resolved in infer()

  int64_t in_channels() const { return input_shape()[0]; }
  double forward_flops() const override {  // (F, OL) outputs, each C x k MACs
    return 2.0 * double(output_shape().numel()) * double(in_channels() * k);
  }
  std::vector<ParamSpec> param_specs() const override;
  void describe(YAML::Node& out) const override;

 protected:
  Shape infer(const Shape& in) override;  // (C, L) -> (filters, OL)
};

}  // namespace trainer
