#include "lib/layers/attention.h"

namespace trainer {

KeySpecs MultiHeadAttention::keys() {
  return {integer_key("heads", 0, 1, 4096, "attention heads; the features D must be a multiple of them")
              .require("is required: the number of attention heads, e.g. heads: 8"),
          bool_key("causal", false,
                   "each position attends to itself and the positions before it only (a language model)"),
          number_key("dropout", 0.0, 0.0, 0.99, "in training, dropout on the attention weights"),
          bool_key("use_bias", true, "biases in the input (c_attn) and output (c_proj) projections"),
          bool_key("rotary", false,
                   "rotary position embeddings: q and k rotated by their positions (RoFormer, Llama's "
                   "rotate-half layout); the head size must be even"),
          number_key("rotary_base", 10000.0, 2.0, 1e9,
                     "the rotary angles' base: pair i turns by pos base^(-2i/hd)")};
}

MultiHeadAttention::MultiHeadAttention(const KeyValues& v)
    : heads(v.integer("heads")),
      causal(v.boolean("causal")),
      dropout(float(v.number("dropout"))),
      use_bias(v.boolean("use_bias")),
      rotary(v.boolean("rotary")),
      rotary_base(float(v.number("rotary_base"))) {}

Shape MultiHeadAttention::infer(const Shape& in) {
  if (in.rank() != 2)
    shape_error("expects a sequence of rows (positions, features), got " + in.batched_str() +
                "; an embedding gives one with channels_first: false");
  if (in[1] % heads != 0)
    shape_error("the features " + std::to_string(in[1]) + " are not a multiple of heads " +
                std::to_string(heads));
  check_size("the attention weights (heads, positions, positions)", Shape{heads, in[0], in[0]});
  if (rotary && (in[1] / heads) % 2 != 0)
    shape_error("rotary needs an even head size; the features " + std::to_string(in[1]) + " over " +
                std::to_string(heads) + " heads give " + std::to_string(in[1] / heads));
  return in;
}

std::vector<ParamSpec> MultiHeadAttention::param_specs() const {
  const int64_t d = width();
  std::vector<ParamSpec> p{{"c_attn.weight", Shape{3 * d, d}, ParamRole::weight, d, 3 * d}};
  if (use_bias) p.push_back({"c_attn.bias", Shape{3 * d}, ParamRole::bias, d, 3 * d});
  p.push_back({"c_proj.weight", Shape{d, d}, ParamRole::weight, d, d});
  if (use_bias) p.push_back({"c_proj.bias", Shape{d}, ParamRole::bias, d, d});
  return p;
}

void MultiHeadAttention::describe(YAML::Node& out) const {
  out["heads"] = heads;
  out["causal"] = causal;
  out["dropout"] = dropout;
  out["use_bias"] = use_bias;
  if (rotary) {
    out["rotary"] = true;
    out["rotary_base"] = rotary_base;
  }
}

}  // namespace trainer
