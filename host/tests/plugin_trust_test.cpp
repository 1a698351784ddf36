// Plugin trust pieces that need no process setup: the host's SHA-256 against the FIPS
// 180-4 example vectors, NXRT_PLUGIN_PATH parsing, ignored in a setuid/setgid process, and
// a plugin file replaced between its check and its load (through the host's test seam).
// The loading side through the CLI (world-writable refusals, allow-list, log) is
// plugin_trust.py.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "env.hpp"
#include "error_of.hpp"
#include "plugin_library.hpp"
#include "sha256.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace nxrt;
using nxrt::test::error_of;

namespace {
std::string hex(const std::string& data, size_t chunk) {
  Sha256 s;
  for (size_t i = 0; i < data.size(); i += chunk) s.update(data.data() + i, std::min(chunk, data.size() - i));
  std::string out;
  for (uint8_t b : s.finish()) out += fmt::format("{:02x}", b);
  return out;
}

std::string file_sha256(const std::filesystem::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  std::string digest = sha256_fd(fd, p.string());
  ::close(fd);
  return digest;
}

std::filesystem::path g_swap_in;  // what the seam puts at the plugin's path

// Replaces the file at `path` as an attacker would: a new file renamed over it.
void swap_plugin(const std::filesystem::path& path) {
  const std::filesystem::path tmp = path.string() + ".new";
  std::filesystem::copy_file(g_swap_in, tmp, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(tmp, path);
}

struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const std::string& value) : name(n) { ::setenv(n, value.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};
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

TEST_CASE("a plugin file replaced between its check and its load: the file checked is the one loaded") {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/nxrt_toctou_XXXXXX";  // mkdtemp: mode 0700, not world-writable
  REQUIRE(::mkdtemp(tmpl));
  const fs::path dir = tmpl;
  const fs::path plugin = dir / "libnxrt_ep_cpu.so";
  fs::copy_file(fs::path(NXRT_LIB_DIR) / "libnxrt_ep_cpu.so", plugin);
  g_swap_in = fs::path(NXRT_LIB_DIR) / "libnxrt_ep_sample.so";
  const std::string cpu_digest = file_sha256(plugin), sample_digest = file_sha256(g_swap_in);
  REQUIRE(cpu_digest != sample_digest);
  // Only the cpu plugin is allowed: a load of the swapped-in file would be a load of a file
  // nobody checked.
  {
    std::ofstream(dir / "allow.txt") << cpu_digest << "  libnxrt_ep_cpu.so\n";
  }
  ScopedEnv allow("NXRT_PLUGIN_ALLOWLIST", (dir / "allow.txt").string());
  {
    testing::after_plugin_check = swap_plugin;
    std::shared_ptr<PluginLibrary> lib;
    const std::string err = error_of([&] { lib = PluginLibrary::load(plugin); });
    testing::after_plugin_check = nullptr;
    CHECK(err == "");
    REQUIRE(lib);
    CHECK(lib->name() == "cpu");
    CHECK(lib->sha256() == cpu_digest);
    CHECK(lib->path() == plugin);  // what is reported and logged is still the path given
    CHECK(file_sha256(plugin) == sample_digest);  // the swap did happen
  }
  // Loaded afresh, the new file is checked and refused (it is not in the list).
  const std::string err = error_of([&] { PluginLibrary::load(plugin); });
  CHECK(err.find("is not in the allow-list") != std::string::npos);
  CHECK(err.find(sample_digest) != std::string::npos);
  // Without a list, it loads as what it now is.
  ::unsetenv("NXRT_PLUGIN_ALLOWLIST");
  CHECK(PluginLibrary::load(plugin)->name() == "sample");
  fs::remove_all(dir);
}

TEST_CASE("two loads of one plugin, the first released, then another plugin: each load gets its own file") {
  // ld.so matches dlopen("/proc/<pid>/fd/N") by name first: had the first load's descriptor
  // been closed while the second kept the library, the next plugin opened (which gets the
  // lowest free descriptor, N) would have been handed the cpu library.
  const std::string dir = NXRT_LIB_DIR;
  auto first = PluginLibrary::load(dir + "/libnxrt_ep_cpu.so");
  auto second = PluginLibrary::load(dir + "/libnxrt_ep_cpu.so");
  first.reset();
  auto other = PluginLibrary::load(dir + "/libnxrt_ep_sample.so");
  CHECK(second->name() == "cpu");
  CHECK(other->name() == "sample");
}
