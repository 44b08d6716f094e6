// lstm / gru: recurrent layers over the rows of a sequence, as PyTorch's nn.LSTM / nn.GRU
// (batch_first=True, one layer) and Keras' LSTM / GRU. Stack them by writing several layers, the
// inner ones with return_sequences: true (Keras' way; dropout layers may go between).
//   x: (B, L, D)   H = units, G = 4 gates (lstm: i, f, g, o) or 3 (gru: r, z, n)
//   lstm, per step t:  a = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh          (B, 4H)
//                      i, f, o = sigmoid(a_i, a_f, a_o), g = tanh(a_g)
//                      c_t = f c_{t-1} + i g,   h_t = o tanh(c_t)
//   gru, per step t:   r, z = sigmoid(x_t W_i{r,z}^T + b_i{r,z} + h_{t-1} W_h{r,z}^T + b_h{r,z})
//                      n = tanh(x_t W_in^T + b_in + r (h_{t-1} W_hn^T + b_hn))
//                      h_t = (1 - z) n + z h_{t-1}
//   h_{-1} = c_{-1} = 0. bidirectional: a second set of weights runs from the last position to
//   the first; its h sits after the forward one's in every output row (PyTorch's and Keras'
//   concatenation).
//   y: return_sequences: (B, L, dirs H), every position's h; otherwise (B, dirs H): the forward
//   direction's h at the last position and the reverse one's at the first (PyTorch's h_n, Keras'
//   default output).
// Weights in PyTorch's layout and names, gates stacked in its order: a layer named rnn holds
// rnn.weight_ih_l0 (G H, D), rnn.weight_hh_l0 (G H, H), rnn.bias_ih_l0 (G H), rnn.bias_hh_l0
// (G H), and with bidirectional the same four with the suffix _l0_reverse. So a PyTorch state
// dict loads as it is, and the parameter count is PyTorch's (Keras' GRU with reset_after, its
// default, also has two biases; Keras' LSTM has one, 4H fewer parameters).
// Masking (Keras' mask_zero, PyTorch's packed sequences): with a second input, the token ids (L)
// the sequence was embedded from (`inputs: [embedded, input]`), the positions whose id is 0 (the
// sequences reader's padding) are skipped: h and c pass through them unchanged, and their output
// rows are 0. With front padding (pad_sequences' default) the forward direction starts at the
// first real token, and the last state is the one after the last real token in both directions.
// Init: `init: torch` gives PyTorch's U(-1/sqrt(H), 1/sqrt(H)) for every tensor; `keras` gives
// Glorot-uniform weights and zero biases (Keras initializes the recurrent matrix orthogonally and
// the LSTM's forget-gate bias to 1: not reproduced).
#pragma once

#include "lib/keys/key_spec.h"
#include "lib/layers/sequence_layer.h"

namespace trainer {

class Recurrent : public SequenceLayer {
 public:
  enum class Cell { lstm, gru };
  Recurrent(const KeyValues& v, Cell cell);
  static KeySpecs keys(Cell cell);
  Cell cell = Cell::lstm;
  int64_t units = 0;  // H
  bool return_sequences = false;
  bool bidirectional = false;

  int64_t gates() const { return cell == Cell::lstm ? 4 : 3; }  // G
  int64_t directions() const { return bidirectional ? 2 : 1; }
  int64_t length() const { return input_shape()[0]; }    // L
  int64_t features() const { return input_shape()[1]; }  // D
  // The per-step products x W_ih^T and h W_hh^T, 2 flops a multiply-add, over every position and
  // direction.
  double forward_flops() const override {
    return 2.0 * double(directions() * length() * gates() * units * (features() + units));
  }

  std::vector<ParamSpec> param_specs() const override;
  void describe(YAML::Node& out) const override;

 protected:
  Shape infer(const Shape& in) override;
  std::string masks() const override { return "the padding"; }
};

}  // namespace trainer
