// Text a plugin hands the host (kernel descriptions) is untrusted: before the host prints or
// stores it, bytes outside well-formed UTF-8 become '?', control characters ' ', and it is cut
// to at most `max_bytes` at a character boundary.
#pragma once
#include <string>
#include <string_view>

namespace nxrt {

inline std::string clip_printable(std::string_view s, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size() && !(n == 2 && c < 0xc2);
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    const std::string_view piece = !ok ? "?" : (n == 1 && (c < 0x20 || c == 0x7f)) ? " " : s.substr(i, n);
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
    i += ok ? n : 1;
  }
  return out;
}

}  // namespace nxrt
