// Plugin trust pieces that need no process setup: the host's SHA-256 against the FIPS
// 180-4 example vectors, and NXRT_PLUGIN_PATH parsing, ignored in a setuid/setgid
// process. The loading side (world-writable refusals, allow-list, log) is plugin_trust.py.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "env.hpp"
#include "sha256.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

using namespace nxrt;

namespace {
std::string hex(const std::string& data, size_t chunk) {
  Sha256 s;
  for (size_t i = 0; i < data.size(); i += chunk) s.update(data.data() + i, std::min(chunk, data.size() - i));
  std::string out;
  for (uint8_t b : s.finish()) out += fmt::format("{:02x}", b);
  return out;
}
}  // namespace

TEST_CASE("sha256: FIPS 180-4 vectors, whatever the update chunking") {
  for (size_t chunk : {1, 3, 64, 1000}) {
    CHECK(hex("", chunk) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(hex("abc", chunk) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", chunk) ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  }
  CHECK(hex(std::string(1000000, 'a'), 4096) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("NXRT_PLUGIN_PATH: split on ':', empty entries dropped; ignored when the process is secure") {
  CHECK(Env::env_plugin_dirs(nullptr, false).empty());
  CHECK(Env::env_plugin_dirs("/a::/b:", false) == std::vector<std::string>{"/a", "/b"});
  CHECK(Env::env_plugin_dirs("/a:/b", true).empty());
  CHECK_FALSE(Env::secure_process());  // ctest does not run setuid
}

// Run only by setuid_plugin_path.py (ctest nxrt_plugin_path_setuid), which executes a copy
// of this binary setuid to another user: doctest skips it in the plain run.
TEST_CASE("setuid: discovery ignores NXRT_PLUGIN_PATH" * doctest::skip()) {
  REQUIRE(Env::secure_process());
  const char* p = std::getenv("NXRT_PLUGIN_PATH");
  REQUIRE(p);
  for (const auto& d : Env::discovery_dirs()) CHECK(d != p);
}
