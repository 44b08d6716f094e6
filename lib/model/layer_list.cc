#include "lib/model/layer_list.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "lib/core/error.h"
#include "lib/keys/node_reader.h"
#include "lib/registry/registry.h"

namespace trainer {

const KeySpecs& block_keys() {
  static const KeySpecs keys{
      section_key("params",
                  "the block's parameters and their defaults, ~ for one every use must give; a layer's value "
                  "$name takes the use's value"),
      section_key("layers", "the block's layers; inputs: names its own layers, or input (the block's input)")
          .require("is required: a non-empty list of layers, e.g. - {type: conv2d, filters: $filters}"),
  };
  return keys;
}

namespace {

constexpr size_t kMaxBlockDepth = 16;
// Blocks that use blocks multiply: a bound on the expanded list, far above any real network
// (ResNet-152 has about 500 layers), checked before a block is expanded.
constexpr size_t kMaxLayers = 4096;

// One use of a block being expanded.
struct Scope {
  std::string prefix;                // "layer1.0."
  std::vector<InputRef> input;       // the block's input (one)
  size_t start = 0;                  // the first declaration of this use
  std::map<std::string, int> count;  // unnamed inner layers per type
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

class ListReader {
 public:
  ListReader(const std::string& file, const YAML::Node& blocks) : file_(file), blocks_(blocks) {
    if (!present(blocks)) return;
    scratch_["blocks"] = blocks;  // joins the document's memory once (see fresh())
    if (!blocks.IsMap())
      throw ConfigError(node_location(file, blocks) +
                        ": model.blocks: expected a mapping of block name: {params: {...}, layers: [...]}");
    const Registry& reg = Registry::global();
    for (auto it = blocks.begin(); it != blocks.end(); ++it) {
      const std::string name = it->first.Scalar(), path = "model.blocks." + name;
      if (reg.has_layer(name))
        throw ConfigError(node_location(file, it->first) + ": " + path + ": '" + name +
                          "' is a layer type; give the block another name");
      NodeReader br(it->second, path, file);
      read_keys(br, block_keys());  // params and layers (required); any other key is an error
      YAML::Node params = br.child("params"), layers = br.child("layers");
      if (present(params) && !params.IsMap())
        br.fail(
            "params",
            "expected a mapping of parameter: default (~ for a required one), e.g. {filters: ~, strides: 1}");
      for (auto p = params.begin(); present(params) && p != params.end(); ++p) {
        const std::string key = p->first.Scalar();
        if (key == "type" || key == "name" || key == "inputs")
          br.fail("params", "'" + key + "' is a key of every layer; name the parameter otherwise");
      }
      if (!layers.IsSequence() || layers.size() == 0)
        br.fail("layers", key_named(block_keys(), "layers").required);
      block_names_.push_back(name);
    }
  }

  std::vector<LayerDecl> out;

  void read_list(const YAML::Node& layers, const std::string& path, Scope* scope) {
    for (size_t i = 0; i < layers.size(); ++i) read_item(layers[i], path + "." + std::to_string(i), scope);
  }

 private:
  bool is_block(const std::string& type) const {
    return present(blocks_) &&
           std::find(block_names_.begin(), block_names_.end(), type) != block_names_.end();
  }

  // A name in scope: the block's input, or a layer (the block's own of that name, else the model's).
  void resolve(const std::string& name, Scope* scope, std::vector<InputRef>& refs) const {
    if (name == "input") {
      if (scope)
        refs.insert(refs.end(), scope->input.begin(), scope->input.end());
      else
        refs.push_back({"", InputRef::kModelInput, ""});
      return;
    }
    if (scope)
      refs.push_back({scope->prefix + name, InputRef::kByName, name});
    else
      refs.push_back({name, InputRef::kByName, ""});
  }

  // The name a layer gets inside `scope` (as written outside any block).
  std::string scoped(const std::string& name, const std::string& type, Scope* scope) const {
    if (!scope) return name;
    if (name.empty()) return scope->prefix + type + "_" + std::to_string(++scope->count[type]);
    return scope->prefix + name;
  }

  void read_item(const YAML::Node& node, const std::string& path, Scope* scope) {
    const Registry& reg = Registry::global();
    if (out.size() > kMaxLayers) too_many(node, path);
    NodeReader r(node, path, file_);
    if (!r.has("type")) r.fail_here("every layer needs a 'type', e.g. type: dense");
    const std::string type = r.string("type", "");
    const std::string name = r.string("name", "");
    std::vector<InputRef> inputs;
    if (r.has("inputs")) {
      const std::vector<std::string> names = r.string_list("inputs", {});
      if (names.empty())
        r.fail("inputs", "expected a non-empty list of layer names, e.g. inputs: [conv2d_1, input]");
      for (const std::string& n : names) resolve(n, scope, inputs);
    } else if (scope && out.size() == scope->start) {
      inputs = scope->input;  // a block's first layer takes the block's input
    }
    // A block's layer with a $param is a new mapping, without a position: its type has one.
    const YAML::Node anchor = node.Mark().is_null() && node["type"] ? node["type"] : node;
    const std::string where = node_location(file_, anchor) + ": " + path;
    if (is_block(type)) return use_block(r, type, name, inputs, scope);
    if (!reg.has_layer(type) && !block_names_.empty()) {
      std::vector<std::string> all = reg.layer_types();
      all.insert(all.end(), block_names_.begin(), block_names_.end());
      const std::string near = closest_match(type, all);
      throw ConfigError(node_location(file_, node["type"]) + ": " + path +
                        ".type: unknown layer type or block '" + type + "'" +
                        (near.empty() ? "" : " (did you mean '" + near + "'?)") +
                        "; blocks: " + join(block_names_) + "; registered types: " + join(reg.layer_types()));
    }
    const LayerEntry& entry = reg.layer(type, node_location(file_, node["type"]) + ": " + path + ".type");
    KeyValues values = entry.read(r);
    if (entry.expand) {  // a macro: with name: x, its layers are x_dense_1, x_relu_1, ...
      std::map<std::string, int> local;
      bool first = true;
      for (const YAML::Node& sub : entry.expand(values)) {
        NodeReader sr(sub, path, file_);
        const std::string sub_type = sr.string("type", "");
        const LayerEntry& sub_entry = reg.layer(sub_type, path);
        const std::string sub_name =
            name.empty() ? "" : name + "_" + sub_type + "_" + std::to_string(++local[sub_type]);
        out.push_back({&sub_entry, sub_type, scoped(sub_name, sub_type, scope), sub_entry.read(sr),
                       first ? inputs : std::vector<InputRef>{}, where, scope != nullptr});
        first = false;
      }
      return;
    }
    const std::string activation = entry.traits.activation_shortcut ? values.string("activation") : "linear";
    out.push_back(
        {&entry, type, scoped(name, type, scope), std::move(values), inputs, where, scope != nullptr});
    if (activation != "linear") {  // Keras' `activation:` shortcut: a separate activation layer
      YAML::Node empty(YAML::NodeType::Map);
      NodeReader ar(empty, path + ".activation", file_);
      const LayerEntry& act = reg.layer(activation, path);
      out.push_back({&act,
                     activation,
                     scoped(name.empty() ? "" : name + "_" + activation, activation, scope),
                     act.read(ar),
                     {},
                     where,
                     scope != nullptr});
    }
  }

  [[noreturn]] void too_many(const YAML::Node& node, const std::string& path) const {
    throw ConfigError(node_location(file_, node) + ": " + path + ": the model would have more than " +
                      std::to_string(kMaxLayers) + " layers once its blocks are expanded");
  }

  // At most how many layers a use of `block` expands to (an mlp up to 127, any other layer 2 with
  // its activation), without expanding it; a block that uses itself counts 0 (use_block says so).
  size_t expanded_size(const std::string& block, std::vector<std::string>& active) const {
    if (std::find(active.begin(), active.end(), block) != active.end()) return 0;
    active.push_back(block);
    size_t n = 0;
    const YAML::Node layers = blocks_[block]["layers"];
    for (size_t i = 0; i < layers.size() && n <= kMaxLayers; ++i) {
      const YAML::Node type = layers[i].IsMap() ? layers[i]["type"] : YAML::Node();
      const std::string t = type && type.IsScalar() ? type.Scalar() : "";
      n += is_block(t) ? expanded_size(t, active) : t == "mlp" ? 127 : 2;
    }
    active.pop_back();
    return n;
  }

  // True when a "$param" scalar occurs in `node`.
  static bool has_parameter(const YAML::Node& node) {
    if (node.IsScalar()) return node.Scalar().size() >= 2 && node.Scalar()[0] == '$';
    if (node.IsSequence())
      for (size_t i = 0; i < node.size(); ++i)
        if (has_parameter(node[i])) return true;
    if (node.IsMap())
      for (auto it = node.begin(); it != node.end(); ++it)
        if (has_parameter(it->second)) return true;
    return false;
  }

  // `node` with every "$param" value replaced by the use's value (shared, unchanged subtrees keep
  // their positions in the file).
  YAML::Node substitute(const YAML::Node& node, const std::map<std::string, YAML::Node>& values,
                        const std::string& path) {
    if (!has_parameter(node)) return node;  // shared: no YAML allocation
    if (node.IsScalar()) {
      const std::string& s = node.Scalar();
      if (s.size() < 2 || s[0] != '$') return node;
      auto it = values.find(s.substr(1));
      if (it != values.end()) return it->second;
      std::vector<std::string> names;
      for (const auto& kv : values) names.push_back("$" + kv.first);
      throw ConfigError(node_location(file_, node) + ": " + path + ": unknown block parameter '" + s +
                        "'; the block's params: " + (names.empty() ? "none" : join(names)));
    }
    if (node.IsSequence()) {
      YAML::Node seq = fresh();
      bool changed = false;
      for (size_t i = 0; i < node.size(); ++i) {
        YAML::Node v = substitute(node[i], values, path);
        changed |= !v.is(node[i]);
        seq.push_back(v);
      }
      return changed ? seq : node;
    }
    if (node.IsMap()) {
      YAML::Node map = fresh();
      bool changed = false;
      for (auto it = node.begin(); it != node.end(); ++it) {
        YAML::Node v = substitute(it->second, values, path + "." + it->first.Scalar());
        changed |= !v.is(it->second);
        map[it->first.Scalar()] = v;
      }
      return changed ? map : node;
    }
    return node;
  }

  void use_block(NodeReader& r, const std::string& block, const std::string& name,
                 const std::vector<InputRef>& inputs, Scope* outer) {
    if (std::find(active_.begin(), active_.end(), block) != active_.end())
      r.fail("type", "block '" + block + "' uses itself (a block may use other blocks, not itself)");
    if (active_.size() >= kMaxBlockDepth) {  // a limit, not a cycle: say which
      std::string chain;
      for (const std::string& b : active_) chain += b + " \u2192 ";
      r.fail("type", "blocks are nested more than " + std::to_string(kMaxBlockDepth) + " deep (" + chain +
                         block + "); a model needs a few levels");
    }
    const YAML::Node def = blocks_[block];
    const YAML::Node params = def["params"];
    std::map<std::string, YAML::Node> values;
    r.accept({"inputs"});
    for (auto p = params.begin(); present(params) && p != params.end(); ++p) r.accept({p->first.Scalar()});
    for (auto p = params.begin(); present(params) && p != params.end(); ++p) {
      const std::string key = p->first.Scalar();
      if (r.has(key))
        values[key] = r.child(key);
      else if (present(p->second))
        values[key] = p->second;
      else
        r.fail_here("block '" + block + "' needs '" + key + "' (a parameter without a default)");
    }
    r.finish();  // a key that is not a parameter of the block: the allowed ones are listed
    std::vector<std::string> active = active_;
    if (out.size() + expanded_size(block, active) > kMaxLayers) too_many(def, "model.blocks." + block);
    Scope s;
    const std::string use = name.empty() && !outer ? block + "_" + std::to_string(++uses_[block]) : name;
    s.prefix = scoped(use, block, outer) + ".";
    s.input = inputs;
    if (s.input.empty())
      s.input.push_back(out.empty() ? InputRef{"", InputRef::kModelInput, ""}
                                    : InputRef{"", int(out.size()) - 1, ""});
    if (s.input.size() != 1)
      r.fail("inputs", "a block takes one input, got " + std::to_string(s.input.size()));
    s.start = out.size();
    const YAML::Node layers = def["layers"];
    active_.push_back(block);
    const std::string block_path = "model.blocks." + block + ".layers";
    for (size_t i = 0; i < layers.size(); ++i) {
      const std::string item_path = block_path + "." + std::to_string(i);
      read_item(substitute(layers[i], values, item_path), item_path, &s);
    }
    active_.pop_back();
  }

  const std::string& file_;
  YAML::Node blocks_;
  // yaml-cpp merges the memory of two nodes when one becomes the child of the other, copying the
  // child's set of nodes into the parent's: a new YAML::Node per substituted layer would copy the
  // whole document each time (quadratic in the model). Nodes made as children of this scratch
  // mapping share the document's memory from the start, so building them costs their own size.
  YAML::Node scratch_{YAML::NodeType::Map};
  size_t fresh_count_ = 0;
  YAML::Node fresh() { return scratch_["node " + std::to_string(++fresh_count_)]; }
  std::vector<std::string> block_names_, active_;
  std::map<std::string, int> uses_;
};

}  // namespace

std::vector<LayerDecl> read_layer_list(const YAML::Node& layers, const std::string& file,
                                       const YAML::Node& blocks) {
  if (!present(layers) || !layers.IsSequence() || layers.size() == 0)
    throw ConfigError(node_location(file, layers) + ": model.layers: expected a non-empty list of layers");
  // The substituted block layers are new nodes in the document's memory (see ListReader::fresh),
  // and yaml-cpp adds them to one std::set shared by every node of that document, unlocked. The
  // replicas of one process (--device gpu:0,1) each build their model from the same Config at the
  // same time, so readers take turns: two of them corrupted the set (a crash in the thread of
  // replica 1, vgg11_bn_cifar on 2 GPUs, about one start in two).
  static std::mutex one_reader;
  const std::lock_guard<std::mutex> turn(one_reader);
  ListReader reader(file, blocks);
  reader.read_list(layers, "model.layers", nullptr);
  return std::move(reader.out);
}

}  // namespace trainer
