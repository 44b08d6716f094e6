// identity: y = x. A view like flatten: no kernel runs, the output shares the input's memory.
// Useful as a named branch point (`{type: identity, name: shortcut}`) or a block's pass-through.
#pragma once

#include "lib/registry/layer.h"

namespace trainer {

class Identity : public Layer {
 public:
  bool aliases_input() const override { return true; }

 protected:
  Shape infer(const Shape& in) override { return in; }
};

}  // namespace trainer
