#include "lib/keys/key_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "lib/core/error.h"
#include "lib/core/printable.h"

namespace trainer {

KeySpec KeySpec::require(std::string message) const {
  KeySpec k = *this;
  k.required = std::move(message);
  k.def = YAML::Node();
  return k;
}

static KeySpec make(std::string name, KeySpec::Type type, std::string doc) {
  KeySpec k;
  k.name = std::move(name);
  k.type = type;
  k.doc = std::move(doc);
  return k;
}

KeySpec integer_key(std::string name, int64_t def, int64_t lo, int64_t hi, std::string doc) {
  KeySpec k = make(std::move(name), KeySpec::Type::integer, std::move(doc));
  k.ilo = lo, k.ihi = hi, k.def = YAML::Node(def);
  return k;
}

KeySpec number_key(std::string name, double def, double lo, double hi, std::string doc) {
  KeySpec k = make(std::move(name), KeySpec::Type::number, std::move(doc));
  k.lo = lo, k.hi = hi, k.def = YAML::Node(def);
  return k;
}

KeySpec bool_key(std::string name, bool def, std::string doc) {
  KeySpec k = make(std::move(name), KeySpec::Type::boolean, std::move(doc));
  k.def = YAML::Node(def);
  return k;
}

KeySpec string_key(std::string name, std::string def, std::string doc) {
  KeySpec k = make(std::move(name), KeySpec::Type::string, std::move(doc));
  if (!def.empty()) k.def = YAML::Node(def);
  return k;
}

KeySpec char_key(std::string name, std::string def, std::string doc) {
  KeySpec k = make(std::move(name), KeySpec::Type::character, std::move(doc));
  k.def = YAML::Node(def);
  return k;
}

KeySpec choice_key(std::string name, std::string def, std::vector<std::string> allowed, std::string doc) {
  KeySpec k = make(std::move(name), KeySpec::Type::choice, std::move(doc));
  k.allowed = std::move(allowed);
  k.def = YAML::Node(def);
  return k;
}

KeySpec string_list_key(std::string name, std::string doc) {
  return make(std::move(name), KeySpec::Type::string_list, std::move(doc));
}

KeySpec size_key(std::string name, int64_t def, int64_t lo, int64_t hi, std::string doc) {
  KeySpec k = make(std::move(name), KeySpec::Type::size, std::move(doc));
  k.ilo = lo, k.ihi = hi;
  if (def > 0) k.def = YAML::Node(def);
  return k;
}

KeySpec size_pair_key(std::string name, int64_t def, int64_t lo, int64_t hi, std::string doc) {
  KeySpec k = make(std::move(name), KeySpec::Type::size_pair, std::move(doc));
  k.ilo = lo, k.ihi = hi;
  if (def > 0) k.def = YAML::Node(std::vector<int64_t>{def, def});
  return k;
}

KeySpec padding_key(std::string doc) {
  KeySpec k = make("padding", KeySpec::Type::padding, std::move(doc));
  k.ilo = 0, k.ihi = 1 << 16;
  k.def = YAML::Node("valid");
  return k;
}

KeySpec image_size_key(std::string name, int64_t lo, int64_t hi, std::string doc) {
  KeySpec k = make(std::move(name), KeySpec::Type::image_size, std::move(doc));
  k.ilo = lo;
  k.ihi = hi;
  return k;
}

KeySpec mapping_key(std::string name, std::string doc) {
  return make(std::move(name), KeySpec::Type::mapping, std::move(doc));
}

KeySpec integer_list_key(std::string name, int64_t lo, int64_t hi, std::string doc) {
  KeySpec k = make(std::move(name), KeySpec::Type::integer_list, std::move(doc));
  k.ilo = lo, k.ihi = hi;
  return k;
}

KeySpec number_list_key(std::string name, std::vector<double> def, double lo, double hi, std::string doc) {
  KeySpec k = make(std::move(name), KeySpec::Type::number_list, std::move(doc));
  k.lo = lo, k.hi = hi;
  if (!def.empty()) k.def = YAML::Node(def);
  return k;
}

KeySpec choice_or_number_key(std::string name, std::string def, std::vector<std::string> allowed, double lo,
                             double hi, std::string doc) {
  KeySpec k = make(std::move(name), KeySpec::Type::choice_or_number, std::move(doc));
  k.allowed = std::move(allowed);
  k.lo = lo, k.hi = hi;
  k.def = YAML::Node(def);
  return k;
}

KeySpec section_key(std::string name, std::string doc) {
  return make(std::move(name), KeySpec::Type::section, std::move(doc));
}

const KeySpec& key_named(const KeySpecs& keys, const std::string& name) {
  for (const KeySpec& k : keys)
    if (k.name == name) return k;
  throw InternalError("no key '" + name + "' is declared here");
}

// A bound in a message: 1e-30, 1e+38, 0.5 (yaml-cpp writes 1e-30 with 17 digits).
static std::string bound(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

static std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

// One key through NodeReader's typed getters, which produce the messages; its value (or default)
// lands in r.resolved().
static void read_key(NodeReader& r, const KeySpec& k) {
  const std::string& key = k.name;
  if (!r.has(key)) {
    if (!k.required.empty()) r.fail(key, k.required);
    r.accept({key});
    if (k.def.IsDefined() && !k.def.IsNull()) r.resolved()[key] = YAML::Clone(k.def);
    return;
  }
  switch (k.type) {
    case KeySpec::Type::integer:
      r.integer(key, 0, k.ilo, k.ihi);
      return;
    case KeySpec::Type::number: {
      const double v = r.number(key, 0, k.lo, k.hi);
      if (std::abs(v) < k.min_magnitude)  // a scale of 0 (or 1e-50, 0 in float) would erase the data
        r.fail(key, "value " + r.child(key).Scalar() + " is out of range; allowed: a non-zero number, " +
                        bound(k.min_magnitude) + " to " + bound(k.hi) + " in magnitude");
      return;
    }
    case KeySpec::Type::boolean:
      r.boolean(key, false);
      return;
    case KeySpec::Type::string:
      r.string(key, "");
      return;
    case KeySpec::Type::character:
      if (r.string(key, "").size() != 1) r.fail(key, "must be a single character");
      return;
    case KeySpec::Type::choice:
      r.choice(key, "", k.allowed);
      return;
    case KeySpec::Type::string_list:
      r.resolved()[key] = r.string_list(key, {});
      return;
    case KeySpec::Type::integer_list:
      r.resolved()[key] = r.integer_list(key, {}, k.ilo, k.ihi);
      return;
    case KeySpec::Type::number_list:
      r.resolved()[key] = r.number_list(key, {}, k.lo, k.hi);
      return;
    case KeySpec::Type::size: {
      const std::vector<int64_t> v = r.integer_list(key, {}, k.ilo, k.ihi);
      if (v.size() != 1) r.fail(key, "expected an integer (1-D layers take one size), e.g. " + key + ": 3");
      r.resolved()[key] = v[0];
      return;
    }
    case KeySpec::Type::size_pair: {
      std::vector<int64_t> v = r.integer_list(key, {}, k.ilo, k.ihi);
      if (v.size() == 1) v.push_back(v[0]);
      if (v.size() != 2) r.fail(key, "expected an integer or a [height, width] pair");
      r.resolved()[key] = v;
      return;
    }
    case KeySpec::Type::image_size: {
      const YAML::Node n = r.child(key);
      if (n.IsMap()) {
        NodeReader sub(n, r.key_path(key), r.file());
        if (!sub.has("shorter"))
          sub.fail_here("expected {shorter: S} (the shorter side becomes S) or an [height, width] pair");
        sub.integer("shorter", 0, k.ilo, k.ihi);
        sub.finish();
        r.resolved()[key] = sub.resolved();
        return;
      }
      std::vector<int64_t> v = r.integer_list(key, {}, k.ilo, k.ihi);
      if (v.size() == 1) v.push_back(v[0]);
      if (v.size() != 2) r.fail(key, "expected an [height, width] pair or {shorter: S}");
      r.resolved()[key] = v;
      return;
    }
    case KeySpec::Type::mapping: {
      const YAML::Node m = r.child(key);
      if (!m.IsMap()) r.fail(key, "expected a mapping, e.g. " + key + ": {...}");
      r.resolved()[key] = YAML::Clone(m);
      return;
    }
    case KeySpec::Type::choice_or_number: {
      const std::string s = r.string(key, "");
      if (std::find(k.allowed.begin(), k.allowed.end(), s) != k.allowed.end()) return;
      double v = 0;
      if (!YAML::convert<double>::decode(r.child(key), v) || !(v >= k.lo && v <= k.hi))
        r.fail(key, quoted(s) + " is not allowed; allowed: " + join(k.allowed) + ", or a number from " +
                        bound(k.lo) + " to " + bound(k.hi));
      return;
    }
    case KeySpec::Type::section:
      r.accept({key});
      return;
    case KeySpec::Type::padding: {
      const std::string s = r.string(key, "");
      if (s != "valid" && s != "same") r.integer(key, 0, k.ilo, k.ihi);
      return;
    }
  }
}

KeyValues read_keys(NodeReader& r, const KeySpecs& keys, const std::vector<std::string>& also_known) {
  r.accept(also_known);
  for (const KeySpec& k : keys) read_key(r, k);
  r.finish();
  return KeyValues(r);
}

KeyValues read_variant(NodeReader& r, const std::string& key, const std::string& def,
                       const KeyVariants& variants) {
  std::vector<std::string> names;
  for (const KeyVariant& v : variants) names.push_back(v.name);
  const std::string name = r.choice(key, def, names);
  for (const KeyVariant& v : variants)
    if (v.name == name) return read_keys(r, v.keys);
  throw InternalError("variant '" + name + "' of '" + r.key_path(key) + "' has no keys");
}

bool KeyValues::has(const std::string& key) const {
  const YAML::Node& n = reader_.resolved();
  return bool(n[key]);
}

YAML::Node KeyValues::at(const std::string& key) const {
  const YAML::Node& n = reader_.resolved();
  YAML::Node v = n[key];
  if (!v) throw InternalError("config key '" + reader_.key_path(key) + "' read but not declared or given");
  return v;
}

int64_t KeyValues::integer(const std::string& key) const { return at(key).as<int64_t>(); }
double KeyValues::number(const std::string& key) const { return at(key).as<double>(); }
bool KeyValues::boolean(const std::string& key) const { return at(key).as<bool>(); }
std::string KeyValues::string(const std::string& key) const { return at(key).Scalar(); }
std::vector<int64_t> KeyValues::integers(const std::string& key) const {
  return at(key).as<std::vector<int64_t>>();
}
std::vector<double> KeyValues::numbers(const std::string& key) const {
  return at(key).as<std::vector<double>>();
}
YAML::Node KeyValues::node(const std::string& key) const { return at(key); }
std::vector<std::string> KeyValues::strings(const std::string& key) const {
  return at(key).as<std::vector<std::string>>();
}

}  // namespace trainer
