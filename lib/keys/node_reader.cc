#include "lib/keys/node_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>

#include "lib/core/error.h"
#include "lib/core/printable.h"

namespace trainer {

std::string node_location(const std::string& file, const YAML::Node& node) {
  if (!node.IsDefined() || node.Mark().is_null()) return "--set";
  return file + ":" + std::to_string(node.Mark().line + 1) + ":" + std::to_string(node.Mark().column + 1);
}

static size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  // Accept up to a third of the word's length in edits (at least 2): "epoch" -> "epochs".
  size_t limit = std::max<size_t>(2, word.size() / 3);
  return best_d <= limit ? best : "";
}

static std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

NodeReader::NodeReader(const YAML::Node& node, std::string path, std::string file)
    : node_(node), path_(std::move(path)), file_(std::move(file)) {
  if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap())
    throw ConfigError(node_location(file_, node_) + ": '" + (path_.empty() ? "<root>" : path_) +
                      "' must be a mapping of key: value pairs");
}

std::string NodeReader::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void NodeReader::fail(const std::string& key, const std::string& what) const {
  YAML::Node n = (node_.IsMap() && node_[key]) ? node_[key] : node_;
  throw ConfigError(node_location(file_, n) + ": " + key_path(key) + ": " + what);
}

void NodeReader::fail_here(const std::string& what) const {
  throw ConfigError(node_location(file_, node_) + ": " + (path_.empty() ? "config" : path_) + ": " + what);
}

bool NodeReader::has(const std::string& key) const {
  return node_.IsMap() && node_[key] && !node_[key].IsNull();
}

YAML::Node NodeReader::get(const std::string& key) {
  known_.insert(key);
  if (!node_.IsMap()) return YAML::Node();
  YAML::Node n = node_[key];
  if (!n || n.IsNull()) return YAML::Node();
  return n;
}

std::string NodeReader::scalar_text(const YAML::Node& n) const {
  if (n.IsScalar()) return quoted(n.Scalar());
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

// A range's bound as a message shows it: the shortest text that reads back (1e-12, not
// 9.9999999999999998e-13; 1, not 1.0).
static std::string bound_text(double v) {
  char buf[400];  // a double's fixed form has at most 309 + 17 digits
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  if (res.ec == std::errc() && res.ptr - buf <= 12) return std::string(buf, res.ptr);
  res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

double NodeReader::number(const std::string& key, double def, double lo, double hi) {
  YAML::Node n = get(key);
  if (!n || n.IsNull()) return resolved_[key] = def, def;
  double v;
  if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v))
    fail(key, "expected a number, got " + scalar_text(n));
  if (v < lo || v > hi)
    fail(key, "value " + n.Scalar() + " is out of range; allowed: [" + bound_text(lo) + ", " +
                  bound_text(hi) + "]");
  resolved_[key] = v;
  return v;
}

// An integer as YAML 1.2's core schema reads it: [-+]?[0-9]+ is decimal, leading zeros included
// ("032" is 32: yaml-cpp's own decoding, YAML 1.1's, reads it as octal 26 and refuses "0128"),
// 0o[0-7]+ octal and 0x[0-9a-fA-F]+ hexadecimal. False for anything else or past int64.
static bool decode_integer(const YAML::Node& n, int64_t* out) {
  if (!n.IsScalar()) return false;
  const std::string& s = n.Scalar();
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) negative = s[i++] == '-';
  int base = 10;
  if (s.size() > i + 2 && s[i] == '0' && (s[i + 1] == 'o' || s[i + 1] == 'x')) {
    if (negative || s[0] == '+') return false;  // the core schema's octal and hex have no sign
    base = s[i + 1] == 'o' ? 8 : 16;
    i += 2;
  }
  if (i == s.size()) return false;
  uint64_t v = 0;
  const uint64_t limit = negative ? uint64_t(INT64_MAX) + 1 : uint64_t(INT64_MAX);
  for (; i < s.size(); ++i) {
    const char c = s[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : 99;
    if (d >= base || v > (limit - uint64_t(d)) / uint64_t(base)) return false;
    v = v * uint64_t(base) + uint64_t(d);
  }
  *out = negative ? int64_t(0 - v) : int64_t(v);
  return true;
}

int64_t NodeReader::integer(const std::string& key, int64_t def, int64_t lo, int64_t hi) {
  YAML::Node n = get(key);
  if (!n || n.IsNull()) return resolved_[key] = def, def;
  int64_t v;
  if (!decode_integer(n, &v)) fail(key, "expected an integer, got " + scalar_text(n));
  if (v < lo || v > hi)
    fail(key, "value " + n.Scalar() + " is out of range; allowed: " + std::to_string(lo) + " to " +
                  std::to_string(hi));
  resolved_[key] = v;
  return v;
}

bool NodeReader::boolean(const std::string& key, bool def) {
  YAML::Node n = get(key);
  if (!n || n.IsNull()) return resolved_[key] = def, def;
  bool v;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v))
    fail(key, "expected true or false, got " + scalar_text(n));
  resolved_[key] = v;
  return v;
}

std::string NodeReader::string(const std::string& key, const std::string& def) {
  YAML::Node n = get(key);
  if (!n || n.IsNull()) {
    if (!def.empty()) resolved_[key] = def;
    return def;
  }
  if (!n.IsScalar()) fail(key, "expected a string, got " + scalar_text(n));
  resolved_[key] = n.Scalar();
  return n.Scalar();
}

std::string NodeReader::choice(const std::string& key, const std::string& def,
                               const std::vector<std::string>& allowed) {
  std::string v = string(key, def);
  if (std::find(allowed.begin(), allowed.end(), v) != allowed.end()) return v;
  std::string near = closest_match(v, allowed);
  fail(key, quoted(v) + " is not allowed" + (near.empty() ? "" : " (did you mean '" + near + "'?)") +
                "; allowed: " + join(allowed));
}

std::vector<int64_t> NodeReader::integer_list(const std::string& key, const std::vector<int64_t>& def,
                                              int64_t lo, int64_t hi) {
  YAML::Node n = get(key);
  if (!n || n.IsNull()) return resolved_[key] = def, def;
  std::vector<int64_t> out;
  if (n.IsScalar()) {  // a single value stands for a one-element list: kernel_size: 5
    out.push_back(integer(key, 0, lo, hi));
    return out;
  }
  if (!n.IsSequence()) fail(key, "expected a list of integers, got " + scalar_text(n));
  for (size_t i = 0; i < n.size(); ++i) {
    int64_t v;
    if (!decode_integer(n[i], &v))
      fail(key, "item " + std::to_string(i) + ": expected an integer, got " + scalar_text(n[i]));
    if (v < lo || v > hi)
      fail(key, "item " + std::to_string(i) + " = " + n[i].Scalar() +
                    " is out of range; allowed: " + std::to_string(lo) + " to " + std::to_string(hi));
    out.push_back(v);
  }
  resolved_[key] = out;
  return out;
}

std::vector<double> NodeReader::number_list(const std::string& key, const std::vector<double>& def, double lo,
                                            double hi) {
  YAML::Node n = get(key);
  if (!n || n.IsNull()) return resolved_[key] = def, def;
  if (n.IsScalar()) return {number(key, 0, lo, hi)};
  if (!n.IsSequence()) fail(key, "expected a list of numbers, got " + scalar_text(n));
  std::vector<double> out;
  for (size_t i = 0; i < n.size(); ++i) {
    double v;
    if (!n[i].IsScalar() || !YAML::convert<double>::decode(n[i], v) || !std::isfinite(v))
      fail(key, "item " + std::to_string(i) + ": expected a number, got " + scalar_text(n[i]));
    if (v < lo || v > hi) fail(key, "item " + std::to_string(i) + " = " + n[i].Scalar() + " is out of range");
    out.push_back(v);
  }
  resolved_[key] = out;
  return out;
}

std::vector<std::string> NodeReader::string_list(const std::string& key,
                                                 const std::vector<std::string>& def) {
  YAML::Node n = get(key);
  if (!n || n.IsNull()) return resolved_[key] = def, def;
  if (n.IsScalar())
    return resolved_[key] = std::vector<std::string>{n.Scalar()}, std::vector<std::string>{n.Scalar()};
  if (!n.IsSequence()) fail(key, "expected a list of strings, got " + scalar_text(n));
  std::vector<std::string> out;
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar()) fail(key, "item " + std::to_string(i) + ": expected a string");
    out.push_back(n[i].Scalar());
  }
  resolved_[key] = out;
  return out;
}

YAML::Node NodeReader::child(const std::string& key) { return get(key); }

void NodeReader::accept(const std::vector<std::string>& keys) { known_.insert(keys.begin(), keys.end()); }

void NodeReader::finish() const {
  if (!node_.IsMap()) return;
  std::vector<std::string> allowed(known_.begin(), known_.end());
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    std::string key = it->first.Scalar();
    if (known_.count(key)) continue;
    std::string near = closest_match(key, allowed);
    throw ConfigError(node_location(file_, it->first) + ": unknown key " + quoted(key_path(key)) +
                      (near.empty() ? "" : " (did you mean '" + near + "'?)") + "; allowed keys" +
                      (path_.empty() ? "" : " in '" + path_ + "'") + ": " + join(allowed));
  }
}

}  // namespace trainer
