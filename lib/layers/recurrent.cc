#include "lib/layers/recurrent.h"

namespace trainer {

KeySpecs Recurrent::keys(Cell cell) {
  const std::string what = cell == Cell::lstm ? "lstm" : "gru";
  return {
      integer_key(
          "units", 0, 1, 4096,
          "the hidden state's size H (at most 4096: the GPU kernel keeps a block's states in shared memory)")
          .require("is required: the size of the hidden state, e.g. units: 128"),
      bool_key("return_sequences", false,
               "output every position's hidden state (B, L, H), for a layer that follows over the "
               "positions (another " +
                   what + ", attention); otherwise the last one (B, H)"),
      bool_key("bidirectional", false,
               "a second " + what +
                   " reads the sequence from its end; its state follows the forward one's (2 H features)")};
}

Recurrent::Recurrent(const KeyValues& v, Cell c)
    : cell(c),
      units(v.integer("units")),
      return_sequences(v.boolean("return_sequences")),
      bidirectional(v.boolean("bidirectional")) {}

Shape Recurrent::infer(const Shape& in) {
  if (in.rank() != 2)
    shape_error("expects a sequence of rows (positions, features), got " + in.batched_str() +
                "; an embedding gives one with channels_first: false");
  check_size("the gates of every position (positions, gates x units)", Shape{in[0], gates() * units});
  const int64_t out = directions() * units;
  return return_sequences ? Shape{in[0], out} : Shape{out};
}

std::vector<ParamSpec> Recurrent::param_specs() const {
  const int64_t g = gates() * units, h = units, d = features();
  std::vector<ParamSpec> p;
  for (int dir = 0; dir < directions(); ++dir) {
    const std::string suffix = dir == 0 ? "_l0" : "_l0_reverse";
    // fan_in = H for every tensor: `init: torch` draws U(-1/sqrt(H), 1/sqrt(H)) as nn.LSTM does.
    p.push_back({"weight_ih" + suffix, Shape{g, d}, ParamRole::weight, h, g});
    p.push_back({"weight_hh" + suffix, Shape{g, h}, ParamRole::weight, h, g});
    p.push_back({"bias_ih" + suffix, Shape{g}, ParamRole::bias, h, g});
    p.push_back({"bias_hh" + suffix, Shape{g}, ParamRole::bias, h, g});
  }
  return p;
}

void Recurrent::describe(YAML::Node& out) const {
  out["units"] = units;
  out["return_sequences"] = return_sequences;
  out["bidirectional"] = bidirectional;
}

}  // namespace trainer
