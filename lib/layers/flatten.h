// flatten: (B, d1, d2, ...) -> (B, d1*d2*...). A view: no kernel runs, memory is shared.
#pragma once

#include "lib/registry/layer.h"

namespace trainer {

class Flatten : public Layer {
 public:
  bool aliases_input() const override { return true; }

 protected:
  Shape infer(const Shape& in) override { return Shape{in.numel()}; }
};

}  // namespace trainer
