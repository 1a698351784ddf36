// One loaded plugin library and the plugin instance this host negotiated from it:
// Boost.DLL handle, negotiated version, masked features, function table, instance,
// option schema and device list. Held by shared_ptr: every object made from the
// plugin (EP sessions, kernels) keeps its instance and library alive. Two loads of
// the same file (two environments) are two independent instances; the OS
// refcounts the library itself.
#pragma once
#include <nxrt_ep.h>

#include "status.hpp"

#include <boost/dll/shared_library.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nxrt {

// Options as the user gave them: "<ep>.<key>" = value (and the host's own "threads").
using KeyValues = std::vector<std::pair<std::string, std::string>>;

struct DeviceInfo {
  nxrt_device_kind kind = NXRT_DEVICE_OTHER;
  std::string name, vendor;
  uint32_t vendor_id = 0, device_id = 0;
  uint8_t uuid[16] = {};
  uint64_t memory_bytes = 0;
  uint64_t memory_free_bytes = 0;  // 0: unknown
  uint64_t dtypes = 0;
  bool host_addressable = false;
  std::vector<std::pair<std::string, std::string>> properties;
  std::string pci_bus_id;  // "" if none

  bool has_uuid() const;
  std::string uuid_str() const;  // 8-4-4-4-12 hex
  std::string describe() const;  // "key: value" lines
  // Flattened as the ABI's session_create_offline takes it (nxrt_ep.h): kind, name, vendor,
  // vendor_id, device_id, uuid, memory_bytes, host_addressable, pci_bus_id, dtypes, then
  // every property under its own key.
  std::vector<std::pair<std::string, std::string>> description() const;
};

// One entry of a plugin's option schema.
struct OptionInfo {
  nxrt_option_type type = NXRT_OPTION_STRING;
  std::string name;  // full key, "<plugin>.<key>"
  std::string default_value;
  std::string help;
};
const char* option_type_name(nxrt_option_type t);  // "string", "int", "float", "bool", "path"
// True when `value` parses as type `t` (INT: decimal fitting int64; FLOAT: decimal or
// scientific; BOOL: 0, 1, true, false; STRING, PATH and types newer than this host: anything).
bool option_value_ok(nxrt_option_type t, const std::string& value);

class PluginLibrary {
 public:
  // Opens the file once, checks trust on it (not world-writable, in the allow-list when
  // one is set), loads that same file (through /proc/<pid>/fd) and negotiates, logs what
  // was loaded at info level; throws HostError(NXRT_ERR_PLUGIN / NOT_FOUND) naming the
  // file and the cause.
  static std::shared_ptr<PluginLibrary> load(const std::filesystem::path& path);
  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  const nxrt_plugin_api& api() const { return *api_; }
  nxrt_plugin* instance() const { return instance_; }
  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const std::filesystem::path& path() const { return path_; }
  // The file's SHA-256 (hex) when it was computed: with an allow-list or info logging on.
  const std::string& sha256() const { return sha256_; }
  uint32_t abi_major() const { return abi_major_; }
  uint32_t abi_minor() const { return abi_minor_; }
  uint64_t features() const { return features_; }  // masked to the agreed minor
  bool has(uint64_t feature) const { return (features_ & feature) != 0; }
  const std::vector<DeviceInfo>& devices() const { return devices_; }
  const std::string& no_device_reason() const { return no_device_reason_; }
  const std::vector<OptionInfo>& options() const { return options_; }
  const OptionInfo* find_option(const std::string& key) const;
  std::string option_names() const;  // "a, b" or "" when there are none

 private:
  PluginLibrary() = default;
  boost::dll::shared_library lib_;
  const nxrt_plugin_api* api_ = nullptr;
  nxrt_plugin* instance_ = nullptr;
  bool shutdown_needed_ = false;
  // The plugin file as checked (shared by every load of the same file); dlopen() got its
  // /proc/<pid>/fd name, which stays valid while the library is loaded.
  int fd_ = -1;
  std::filesystem::path path_;
  std::string sha256_;
  std::string name_, version_, no_device_reason_;
  uint32_t abi_major_ = 0, abi_minor_ = 0;
  uint64_t features_ = 0;
  std::vector<DeviceInfo> devices_;
  std::vector<OptionInfo> options_;
};

namespace testing {
// Test seam (plugin_trust_test): when set, load() calls it with the given path after the file
// was opened and checked and before it is loaded, where a test replaces the file.
inline void (*after_plugin_check)(const std::filesystem::path&) = nullptr;
}  // namespace testing

[[noreturn]] void throw_abi_exception(const std::string& who, std::string_view fn);

// Runs a call into plugin code; a C++ exception thrown through the ABI becomes a HostError
// naming the plugin (`who`: its name, or its path before it has one) and the function.
template <typename F>
auto guarded(const std::string& who, std::string_view fn, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (...) {
    throw_abi_exception(who, fn);
  }
}

// Calls a fallible plugin function; a retryable failure is retried once (the first
// status is released), then whatever the second call returns is the result.
template <typename F>
nxrt_status* retry_once(F&& f) {
  nxrt_status* s = f();
  if (s && s->retryable) {
    release_status(s);
    s = f();
  }
  return s;
}

// Takes ownership of a status returned by a plugin call: throws HostError with
// `what` and the plugin's message when it is an error. Every failure is
// NXRT_ERR_PLUGIN, except where `user_input` says the call judged the user's own
// request (session options): there INVALID_ARGUMENT stays INVALID_ARGUMENT.
void check_plugin(const PluginLibrary& lib, nxrt_status* status, const std::string& what, bool user_input = false);

}  // namespace nxrt
