// printable(): text from the user (file names, YAML keys and values, arguments) made safe to echo
// on a terminal in one line. Valid UTF-8 passes through; control bytes (NUL, newline, escape, DEL,
// C1 controls) and bytes that are not valid UTF-8 become "\xNN", so a binary config or an argument
// holding escape sequences cannot reach the terminal raw or split an error over several lines.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace trainer {

// Length of the valid UTF-8 sequence starting at s[i] (1 to 4), or 0 when it is not one
// (overlong forms, surrogates and code points above U+10FFFF are invalid, as in RFC 3629).
inline size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return uint8_t(s[k]); };
  const uint8_t b = byte(i);
  if (b < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (b >= 0xC2 && b <= 0xDF)
    n = 2, cp = b & 0x1F;
  else if (b >= 0xE0 && b <= 0xEF)
    n = 3, cp = b & 0x0F;
  else if (b >= 0xF0 && b <= 0xF4)
    n = 4, cp = b & 0x07;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
      (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return 0;
  return n;
}

// Offset of the first byte that is not valid UTF-8, or npos when all of s is valid.
inline size_t first_invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

inline std::string printable(std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  const auto escape = [&](uint8_t b) { out += {'\\', 'x', hex[b >> 4], hex[b & 0xF]}; };
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = uint8_t(s[i]);
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) {
      escape(b);
      ++i;
      continue;
    }
    // C0 controls and DEL; C1 controls (U+0080..U+009F) are the two bytes C2 80..C2 9F.
    const bool control =
        (n == 1 && (b < 0x20 || b == 0x7F)) || (n == 2 && b == 0xC2 && uint8_t(s[i + 1]) < 0xA0);
    for (size_t k = 0; k < n; ++k)
      if (control)
        escape(uint8_t(s[i + k]));
      else
        out += s[i + k];
    i += n;
  }
  return out;
}

// A value the user gave, quoted for a message: 'v', cut at 200 bytes ("...") so that a 5 MB
// value is not echoed whole (as --set values are cut). printable() still escapes what it holds.
// NUL bytes become the text "\x00" here already: an exception keeps its message as a C string
// (std::runtime_error), which a NUL would end ("found '1").
inline std::string quoted(std::string_view v) {
  constexpr size_t kMaxEchoed = 200;
  std::string out = "'";
  for (char c : v.substr(0, kMaxEchoed))
    if (c == '\0')
      out += "\\x00";
    else
      out += c;
  if (v.size() <= kMaxEchoed) return out + "'";
  return out + "...' (" + std::to_string(v.size()) + " bytes)";
}

}  // namespace trainer
