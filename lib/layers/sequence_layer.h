// SequenceLayer: the base of the layers that read a sequence as rows (positions, features) and may
// take its token ids as a second input, (positions), to mask the padding (id 0): lstm, gru and
// multi_head_attention. It checks that second input's shape once for all of them, and names the
// family for the model's check that an embedding before them gives rows (Model::check_row_inputs).
#pragma once

#include <string>
#include <vector>

#include "lib/registry/layer.h"

namespace trainer {

class SequenceLayer : public Layer {
 public:
  // A second input, the token ids (L): positions (keys) whose id is 0 are masked.
  bool masked() const { return input_shapes().size() == 2; }
  int max_inputs() const override { return 2; }

 protected:
  // What the mask masks, for the error about its shape ("the padding", "the padding keys").
  virtual std::string masks() const = 0;
  // infer() of the sequence, then: the ids, if given, are one a position.
  Shape infer_inputs(const std::vector<Shape>& in) override {
    const Shape out = infer(in[0]);
    if (in.size() == 2 && (in[1].rank() != 1 || in[1][0] != in[0][0]))
      shape_error("takes the sequence " + in[0].batched_str() + " and, to mask " + masks() +
                  ", the token ids it was embedded from, one a position (" + std::to_string(in[0][0]) +
                  "); the second input is " + in[1].batched_str());
    return out;
  }
};

}  // namespace trainer
