#include "lib/layers/position_embedding.h"

namespace trainer {

Shape PositionEmbedding::infer(const Shape& in) {
  if (in.rank() < 1) shape_error("expects (positions, features), got " + in.batched_str());
  return in;
}

std::vector<ParamSpec> PositionEmbedding::param_specs() const {
  const Shape& s = input_shape();
  const int64_t d = s[s.rank() - 1], rows = s.numel() / d;
  return {{"weight", s, ParamRole::embedding, rows, d}};
}

}  // namespace trainer
