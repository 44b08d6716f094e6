// position_embedding: a learned vector per position added to the input, GPT-2's wpe and BERT's
// position embeddings (PyTorch: x + wpe(arange(L))). The table has the sample's shape, so after an
// embedding with channels_first: false it is (L, D), a row per position.
//   x, y: (B, ...)   weight: (...) the sample's shape, init N(0, 1) as nn.Embedding's
//   y = x + weight;  dweight = sum over the batch of dy;  dx = dy
// A model whose sequences are shorter than L pads them: positions keep their rows.
#pragma once

#include "lib/registry/layer.h"

namespace trainer {

class PositionEmbedding : public Layer {
 public:
  std::vector<ParamSpec> param_specs() const override;

 protected:
  Shape infer(const Shape& in) override;
};

}  // namespace trainer
