// concat: two or more inputs joined along the channel axis (the first per-sample axis, PyTorch's
// torch.cat(dim=1)); every other axis must match.
//   x_k: (B, C_k, d...) -> y: (B, sum C_k, d...)
#pragma once

#include "lib/registry/layer.h"

namespace trainer {

class Concat : public Layer {
 public:
  int min_inputs() const override { return 2; }
  int max_inputs() const override { return 64; }
  // Elements per sample after the channel axis (d...): each input's slice is C_k * inner().
  int64_t inner() const { return input_shape().numel() / input_shape()[0]; }

 protected:
  Shape infer(const Shape& in) override { return in; }
  Shape infer_inputs(const std::vector<Shape>& in) override {
    int64_t channels = 0;
    for (size_t k = 0; k < in.size(); ++k) {
      bool same = in[k].rank() == in[0].rank();
      for (size_t d = 1; same && d < in[0].dims.size(); ++d) same = in[k][d] == in[0][d];
      if (!same)
        shape_error("inputs are joined along the channels, so every other axis must match: input 1 is " +
                    in[0].batched_str() + ", input " + std::to_string(k + 1) + " is " + in[k].batched_str());
      channels += in[k][0];
    }
    Shape out = in[0];
    out.dims[0] = channels;
    return out;
  }
};

}  // namespace trainer
