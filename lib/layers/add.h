// add: the element-wise sum of two or more inputs of exactly the same shape (a residual
// connection: `{type: add, inputs: [conv2, input]}`).
//   x_k: (B, d...) -> y: (B, d...);  dx_k = dy for every k
#pragma once

#include "lib/registry/layer.h"

namespace trainer {

class Add : public Layer {
 public:
  int min_inputs() const override { return 2; }
  int max_inputs() const override { return 64; }

 protected:
  Shape infer(const Shape& in) override { return in; }
  Shape infer_inputs(const std::vector<Shape>& in) override {
    for (size_t k = 1; k < in.size(); ++k)
      if (in[k].dims != in[0].dims)
        shape_error("every input must have the same shape: input 1 is " + in[0].batched_str() + ", input " +
                    std::to_string(k + 1) + " is " + in[k].batched_str());
    return in[0];
  }
};

}  // namespace trainer
