#include "lib/schema/key_help.h"

#include <algorithm>

#include "lib/core/error.h"
#include "lib/core/printable.h"
#include "lib/keys/node_reader.h"
#include "lib/schema/config_tree.h"
#include "lib/schema/key_text.h"

namespace trainer {
namespace {

using Form = ConfigNode::Form;

std::string joined(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string padded(const std::string& s, size_t width) {
  return s.size() + 1 >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// "filters (required), strides = [1, 1], padding = valid"
std::string key_summary(const KeySpecs& keys) {
  if (keys.empty()) return "no keys of its own";
  std::string s;
  for (const KeySpec& k : keys) {
    const std::string def = default_text(k);
    s += (s.empty() ? "" : ", ") + k.name +
         (!k.required.empty() ? " (required)"
          : def.empty()       ? std::string()
                              : " = " + def);
  }
  return s;
}

// What a key's value may be, and its default.
std::string key_value(const KeySpec& k, const ConfigNode* section) {
  std::string value = section ? form_text(*section) : value_text(k);
  const std::string def = default_text(k);
  if (!k.required.empty()) return value + "; required";
  return def.empty() ? value : value + "; default " + def;
}

// One key of a listing, two lines: its value and default, then its meaning.
std::string key_entry(const KeySpec& k, const ConfigNode* section, const std::string& indent) {
  return indent + padded(k.name, 24) + key_value(k, section) + "\n" + indent + std::string(24, ' ') + k.doc +
         "\n";
}

// A variant key's values, each with its line and its keys.
std::string variant_listing(const ConfigNode& n, const std::string& indent) {
  size_t width = 0;
  for (const KeyVariant& v : n.variants) width = std::max(width, v.name.size() + 2);
  std::string s;
  for (const KeyVariant& v : n.variants) {
    s += indent + padded(v.name, width) + (v.doc.empty() ? "" : v.doc) + "\n";
    s += indent + std::string(width, ' ') + "keys: " + key_summary(v.keys) + "\n";
  }
  return s;
}

std::string section_help(const ConfigNode& n, const std::string& path) {
  std::string s =
      (path.empty() ? std::string("the config") : path) + (n.doc.empty() ? "" : ": " + n.doc) + "\n";
  if (n.form != Form::mapping) s += "  written as " + form_text(n) + "\n";
  const ConfigNode& m = n.form == Form::list || n.form == Form::named ? n.children[0] : n;
  if (&m != &n && m.form != Form::mapping) s += "  each item: " + form_text(m) + "\n";
  if (!m.keys.empty()) {
    s += m.layer_items ? "  keys of every layer:\n" : "  keys:\n";
    for (const KeySpec& k : m.keys) s += key_entry(k, m.child(k.name), "    ");
  }
  if (!m.variant_key.empty()) {
    s += "  " + m.variant_key + ": one of these" +
         (m.variant_default.empty() ? std::string() : " (default " + m.variant_default + ")") + ":\n";
    s += variant_listing(m, "    ");
  }
  return s;
}

// Where a key of the request is declared.
struct Hit {
  std::string path;
  const ConfigNode* node = nullptr;  // the mapping (or section) it belongs to
  const KeySpec* key = nullptr;      // a plain key; null: the section `node` itself
  const KeyVariant* variant = nullptr;
  bool variant_key = false;  // node's variant key (optimizer.type)
};

void find(const ConfigNode& n, const std::vector<std::string>& segs, size_t i, const std::string& path,
          const KeyVariant* only, std::vector<Hit>& hits) {
  if (i == segs.size()) {
    hits.push_back({path, &n, nullptr, only, false});
    return;
  }
  if (n.form == Form::list)
    return find(n.children[0], segs, all_digits(segs[i]) ? i + 1 : i, path, only, hits);
  if (n.form == Form::named) return find(n.children[0], segs, i + 1, joined(path, segs[i]), only, hits);
  if (!n.is_mapping()) return;
  const std::string& seg = segs[i];
  const bool last = i + 1 == segs.size();
  const std::string p = joined(path, seg);
  if (!n.variant_key.empty()) {
    if (seg == n.variant_key && last) return hits.push_back({p, &n, nullptr, nullptr, true});
    if (!only)
      for (const KeyVariant& v : n.variants)
        if (v.name == seg) return find(n, segs, i + 1, path, &v, hits);
  }
  for (const KeySpec& k : n.keys)
    if (k.name == seg) {
      if (const ConfigNode* c = n.child(seg)) return find(*c, segs, i + 1, p, nullptr, hits);
      if (last) hits.push_back({p, &n, &k, nullptr, false});
      return;
    }
  if (!last) return;
  for (const KeyVariant& v : n.variants)
    if (!only || only == &v)
      for (const KeySpec& k : v.keys)
        if (k.name == seg) hits.push_back({p, &n, &k, &v, false});
}

// Every key path, for did-you-mean.
void collect(const ConfigNode& n, const std::string& path, std::vector<std::string>& out) {
  if (n.form == Form::list) return collect(n.children[0], path, out);
  if (n.form == Form::named) return collect(n.children[0], joined(path, "NAME"), out);
  if (!n.is_mapping()) return;
  if (!n.variant_key.empty()) out.push_back(joined(path, n.variant_key));
  for (const KeySpec& k : n.keys) {
    out.push_back(joined(path, k.name));
    if (const ConfigNode* c = n.child(k.name)) collect(*c, joined(path, k.name), out);
  }
  for (const KeyVariant& v : n.variants)
    for (const KeySpec& k : v.keys) out.push_back(joined(path, k.name));
}

const ConfigNode& layer_item() { return config_tree().child("model")->child("layers")->children[0]; }

std::string render(const std::vector<Hit>& hits) {
  const Hit& h = hits.front();
  if (!h.key && h.variant_key) {
    const ConfigNode& n = *h.node;
    return h.path + ": one of these" +
           (n.variant_default.empty() ? std::string() : " (default " + n.variant_default + ")") + "\n" +
           variant_listing(n, "  ");
  }
  if (!h.key && h.variant) {
    const std::string where = h.node->path + " " + h.node->variant_key + " " + h.variant->name;
    std::string s = where + (h.variant->doc.empty() ? "" : ": " + h.variant->doc) + "\n";
    if (h.variant->keys.empty()) s += "  no keys of its own\n";
    for (const KeySpec& k : h.variant->keys) s += key_entry(k, nullptr, "  ");
    if (h.node->layer_items) s += "  every layer also takes: " + key_summary(h.node->keys) + "\n";
    return s;
  }
  if (!h.key) return section_help(*h.node, h.path);
  // A plain key, possibly declared by several variants: one entry per distinct declaration.
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // entry -> variants
  for (const Hit& x : hits) {
    const std::string entry = key_value(*x.key, nullptr) + "\n  " + x.key->doc + "\n";
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == entry; });
    if (it == groups.end()) groups.push_back({entry, {}}), it = groups.end() - 1;
    if (x.variant) it->second.push_back(x.variant->name);
  }
  std::string s;
  for (const auto& g : groups) {
    std::string head = h.path;
    if (!g.second.empty()) {
      head += " (" + h.node->variant_key + " ";
      for (size_t i = 0; i < g.second.size(); ++i) head += (i ? ", " : "") + g.second[i];
      head += ")";
    }
    s += head + ": " + g.first;
  }
  return s;
}

}  // namespace

std::string help_topics() {
  return "trainer help layers        the layer types, their keys and one line each\n"
         "trainer help config        every key of a config, section by section (docs/config.md)\n"
         "trainer help KEY           one key or section, e.g. optimizer.nesterov, data.train.format,\n"
         "                           model.layers, conv2d, conv2d.padding, schedule.type\n"
         "trainer schema             the config's JSON Schema (docs/trainer.schema.json), for editors\n";
}

std::string layer_listing() {
  const ConfigNode& item = layer_item();
  return "Layer types: each item of model.layers is {type: TYPE, ...keys}\n" + variant_listing(item, "  ") +
         "Every layer also takes: " + key_summary(item.keys) +
         ". model.blocks defines blocks used like a type.\n"
         "trainer help TYPE.KEY prints one key, e.g. trainer help conv2d.padding\n";
}

std::string key_help(const std::string& key) {
  std::vector<std::string> segs;
  for (size_t begin = 0;;) {
    const size_t dot = key.find('.', begin);
    segs.push_back(key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin));
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  std::vector<Hit> hits;
  if (std::none_of(segs.begin(), segs.end(), [](const std::string& s) { return s.empty(); })) {
    const ConfigNode& item = layer_item();
    const auto type = std::find_if(item.variants.begin(), item.variants.end(),
                                   [&](const KeyVariant& v) { return v.name == segs[0]; });
    if (type != item.variants.end())  // conv2d.padding: model.layers.conv2d.padding
      find(item, segs, 1, item.path, &*type, hits);
    else
      find(config_tree(), segs, 0, "", nullptr, hits);
  }
  if (!hits.empty()) return render(hits);
  std::vector<std::string> known{"layers", "config"};
  collect(config_tree(), "", known);
  for (const KeyVariant& v : layer_item().variants) {
    known.push_back(v.name);
    for (const KeySpec& k : v.keys) known.push_back(v.name + "." + k.name);
  }
  const std::string near = closest_match(key, known);
  throw UsageError("unknown config key " + quoted(key) +
                   (near.empty() ? "" : " (did you mean '" + near + "'?)") +
                   "; 'trainer help config' lists every key, 'trainer help layers' the layer types");
}

}  // namespace trainer
