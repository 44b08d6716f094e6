// json_text(): a JSON value as text, whatever bytes its strings hold. nlohmann's dump() throws
// (type_error.316) on a string that is not UTF-8, and such strings come from the user: an --out
// path, a config path or class names in Latin-1. A record must never end a run after an epoch
// for that, so invalid bytes are written as the text "\xNN" (as messages show them,
// lib/core/printable.h) and valid UTF-8, control bytes included, is kept for JSON to escape.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "lib/core/printable.h"

namespace trainer {

// s with every byte that is not part of valid UTF-8 written as "\xNN".
inline std::string utf8_or_escaped(const std::string& s) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) {
      const auto b = uint8_t(s[i++]);
      out += {'\\', 'x', hex[b >> 4], hex[b & 0xF]};
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

// A copy of j whose strings and keys are valid UTF-8. Records are a few levels deep; `depth`
// bounds the walk all the same (deeper values are left to dump()'s replacement below). A template,
// so that an ordered_json record (the logs' Json) keeps its key order: converting it to
// nlohmann::json would sort the keys.
template <typename J>
J utf8_json(const J& j, int depth = 0) {
  if (depth > 64) return j;
  if (j.is_string()) return J(utf8_or_escaped(j.template get_ref<const std::string&>()));
  if (j.is_array()) {
    J out = J::array();
    for (const auto& v : j) out.push_back(utf8_json(v, depth + 1));
    return out;
  }
  if (j.is_object()) {
    J out = J::object();
    for (auto it = j.begin(); it != j.end(); ++it)
      out[utf8_or_escaped(it.key())] = utf8_json(it.value(), depth + 1);
    return out;
  }
  return j;
}

template <typename J>
std::string json_text(const J& j, int indent = -1) {
  try {
    return j.dump(indent);
  } catch (const typename J::type_error&) {  // 316: a string that is not UTF-8
    return utf8_json(j).dump(indent, ' ', false, J::error_handler_t::replace);
  }
}

// For braced values (json_text({{"a", 1}})), which a template cannot deduce.
inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return json_text<nlohmann::json>(j, indent);
}

}  // namespace trainer
