#include "lib/layers/embedding.h"

namespace trainer {

KeySpecs Embedding::keys() {
  return {integer_key("input_dim", 0, 1, int64_t(1) << 31, "vocabulary size")
              .require("is required: the vocabulary size (largest token id + 1), e.g. input_dim: 10000"),
          integer_key("output_dim", 0, 1, int64_t(1) << 20, "vector length")
              .require("is required: the length of each vector, e.g. output_dim: 64"),
          bool_key("channels_first", true,
                   "true: (output_dim, length), for conv1d; false: (length, output_dim), a row per position, "
                   "for layer_norm, position_embedding and attention")};
}

Embedding::Embedding(const KeyValues& v)
    : input_dim(v.integer("input_dim")),
      output_dim(v.integer("output_dim")),
      channels_first(v.boolean("channels_first")) {}

Shape Embedding::infer(const Shape& in) {
  if (in.rank() != 1)
    shape_error("expects a sequence of token ids (length), got " + in.batched_str() +
                "; set model.input_shape to [maxlen]");
  return channels_first ? Shape{output_dim, in[0]} : Shape{in[0], output_dim};
}

std::vector<ParamSpec> Embedding::param_specs() const {
  return {{"weight", Shape{input_dim, output_dim}, ParamRole::embedding, input_dim, output_dim}};
}

void Embedding::describe(YAML::Node& out) const {
  out["input_dim"] = input_dim;
  out["output_dim"] = output_dim;
  if (!channels_first) out["channels_first"] = false;
}

}  // namespace trainer
