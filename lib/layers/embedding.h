// embedding: a learned lookup table from token ids to vectors (Keras Embedding, torch.nn.Embedding).
//   x: (B, L) token ids stored as floats   W: (input_dim, output_dim)   y: (B, output_dim, L)
//
// Layout decision: by default the output is channels-first, (output_dim, L), so that conv1d, maxpool1d,
// global_avg_pool and batchnorm (which all take (C, L)) follow directly, as in PyTorch after its
// usual transpose. Keras prints (None, L, output_dim) for the same layer; the parameter count
// (input_dim * output_dim) and what a following conv1d computes are identical, only a following
// flatten orders the features channel-major instead of position-major. channels_first: false
// gives (L, output_dim), each position's vector in a row, as nn.Embedding and Keras give it: what
// layer_norm, position_embedding and the other layers over a sequence's positions take.
//
// Token ids are the integers 0 .. input_dim-1 (0 is the padding value of the sequences reader).
// The data pipeline is responsible for the range; a kernel cannot throw in the middle of a step,
// so the CPU kernel clamps an id outside [0, input_dim) to the nearest valid row and logs one
// warning per kernel. Ids are not differentiable: the layer passes no gradient to its input.
// Init: PyTorch N(0, 1), Keras U(-0.05, 0.05) (ParamRole::embedding, see lib/model/model.cc).
#pragma once

#include "lib/keys/key_spec.h"
#include "lib/registry/layer.h"

namespace trainer {

class Embedding : public Layer {
 public:
  explicit Embedding(const KeyValues& v);
  static KeySpecs keys();
  int64_t input_dim = 0;       // vocabulary size: ids are 0 .. input_dim-1
  int64_t output_dim = 0;      // vector length D
  bool channels_first = true;  // y: (D, L); false: (L, D)
  int64_t length() const { return input_shape()[0]; }

  std::vector<ParamSpec> param_specs() const override;
  void describe(YAML::Node& out) const override;

 protected:
  Shape infer(const Shape& in) override;  // (L) -> (output_dim, L), or (L, output_dim)
};

}  // namespace trainer
