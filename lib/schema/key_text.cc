#include "lib/schema/key_text.h"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace trainer {
namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::string range(int64_t lo, int64_t hi) { return std::to_string(lo) + " to " + std::to_string(hi); }
std::string range(double lo, double hi) { return number_text(lo) + " to " + number_text(hi); }

// A default as YAML would write it, numbers as number_text.
std::string yaml_text(const YAML::Node& n, bool numbers) {
  if (n.IsSequence()) {
    std::vector<std::string> items;
    for (size_t i = 0; i < n.size(); ++i) items.push_back(yaml_text(n[i], numbers));
    return "[" + join(items) + "]";
  }
  if (numbers) return number_text(n.as<double>());
  return n.Scalar();
}

}  // namespace

std::string number_text(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15) {  // 65536, 1e6, 25e4
    int64_t mantissa = int64_t(v);
    int zeros = 0;
    while (mantissa != 0 && mantissa % 10 == 0) mantissa /= 10, ++zeros;
    return zeros >= 4 ? std::to_string(mantissa) + "e" + std::to_string(zeros) : std::to_string(int64_t(v));
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  std::string s = buf;
  // 1e+06 -> 1e6, 1e-08 -> 1e-8
  const size_t e = s.find('e');
  if (e != std::string::npos) {
    std::string mantissa = s.substr(0, e), exponent = s.substr(e + 1);
    const bool negative = exponent[0] == '-';
    exponent.erase(0, 1);
    while (exponent.size() > 1 && exponent[0] == '0') exponent.erase(0, 1);
    s = mantissa + "e" + (negative ? "-" : "") + exponent;
  }
  return s;
}

std::string value_text(const KeySpec& k) {
  using T = KeySpec::Type;
  switch (k.type) {
    case T::integer:
      return "an integer from " + range(k.ilo, k.ihi);
    case T::number:
      if (k.min_magnitude > 0)
        return "a non-zero number from " + range(k.lo, k.hi) + ", at least " + number_text(k.min_magnitude) +
               " in magnitude";
      return "a number from " + range(k.lo, k.hi);
    case T::boolean:
      return "true or false";
    case T::string:
      return "text";
    case T::character:
      return "one character";
    case T::choice:
      return "one of: " + join(k.allowed);
    case T::string_list:
      return "a list of text, or one";
    case T::integer_list:
      return "a list of integers from " + range(k.ilo, k.ihi) + ", or one";
    case T::number_list:
      return "a list of numbers from " + range(k.lo, k.hi) + ", or one";
    case T::size:
      return "an integer from " + range(k.ilo, k.ihi);
    case T::size_pair:
      return "an integer or [height, width], from " + range(k.ilo, k.ihi);
    case T::padding:
      return "valid, same, or an integer from " + range(k.ilo, k.ihi);
    case T::image_size:
      return "[height, width], one integer for both, or {shorter: S}; from " + range(k.ilo, k.ihi);
    case T::mapping:
      return "a mapping";
    case T::choice_or_number:
      return join(k.allowed) + ", or a number from " + range(k.lo, k.hi);
    case T::section:
      return "a section";
  }
  return "";
}

std::string default_text(const KeySpec& k) {
  if (!k.def.IsDefined() || k.def.IsNull()) return "";
  using T = KeySpec::Type;
  const bool numbers = k.type == T::number || k.type == T::number_list;
  const std::string s = yaml_text(k.def, numbers);
  if (k.type != T::string && k.type != T::character) return s;
  for (char c : s)  // text such as a delimiter: quoted, as YAML would need it
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.' && c != '/')
      return "'" + s + "'";
  return s;
}

std::string form_text(const ConfigNode& n) {
  using F = ConfigNode::Form;
  switch (n.form) {
    case F::mapping:
      return "a mapping";
    case F::name_or_mapping:
      return "a " + n.variant_key + " name, or a mapping";
    case F::device:
      return "cpu, auto, gpu, gpu:N, gpu:N,M,..., gpu:all, or a mapping";
    case F::bool_or_mapping:
      return "true, false, or a mapping";
    case F::list:
      return n.children[0].layer_items ? "a list of layers" : "a list";
    case F::named:
      return "a mapping of names to blocks";
    case F::names:
      return "a list of names, or the path of a file with one name per line";
    case F::free_mapping:
      return "a mapping of parameter: default";
  }
  return "";
}

}  // namespace trainer
