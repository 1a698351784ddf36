// What the plugin's compile choices read of a device, as a plain struct: filled from an
// opened VkPhysicalDevice or from a device's description (`nxrt plugins --json`, the ABI
// 2.4 offline compile), so both make the same claims, kernels and fingerprint.
#pragma once
#include "ops.hpp"

#include <nxrt_sdk/kernel_cache.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace nxrt::vk {

struct PhysicalDeviceInfo;

// Version of the kernel blob layout (kernel_blob.cpp); part of the fingerprint.
constexpr uint32_t kBlobFormat = 1;

struct DeviceTraits {
  std::string name;
  uint32_t vendor_id = 0, device_id = 0, driver_version = 0, api_version = 0;
  std::array<uint8_t, 16> cache_uuid{};  // VkPhysicalDeviceProperties::pipelineCacheUUID
  uint32_t subgroup_size = 0;
  uint32_t max_workgroup_invocations = 0;
  std::array<uint32_t, 3> max_workgroup_size{};
  uint32_t max_shared_memory = 0;
  uint64_t max_storage_range = 0;
  uint64_t min_storage_offset_alignment = 0;
  uint32_t max_push_constants = 0;
  bool storage16 = false;  // storageBuffer16BitAccess: the float16 kernels
  bool shader_float16 = false;

  static DeviceTraits from_device(const PhysicalDeviceInfo& d);
  // From key/value text as describe_device reports it (the keys of properties() plus
  // "name"). INVALID_ARGUMENT names a missing or malformed key.
  static DeviceTraits from_description(const std::map<std::string, std::string>& props);
  // The device properties from_description reads (besides "name"), for device_info.
  std::vector<std::pair<std::string, std::string>> properties() const;
  // What check_node reads.
  DeviceLimits limits() const;
  // One line: plugin version, blob format, identity, driver, every value above.
  std::string fingerprint(const std::string& plugin_version) const;
};

// Kernels compiled by a session whose fingerprint was `compiled` (another process, maybe
// another device) for use on a session whose own fingerprint is `here`:
//   identical -> OPTIMAL; another driver/API version or pipeline-cache UUID of the same
//   vendor/device -> USABLE (SPIR-V and choices stay valid, the driver cache bytes are
//   dropped); another plugin version, vendor/device, or any value a compile choice reads
//   -> RECOMPILE naming the field and both values; unparseable or another blob format ->
//   UNSUPPORTED.
sdk::CacheJudgement judge_fingerprint(const std::string& compiled, const std::string& here);

}  // namespace nxrt::vk
