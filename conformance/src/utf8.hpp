// UTF-8 checks for text a plugin hands the host (status messages, names, fingerprints):
// the ABI's strings are UTF-8, and a report must stay valid UTF-8 JSON whatever a plugin says.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace conf {

// Length of the well-formed UTF-8 sequence at s[i] (1-4), or 0 when it is malformed
// (stray continuation byte, truncated, overlong, surrogate, above U+10FFFF).
inline size_t utf8_sequence(std::string_view s, size_t i) {
  const auto c = uint8_t(s[i]);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0) n = 1, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0) n = 2, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0) n = 3, cp = c & 0x07;
  else return 0;
  if (i + n >= s.size()) return 0;
  for (size_t k = 1; k <= n; ++k) {
    const auto b = uint8_t(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (b & 0x3F);
  }
  static const uint32_t min_of[] = {0, 0x80, 0x800, 0x10000};
  if (cp < min_of[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n + 1;
}

inline bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (!n) return false;
    i += n;
  }
  return true;
}

// `s` with every malformed byte replaced by U+FFFD (the replacement character).
inline std::string to_valid_utf8(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n) o.append(s.substr(i, n));
    else o += "\xEF\xBF\xBD";
    i += n ? n : 1;
  }
  return o;
}

}  // namespace conf
