// One loaded plugin library: Boost.DLL handle, negotiated version, function
// table and device list. Held by shared_ptr: every object made from the
// plugin (EP sessions, kernels) keeps its library loaded.
#pragma once
#include <nxrt_ep.h>

#include <boost/dll/shared_library.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nxrt {

struct DeviceInfo {
  nxrt_device_kind kind = NXRT_DEVICE_OTHER;
  std::string name, vendor;
  uint32_t vendor_id = 0, device_id = 0;
  uint8_t uuid[16] = {};
  uint64_t memory_bytes = 0;
  uint64_t dtypes = 0;
  bool host_addressable = false;
  std::vector<std::pair<std::string, std::string>> properties;

  std::string describe() const;  // "key: value" lines
};

class PluginLibrary {
 public:
  // Loads and negotiates; throws HostError(NXRT_ERR_PLUGIN / NOT_FOUND) naming the file and the cause.
  static std::shared_ptr<PluginLibrary> load(const std::filesystem::path& path);
  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  const nxrt_plugin_api& api() const { return *api_; }
  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const std::filesystem::path& path() const { return path_; }
  uint32_t abi_major() const { return abi_major_; }
  uint32_t abi_minor() const { return abi_minor_; }
  uint64_t features() const { return features_; }
  bool has(uint64_t feature) const { return (features_ & feature) != 0; }
  const std::vector<DeviceInfo>& devices() const { return devices_; }
  const std::string& no_device_reason() const { return no_device_reason_; }

 private:
  PluginLibrary() = default;
  boost::dll::shared_library lib_;
  const nxrt_plugin_api* api_ = nullptr;
  std::filesystem::path path_;
  std::string name_, version_, no_device_reason_;
  uint32_t abi_major_ = 0, abi_minor_ = 0;
  uint64_t features_ = 0;
  std::vector<DeviceInfo> devices_;
};

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

// Takes ownership of a status returned by a plugin call: throws HostError with
// `what` and the plugin's message when it is an error.
void check_plugin(const PluginLibrary& lib, nxrt_status* status, const std::string& what);

}  // namespace nxrt
