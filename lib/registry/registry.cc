#include "lib/registry/registry.h"

#include "lib/core/error.h"
#include "lib/core/printable.h"
#include "lib/keys/node_reader.h"

namespace trainer {

Registry& Registry::global() {
  static Registry* r = [] {
    auto* reg = new Registry;
    register_builtin_layers(*reg);
    return reg;
  }();
  return *r;
}

const KeySpecs& common_layer_keys() {
  static const KeySpecs keys{
      string_key("type", "", "a registered layer type (trainer help layers) or a block of model.blocks")
          .require("every layer needs a 'type', e.g. type: dense"),
      string_key("name", "",
                 "the layer's name, for inputs: and the weights' names (default: its type and a count, "
                 "dense_1)"),
      string_list_key("inputs",
                      "the layers whose outputs it takes, by name, or input (the model's); default: the "
                      "layer before it")};
  return keys;
}

KeyValues LayerEntry::read(NodeReader& r) const {
  std::vector<std::string> common;
  for (const KeySpec& k : common_layer_keys()) common.push_back(k.name);
  return read_keys(r, keys, common);
}

void Registry::add_layer(const std::string& type, std::string doc, KeySpecs keys, LayerFactory make,
                         LayerTraits traits) {
  if (layers_.count(type)) throw InternalError("layer type '" + type + "' registered twice");
  if (traits.activation_shortcut) {
    // Activations are registered first (lib/layers/register_layers.cc), so the list is complete.
    std::vector<std::string> allowed{"linear"};
    allowed.insert(allowed.end(), activations_.begin(), activations_.end());
    keys.push_back(choice_key("activation", "linear", allowed,
                              "an activation applied after the layer, added as a separate layer"));
  }
  if (traits.activation) activations_.push_back(type);
  LayerEntry e;
  e.type = type;
  e.doc = std::move(doc);
  e.keys = std::move(keys);
  e.traits = traits;
  e.make = std::move(make);
  layers_[type] = std::move(e);
}

void Registry::add_macro(const std::string& type, std::string doc, KeySpecs keys, LayerExpander expand) {
  if (layers_.count(type)) throw InternalError("layer type '" + type + "' registered twice");
  LayerEntry e;
  e.type = type;
  e.doc = std::move(doc);
  e.keys = std::move(keys);
  e.expand = std::move(expand);
  layers_[type] = std::move(e);
}

std::unique_ptr<Layer> LayerEntry::make_layer(NodeReader& r) const {
  if (!make) throw InternalError("layer type '" + type + "' is a macro, expanded by the model");
  return make(read(r));
}

void Registry::add_kernel(const std::string& type, const std::string& backend, KernelFactory make,
                          unsigned caps) {
  auto it = layers_.find(type);
  if (it == layers_.end())
    throw InternalError("kernel for unregistered layer type '" + type + "' (" + backend + ")");
  if (it->second.kernels.count(backend))
    throw InternalError("kernel '" + type + "' registered twice for " + backend);
  it->second.kernels[backend] = std::move(make);
  it->second.caps[backend] = caps;
}

unsigned Registry::kernel_caps(const std::string& type, const std::string& backend) const {
  auto it = layers_.find(type);
  if (it == layers_.end()) return 0;
  auto b = it->second.caps.find(backend);
  return b == it->second.caps.end() ? 0 : b->second;
}

std::vector<std::string> Registry::layer_types() const {
  std::vector<std::string> v;
  for (const auto& kv : layers_) v.push_back(kv.first);
  return v;
}

const LayerEntry& Registry::layer(const std::string& type, const std::string& where) const {
  auto it = layers_.find(type);
  if (it != layers_.end()) return it->second;
  std::vector<std::string> types = layer_types();
  std::string near = closest_match(type, types);
  std::string list;
  for (size_t i = 0; i < types.size(); ++i) list += (i ? ", " : "") + types[i];
  throw ConfigError(where + ": unknown layer type " + quoted(type) +
                    (near.empty() ? "" : " (did you mean '" + near + "'?)") + "; registered types: " + list);
}

std::unique_ptr<LayerKernel> Registry::make_kernel(const std::string& backend, const Layer& l,
                                                   const KernelContext& ctx) const {
  const LayerEntry& e = layer(l.type(), "model");
  auto it = e.kernels.find(backend);
  if (it == e.kernels.end())
    throw RuntimeError("layer '" + l.name() + "' of type '" + l.type() + "' has no " + backend +
                       " implementation in this build");
  return it->second(l, ctx);
}

}  // namespace trainer
