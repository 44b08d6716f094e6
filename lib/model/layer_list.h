// model.layers (and model.blocks) -> the flat list of layer declarations the Model builds.
//
// Every item is validated against its type's declared keys (lib/registry); macros (mlp) and
// blocks are expanded, and Keras' `activation:` shortcut becomes a layer of its own. Nothing here
// infers a shape: the Model does that over the graph.
//
// Inputs: a layer's `inputs: [name, ...]` names other layers (or `input`, the model's input);
// without it a layer takes the previous declaration's output, so a plain list is a stack.
//
// Blocks (model.blocks) are named sub-graphs written once and used like a layer type:
//   blocks:
//     basic:
//       params: {filters: ~, strides: 1}     # ~: required at every use
//       layers:
//         - {type: conv2d, name: conv1, filters: $filters, strides: $strides, ...}
//         - ...
//         - {type: add, inputs: [bn2, input]}  # `input`: the block's input
//   layers:
//     - {type: basic, name: layer1.0, filters: 64}
// A use's layers are named "<use name>.<inner name>" (layer1.0.conv1, PyTorch's names); an
// unnamed use is "<block>_<n>", an unnamed inner layer "<use name>.<type>_<k>". Inside a block,
// `inputs:` names its own layers (as written: conv1, relu_1) or `input`; a name that is none of
// them is looked up among the model's layers. A `$param` value anywhere in a block's layer is replaced by the
// use's value.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "lib/keys/key_spec.h"

namespace trainer {

struct LayerEntry;

// The keys of one block of model.blocks (model.blocks.NAME): params, layers.
const KeySpecs& block_keys();

// One input of a declared layer: a layer by name, a declaration by index, or the model's input.
struct InputRef {
  static constexpr int kByName = -2, kModelInput = -1;
  std::string name;      // with decl == kByName
  int decl = kByName;    // >= 0: the declaration at this index of the list
  std::string fallback;  // inside a block: the name as written, looked up when `name` (the block's
                         // own layer of that name) does not exist
};

// One layer of model.layers, validated: every key checked against its type's declaration
// (lib/registry/registry.h), macros and blocks expanded, the `activation:` shortcut split off
// into a layer of its own.
struct LayerDecl {
  const LayerEntry* entry = nullptr;
  std::string type;
  std::string name;  // "": the Keras-style default, conv2d_1, dense_2, ...
  KeyValues values;
  std::vector<InputRef> inputs;  // empty: the previous declaration (the model's input for the first)
  std::string where;             // "file:line:col: model.layers.3", for the graph's errors
  bool in_block = false;         // named by its block use (not counted for default names)
};

// Validates model.layers (a non-empty list; each item's type and keys) and model.blocks without
// inferring any shape. Throws ConfigError with file:line:column. load_config() and Model call it.
std::vector<LayerDecl> read_layer_list(const YAML::Node& layers, const std::string& file,
                                       const YAML::Node& blocks = YAML::Node());

}  // namespace trainer
