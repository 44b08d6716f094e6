// mlp: a compact spec for a stack of dense layers, expanded by the model (lib/model/model.cc)
// into ordinary dense and activation layers before shapes are inferred. For the depth sweep:
//   {type: mlp, depth: L, width: 4, growth: 2, final_units: 2, activation: relu}
// gives L dense layers in all: L-1 hidden ones of width, width*growth, width*growth^2, ...
// (each followed by the activation) and a last one of final_units outputs, with no activation
// (logits). With input 2, width 4, growth 2, final_units 2: L=8 has 44,710 parameters
// (hidden 4..256), L=10 has 703,142 (hidden 4..1024). `--set model.layers.N.depth=12` works as
// for any key. Expanded layers are named as if written out: dense_1, relu_1, ...; with `name: x`
// they are x_dense_1, x_relu_1, ...
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "lib/keys/key_spec.h"

namespace trainer {

// The mlp keys; `activations`: the registered activation types (softmax and log_softmax are left
// out: they end a network, not a hidden layer).
KeySpecs mlp_keys(const std::vector<std::string>& activations);

// The layers an mlp stands for, one YAML mapping each, e.g. {type: dense, units: 4, use_bias:
// true}, {type: relu}, ... (registered as the mlp macro's expander).
std::vector<YAML::Node> expand_mlp(const KeyValues& v);

}  // namespace trainer
