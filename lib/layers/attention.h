// multi_head_attention: self-attention over the rows of a sequence, with its input and output
// projections, as GPT-2's attention block (nanoGPT's CausalSelfAttention) and PyTorch's
// nn.MultiheadAttention(D, heads, batch_first=True) on one input.
//   x, y: (B, L, D)   H = heads, hd = D / H, scale = 1 / sqrt(hd)
//   qkv = x c_attn.weight^T + c_attn.bias                      (B, L, 3D): q | k | v
//   per head h: S = scale q_h k_h^T (L, L); causal: S[i, j] = -inf for j > i
//               P = softmax over each row of S; in training, dropout on P (rate: dropout)
//               O_h = P v_h                                     (L, hd), heads side by side: (L, D)
//   y = O c_proj.weight^T + c_proj.bias                         (B, L, D)
// rotary: q and k rotated by their positions after the projection (lib/core/rotary_formula.h,
// rotary_base 10000 as RoFormer and Llama); head_dim must be even. No learned position embedding is
// then needed.
// Key-padding mask (nn.MultiheadAttention's key_padding_mask, Keras' mask_zero): with a second
// input, the token ids (L) of the sequence (`inputs: [x, input]`), keys whose id is 0 get no
// weight; a query left with no key (causal attention at front padding) attends to nothing, its
// output row is the output projection's bias (FlashAttention's convention; PyTorch gives NaN).
// Weights in nn.Linear's layout (out, in), named as GPT-2's checkpoints name them: a layer named
// transformer.h.0.attn holds transformer.h.0.attn.c_attn.weight (3D, D), .c_attn.bias (3D),
// .c_proj.weight (D, D) and .c_proj.bias (D).
#pragma once

#include "lib/keys/key_spec.h"
#include "lib/layers/sequence_layer.h"

namespace trainer {

class MultiHeadAttention : public SequenceLayer {
 public:
  explicit MultiHeadAttention(const KeyValues& v);
  static KeySpecs keys();
  int64_t heads = 1;
  bool causal = false;
  float dropout = 0.f;
  bool use_bias = true;
  bool rotary = false;
  float rotary_base = 10000.f;

  int64_t length() const { return input_shape()[0]; }
  int64_t width() const { return input_shape()[1]; }  // D
  int64_t head_dim() const { return width() / heads; }
  // The four matrix products of qkv, S, P v and the output projection, 2 flops a multiply-add
  // (causal attention computes the masked half too).
  double forward_flops() const override {
    const double l = double(length()), d = double(width());
    return 2.0 * l * d * 3 * d + 4.0 * l * l * d + 2.0 * l * d * d;
  }

  std::vector<ParamSpec> param_specs() const override;
  void describe(YAML::Node& out) const override;

 protected:
  Shape infer(const Shape& in) override;
  std::string masks() const override { return "the padding keys"; }
};

}  // namespace trainer
