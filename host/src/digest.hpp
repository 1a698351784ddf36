// XXH64 (the SDK's nxrt_sdk/digest64.hpp, shared with plugins): the
// fast digest that keys the compiled-model cache and checks its sections. Not a security
// boundary (docs/security.md: the cache folder is trusted like the plugin folder); it
// catches corruption and tells models and options apart at memory speed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace nxrt {

uint64_t xxh64(const void* data, size_t size, uint64_t seed = 0);
// 16 lower-case hex digits.
std::string hex64(uint64_t v);
// Parses what hex64 wrote; false for anything else.
bool parse_hex64(const std::string& s, uint64_t* out);

}  // namespace nxrt
