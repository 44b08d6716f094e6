#include "lib/keys/yaml_floats.h"

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace trainer {

std::string shortest_float(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  // Keep it a float for every YAML reader: "1" reads back as an integer, and YAML 1.1 readers
  // (PyYAML) read "1e-08" as a string, "1.0e-08" as a float.
  if (s.find_first_of("in") != std::string::npos) return s;  // inf, nan: not from a config
  const auto e = s.find('e');
  if (s.find('.') == std::string::npos) s.insert(e == std::string::npos ? s.size() : e, ".0");
  return s;
}

namespace {

// A float as yaml-cpp writes a double: digits with a '.' or an exponent, nothing else.
bool is_float_text(const std::string& s) {
  if (s.empty() || s.find_first_not_of("0123456789+-.eE") != std::string::npos) return false;
  if (s.find_first_of(".eE") == std::string::npos) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

}  // namespace

YAML::Node string_sequence(const std::vector<std::string>& items) {
  YAML::Node out(YAML::NodeType::Sequence);
  for (const std::string& item : items) {
    YAML::Node n(item);
    n.SetTag("!");
    out.push_back(n);
  }
  return out;
}

void shorten_floats(YAML::Node node) {
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) shorten_floats(it->second);
  } else if (node.IsSequence()) {
    for (auto item : node) shorten_floats(item);
  } else if (node.IsScalar() && node.Tag() != "!" && is_float_text(node.Scalar())) {
    const std::string shortest = shortest_float(std::strtod(node.Scalar().c_str(), nullptr));
    if (shortest != node.Scalar()) node = shortest;
  }
}

std::string dump_yaml(const YAML::Node& node) {
  YAML::Node copy = YAML::Clone(node);
  shorten_floats(copy);
  return YAML::Dump(copy);
}

}  // namespace trainer
