// conv2d: cross-correlation as in PyTorch/Keras.
//   x: (B, C, H, W)  W: (filters, C, kh, kw)  b: (filters)  y: (B, filters, OH, OW)
// padding: valid | same (TensorFlow's split: the extra row/column goes bottom/right) | an integer.
// groups: G splits channels and filters into G groups convolved separately (PyTorch's groups):
// W: (filters, C / G, kh, kw); G = C = filters is a depthwise convolution.
#pragma once

#include "lib/keys/key_spec.h"
#include "lib/registry/layer.h"

namespace trainer {

// Resolved geometry of one spatial dimension, shared by conv and pooling layers.
struct Window {
  int64_t kernel = 1, stride = 1, pad_begin = 0, pad_end = 0;
};
// Fills pads for "valid"/"same"/explicit and returns the output extent (0 if empty).
int64_t resolve_window(int64_t in, const std::string& padding, int64_t explicit_pad, Window& w);

class Conv2d : public Layer {
 public:
  explicit Conv2d(const KeyValues& v);
  static KeySpecs keys();
  int64_t filters = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;
  std::string padding = "valid";
  int64_t pad = 0;  // when padding is an integer
  bool use_bias = true;
  int64_t groups = 1;
  Window wh, ww;  // resolved in infer()

  int64_t in_channels() const { return input_shape()[0]; }
  double forward_flops() const override {  // (F, OH, OW) outputs, each C/groups x kh x kw MACs
    return 2.0 * double(output_shape().numel()) * double(in_channels() / groups) * double(kh * kw);
  }
  std::vector<ParamSpec> param_specs() const override;
  void describe(YAML::Node& out) const override;

 protected:
  Shape infer(const Shape& in) override;
};

// The validated `padding` (padding_key()) as (mode, pad): valid | same | explicit with pad.
void padding_from(const KeyValues& v, std::string& mode, int64_t& pad);

}  // namespace trainer
