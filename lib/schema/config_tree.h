// The whole config as one tree, built from the key declarations that validate it: each section
// with its keys (lib/config/config_keys.h, device_section.h), the keys that depend on a variant
// (layer types from the registry, losses, optimizers, data formats, schedules, metrics), and how
// each key of Type::section is written (a list of layers, a name or a mapping, a device string...).
// The JSON Schema (json_schema.h), docs/config.md (config_markdown.h) and `trainer help KEY`
// (key_help.h) are printed from it, so none of them lists a key of its own.
//
// The forms are the one thing written here: config.cc and layer_list.cc read those keys with code of
// their own, and building the tree fails (InternalError) for a section key this file does not
// describe.
#pragma once

#include <string>
#include <vector>

#include "lib/keys/key_spec.h"

namespace trainer {

struct ConfigNode {
  enum class Form {
    mapping,          // {key: value, ...}
    name_or_mapping,  // a variant's name alone stands for {variant_key: name} (loss: nll)
    device,           // a device string (lib/backend/device_spec.h) or the mapping
    bool_or_mapping,  // true, false or the mapping (data.augment.random_resized_crop)
    list,             // a list of children[0] (model.layers, metrics)
    named,            // a mapping of names the config chooses to children[0] (model.blocks)
    names,            // a list of names, or the path of a file with one name per line
    free_mapping,     // a mapping of any keys (a block's params)
  };
  std::string key;       // the key in its parent ("" for the root and for a list's items)
  std::string path;      // "data.train"; a list's item has its list's path, a named item NAME
  std::string doc;       // the declaring key's line
  std::string required;  // non-empty: the key must be given (the message when it is not)
  Form form = Form::mapping;
  // The mapping forms: keys every variant takes, in declaration order (those of Type::section have
  // a child each), and, when the other keys depend on one of them, that key and its variants.
  KeySpecs keys;
  std::string variant_key, variant_default;  // default "": the variant key is required
  KeyVariants variants;
  std::vector<ConfigNode> children;  // list, named: the item; mapping forms: one per section key
  bool layer_items = false;          // the items of a layer list: a type may also be a block's name
  bool block_values = false;         // inside model.blocks: any value may be a $parameter

  bool is_mapping() const;  // mapping, name_or_mapping, device or bool_or_mapping
  // The child of a section key; null when `key` is no section key of this node.
  const ConfigNode* child(const std::string& key) const;
};

// The tree, built on first use from the declarations.
const ConfigNode& config_tree();

}  // namespace trainer
