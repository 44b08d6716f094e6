#include "lib/schema/config_tree.h"

#include "lib/config/config_keys.h"
#include "lib/config/device_section.h"
#include "lib/core/error.h"
#include "lib/data/data_sources.h"
#include "lib/losses/losses.h"
#include "lib/model/layer_list.h"
#include "lib/optim/optimizer.h"
#include "lib/registry/registry.h"

namespace trainer {
namespace {

using Form = ConfigNode::Form;

std::string joined(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

ConfigNode section(const std::string& parent, const KeySpec& k);

// A mapping node whose keys are `keys`; a child for each section key among them.
ConfigNode mapping(Form form, const std::string& path, const KeySpecs& keys, bool in_block) {
  ConfigNode n;
  n.form = form;
  n.path = path;
  n.keys = keys;
  n.block_values = in_block;
  for (const KeySpec& k : keys)
    if (k.type == KeySpec::Type::section) n.children.push_back(section(path, k));
  return n;
}

ConfigNode with_variants(ConfigNode n, const std::string& key, const std::string& def,
                         const KeyVariants& variants) {
  n.variant_key = key;
  n.variant_default = def;
  n.variants = variants;
  for (const KeyVariant& v : variants)
    for (const KeySpec& k : v.keys)
      if (k.type == KeySpec::Type::section)
        throw InternalError("'" + joined(n.path, k.name) + "' of " + key + " " + v.name +
                            " is a section key; lib/schema/config_tree.cc has no form for it");
  return n;
}

// An item of model.layers (or of a block's layers): the common keys, then the type's own.
ConfigNode layer_item(const std::string& path, bool in_block) {
  const Registry& reg = Registry::global();
  KeyVariants types;
  for (const std::string& t : reg.layer_types()) {
    const LayerEntry& e = reg.layer(t, path);
    types.push_back({t, e.keys, e.doc});
  }
  ConfigNode item =
      with_variants(mapping(Form::mapping, path, common_layer_keys(), in_block), "type", "", types);
  item.layer_items = true;
  return item;
}

ConfigNode list_of(ConfigNode item) {
  ConfigNode n;
  n.form = Form::list;
  n.path = item.path;
  n.block_values = item.block_values;
  n.children.push_back(std::move(item));
  return n;
}

// The node of the section key `k` of the mapping at `parent`: its form and its keys.
ConfigNode describe(const std::string& parent, const KeySpec& k) {
  const std::string path = joined(parent, k.name);
  if (path == "model") return mapping(Form::mapping, path, model_keys(), false);
  if (path == "loss")
    return with_variants(mapping(Form::name_or_mapping, path, {}, false), "type", kDefaultLoss,
                         LossRegistry::global().variants());
  if (path == "optimizer")
    return with_variants(mapping(Form::mapping, path, {}, false), "type", kDefaultOptimizer,
                         optimizer_keys());
  if (path == "metrics")
    return list_of(with_variants(mapping(Form::name_or_mapping, path, {}, false), "type", kDefaultMetric,
                                 metric_keys()));
  if (path == "data") return mapping(Form::mapping, path, data_keys(), false);
  if (path == "train") return mapping(Form::mapping, path, train_keys(), false);
  if (path == "device") return mapping(Form::device, path, device_keys(), false);
  if (path == "early_stopping") return mapping(Form::mapping, path, early_stopping_keys(), false);
  if (path == "checkpoint") return mapping(Form::mapping, path, checkpoint_keys(), false);
  if (path == "schedule")
    return with_variants(mapping(Form::name_or_mapping, path, {}, false), "type", kDefaultSchedule,
                         schedule_keys());
  if (path == "pipeline") return mapping(Form::mapping, path, pipeline_keys(), false);
  if (path == "model.layers") return list_of(layer_item(path, false));
  if (path == "model.blocks") {
    ConfigNode n;
    n.form = Form::named;
    n.path = path;
    n.children.push_back(mapping(Form::mapping, "model.blocks.NAME", block_keys(), true));
    return n;
  }
  if (path == "model.blocks.NAME.params") {
    ConfigNode n;
    n.form = Form::free_mapping;
    n.path = path;
    return n;
  }
  if (path == "model.blocks.NAME.layers") return list_of(layer_item(path, true));
  if (path == "data.train" || path == "data.validation")
    return with_variants(mapping(Form::mapping, path, {}, false), "format", kDefaultDataFormat,
                         data_source_keys());
  if (path == "data.class_names") {
    ConfigNode n;
    n.form = Form::names;
    n.path = path;
    return n;
  }
  if (path == "data.split") return mapping(Form::mapping, path, split_keys(), false);
  if (path == "data.normalize") return mapping(Form::mapping, path, normalize_keys(), false);
  if (path == "data.augment") return mapping(Form::mapping, path, augment_keys(), false);
  if (path == "data.augment.random_resized_crop")
    return mapping(Form::bool_or_mapping, path, random_resized_crop_keys(), false);
  throw InternalError("config key '" + path +
                      "' is declared a section (a value of its own form); lib/schema/config_tree.cc does "
                      "not say which form");
}

ConfigNode section(const std::string& parent, const KeySpec& k) {
  ConfigNode n = describe(parent, k);
  n.key = k.name;
  n.doc = k.doc;
  n.required = k.required;
  return n;
}

}  // namespace

bool ConfigNode::is_mapping() const {
  return form == Form::mapping || form == Form::name_or_mapping || form == Form::device ||
         form == Form::bool_or_mapping;
}

const ConfigNode* ConfigNode::child(const std::string& name) const {
  if (!is_mapping()) return nullptr;
  for (const ConfigNode& c : children)
    if (c.key == name) return &c;
  return nullptr;
}

const ConfigNode& config_tree() {
  static const ConfigNode root = [] {
    ConfigNode n = mapping(Form::mapping, "", root_keys(), false);
    n.doc = "a training run: the model, the loss, the optimizer, the data and how to train";
    return n;
  }();
  return root;
}

}  // namespace trainer
