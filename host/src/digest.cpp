#include "digest.hpp"

#include <fmt/format.h>
#include <nxrt_sdk/digest64.hpp>

namespace nxrt {

uint64_t xxh64(const void* data, size_t size, uint64_t seed) { return sdk::digest64(data, size, seed); }

std::string hex64(uint64_t v) { return fmt::format("{:016x}", v); }

bool parse_hex64(const std::string& s, uint64_t* out) {
  if (s.size() != 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | uint64_t(d);
  }
  *out = v;
  return true;
}

}  // namespace nxrt
