#include "device_traits.hpp"

#include "vk_core.hpp"

#include <charconv>
#include <cstring>

namespace nxrt::vk {

using sdk::fail;

namespace {

std::string hex_uuid(const std::array<uint8_t, 16>& u) {
  std::string s;
  for (uint8_t b : u) s += fmt::format("{:02x}", b);
  return s;
}

template <typename T>
bool parse_uint(std::string_view s, T& out, int base = 10) {
  if (base == 16) {
    if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
    s.remove_prefix(2);
  }
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && p == s.data() + s.size();
}

// A description's value of `key`, parsed by `parse`; INVALID_ARGUMENT naming the key.
class DescriptionReader {
 public:
  explicit DescriptionReader(const std::map<std::string, std::string>& p) : p_(p) {}
  const std::string& text(const char* key) const {
    auto it = p_.find(key);
    if (it == p_.end())
      fail(NXRT_INVALID_ARGUMENT, "the Vulkan device description has no '{}' (give the device's entry of `nxrt plugins --json`)",
           key);
    return it->second;
  }
  template <typename T>
  T number(const char* key, int base = 10) const {
    T v{};
    if (!parse_uint(text(key), v, base))
      fail(NXRT_INVALID_ARGUMENT, "the Vulkan device description's '{}' is '{}', not a {} number", key, text(key),
           base == 16 ? "0x-prefixed hexadecimal" : "decimal");
    return v;
  }
  bool flag(const char* key) const {
    const std::string& t = text(key);
    if (t != "0" && t != "1") fail(NXRT_INVALID_ARGUMENT, "the Vulkan device description's '{}' is '{}', not 0 or 1", key, t);
    return t == "1";
  }
  std::array<uint32_t, 3> triple(const char* key, char sep) const {
    const std::string& t = text(key);
    std::array<uint32_t, 3> v{};
    size_t a = t.find(sep), b = a == std::string::npos ? a : t.find(sep, a + 1);
    if (b == std::string::npos || !parse_uint(std::string_view(t).substr(0, a), v[0]) ||
        !parse_uint(std::string_view(t).substr(a + 1, b - a - 1), v[1]) || !parse_uint(std::string_view(t).substr(b + 1), v[2]))
      fail(NXRT_INVALID_ARGUMENT, "the Vulkan device description's '{}' is '{}', not three numbers separated by '{}'", key,
           t, sep);
    return v;
  }
  std::array<uint8_t, 16> uuid(const char* key) const {
    const std::string& t = text(key);
    std::array<uint8_t, 16> u{};
    bool ok = t.size() == 32;
    for (size_t i = 0; ok && i < 16; ++i) {
      auto [p, ec] = std::from_chars(t.data() + 2 * i, t.data() + 2 * i + 2, u[i], 16);
      ok = ec == std::errc() && p == t.data() + 2 * i + 2;
    }
    if (!ok) fail(NXRT_INVALID_ARGUMENT, "the Vulkan device description's '{}' is '{}', not 32 hexadecimal digits", key, t);
    return u;
  }

 private:
  const std::map<std::string, std::string>& p_;
};

}  // namespace

DeviceTraits DeviceTraits::from_device(const PhysicalDeviceInfo& d) {
  DeviceTraits t;
  const auto& p = d.props;
  const auto& L = p.limits;
  t.name = p.deviceName;
  t.vendor_id = p.vendorID;
  t.device_id = p.deviceID;
  t.driver_version = p.driverVersion;
  t.api_version = VK_MAKE_API_VERSION(0, VK_API_VERSION_MAJOR(p.apiVersion), VK_API_VERSION_MINOR(p.apiVersion),
                                      VK_API_VERSION_PATCH(p.apiVersion));
  std::memcpy(t.cache_uuid.data(), p.pipelineCacheUUID, 16);
  t.subgroup_size = d.subgroup_size;
  t.max_workgroup_invocations = L.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) t.max_workgroup_size[size_t(i)] = L.maxComputeWorkGroupSize[i];
  t.max_shared_memory = L.maxComputeSharedMemorySize;
  t.max_storage_range = L.maxStorageBufferRange;
  t.min_storage_offset_alignment = L.minStorageBufferOffsetAlignment;
  t.max_push_constants = L.maxPushConstantsSize;
  t.storage16 = d.storage16;
  t.shader_float16 = d.fp16;
  return t;
}

DeviceTraits DeviceTraits::from_description(const std::map<std::string, std::string>& props) {
  DescriptionReader r(props);
  DeviceTraits t;
  t.name = r.text("name");
  t.vendor_id = r.number<uint32_t>("vulkan.vendor_id", 16);
  t.device_id = r.number<uint32_t>("vulkan.device_id", 16);
  t.driver_version = r.number<uint32_t>("vulkan.driver_version");
  const auto api = r.triple("vulkan.api_version", '.');
  if (api[0] > 127 || api[1] > 1023 || api[2] > 4095)
    fail(NXRT_INVALID_ARGUMENT, "the Vulkan device description's 'vulkan.api_version' is '{}': out of range",
         r.text("vulkan.api_version"));
  t.api_version = VK_MAKE_API_VERSION(0, api[0], api[1], api[2]);
  t.cache_uuid = r.uuid("vulkan.pipeline_cache_uuid");
  t.subgroup_size = r.number<uint32_t>("vulkan.subgroup_size");
  t.max_workgroup_invocations = r.number<uint32_t>("vulkan.max_workgroup_invocations");
  t.max_workgroup_size = r.triple("vulkan.max_workgroup_size", ',');
  t.max_shared_memory = r.number<uint32_t>("vulkan.max_compute_shared_memory");
  t.max_storage_range = r.number<uint64_t>("vulkan.max_storage_buffer_range");
  t.min_storage_offset_alignment = r.number<uint64_t>("vulkan.min_storage_buffer_offset_alignment");
  t.max_push_constants = r.number<uint32_t>("vulkan.max_push_constants");
  t.storage16 = r.flag("vulkan.storage_buffer_16bit");
  t.shader_float16 = r.flag("vulkan.shader_float16");
  // The plugin needs Vulkan 1.2 (Instance skips older devices), 128-byte push constants
  // and 256-thread workgroups: a described device without them could not run the kernels.
  if (t.api_version < VK_API_VERSION_1_2)
    fail(NXRT_UNSUPPORTED, "'{}' supports Vulkan {}: the Vulkan plugin needs 1.2", t.name, r.text("vulkan.api_version"));
  if (t.max_push_constants < 128 || t.max_workgroup_invocations < 256 || t.max_workgroup_size[0] < 256)
    fail(NXRT_UNSUPPORTED, "'{}' has {} bytes of push constants and {} workgroup invocations: the Vulkan plugin needs 128 and 256",
         t.name, t.max_push_constants, t.max_workgroup_invocations);
  if (t.subgroup_size == 0) fail(NXRT_INVALID_ARGUMENT, "the Vulkan device description's 'vulkan.subgroup_size' is 0");
  return t;
}

std::vector<std::pair<std::string, std::string>> DeviceTraits::properties() const {
  return {
      {"vulkan.vendor_id", fmt::format("0x{:x}", vendor_id)},
      {"vulkan.device_id", fmt::format("0x{:x}", device_id)},
      {"vulkan.driver_version", std::to_string(driver_version)},
      {"vulkan.api_version", fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(api_version), VK_API_VERSION_MINOR(api_version),
                                         VK_API_VERSION_PATCH(api_version))},
      {"vulkan.pipeline_cache_uuid", hex_uuid(cache_uuid)},
      {"vulkan.subgroup_size", std::to_string(subgroup_size)},
      {"vulkan.max_workgroup_invocations", std::to_string(max_workgroup_invocations)},
      {"vulkan.max_workgroup_size",
       fmt::format("{},{},{}", max_workgroup_size[0], max_workgroup_size[1], max_workgroup_size[2])},
      {"vulkan.max_compute_shared_memory", std::to_string(max_shared_memory)},
      {"vulkan.max_storage_buffer_range", std::to_string(max_storage_range)},
      {"vulkan.min_storage_buffer_offset_alignment", std::to_string(min_storage_offset_alignment)},
      {"vulkan.max_push_constants", std::to_string(max_push_constants)},
      {"vulkan.storage_buffer_16bit", storage16 ? "1" : "0"},
      {"vulkan.shader_float16", shader_float16 ? "1" : "0"},
  };
}

DeviceLimits DeviceTraits::limits() const {
  DeviceLimits l;
  l.max_storage_range = max_storage_range;
  l.storage16 = storage16;
  return l;
}

std::string DeviceTraits::fingerprint(const std::string& plugin_version) const {
  std::string n = name;
  for (char& c : n)
    if (c == ';' || c == '\n' || c == '\r') c = ',';
  return fmt::format(
      "vulkan {}; blob={}; vendor=0x{:x}; device=0x{:x}; driver={}; api={}.{}.{}; cacheuuid={}; subgroup={}; "
      "wg_invocations={}; wg_size={}x{}x{}; shared={}; storage_range={}; storage_align={}; push={}; storage16={}; "
      "float16={}; name={}",
      plugin_version, kBlobFormat, vendor_id, device_id, driver_version, VK_API_VERSION_MAJOR(api_version),
      VK_API_VERSION_MINOR(api_version), VK_API_VERSION_PATCH(api_version), hex_uuid(cache_uuid), subgroup_size,
      max_workgroup_invocations, max_workgroup_size[0], max_workgroup_size[1], max_workgroup_size[2], max_shared_memory,
      max_storage_range, min_storage_offset_alignment, max_push_constants, int(storage16), int(shader_float16), n);
}

// ---------------------------------------------------------------- judging

namespace {

// Fields the plugin's compile choices read (claims, kernels, SPIR-V specialisations),
// with words for the reason.
const std::pair<const char*, const char*> kChoiceFields[] = {
    {"subgroup", "subgroup size"},
    {"wg_invocations", "max workgroup invocations"},
    {"wg_size", "max workgroup size"},
    {"shared", "max compute shared memory"},
    {"storage_range", "max storage buffer range"},
    {"storage_align", "min storage buffer offset alignment"},
    {"push", "max push constants size"},
    {"storage16", "16-bit storage buffer access"},
    {"float16", "shaderFloat16"},
};
// Fields that only make the driver's pipeline cache bytes unusable.
const std::pair<const char*, const char*> kDriverFields[] = {
    {"driver", "driver version"},
    {"api", "Vulkan API version"},
    {"cacheuuid", "pipeline cache UUID"},
};

}  // namespace

sdk::CacheJudgement judge_fingerprint(const std::string& compiled, const std::string& here) {
  if (compiled == here) return {};
  sdk::Fingerprint a, b;
  if (!sdk::parse_fingerprint(here, "vulkan", b)) return {NXRT_CACHE_UNSUPPORTED, "this session's own fingerprint is unreadable"};
  if (!sdk::parse_fingerprint(compiled, "vulkan", a)) {
    std::string shown = compiled.substr(0, 80);
    return {NXRT_CACHE_UNSUPPORTED, fmt::format("not a Vulkan plugin fingerprint: '{}'", shown)};
  }
  const std::string name_a = *a.get("name"), name_b = *b.get("name");
  for (const char* k : {"blob", "vendor", "device", "driver", "api", "cacheuuid"})
    if (!a.get(k)) return {NXRT_CACHE_UNSUPPORTED, fmt::format("the fingerprint has no '{}' field", k)};
  if (*a.get("blob") != *b.get("blob"))
    return {NXRT_CACHE_UNSUPPORTED,
            fmt::format("kernel blob format {}, this plugin reads format {}", *a.get("blob"), *b.get("blob"))};
  if (a.version != b.version)
    return {NXRT_CACHE_RECOMPILE, fmt::format("compiled by Vulkan plugin {}, this is {}", a.version, b.version)};
  if (*a.get("vendor") != *b.get("vendor") || *a.get("device") != *b.get("device"))
    return {NXRT_CACHE_RECOMPILE,
            fmt::format("compiled for vendor {} device {} ('{}'), this device is vendor {} device {} ('{}')", *a.get("vendor"),
                        *a.get("device"), name_a, *b.get("vendor"), *b.get("device"), name_b)};
  for (auto [k, words] : kChoiceFields) {
    const std::string* va = a.get(k);
    const std::string* vb = b.get(k);
    if (!va) return {NXRT_CACHE_UNSUPPORTED, fmt::format("the fingerprint has no '{}' field", k)};
    if (vb && *va != *vb)
      return {NXRT_CACHE_RECOMPILE,
              fmt::format("compiled for {} {} on '{}', this device '{}' has {}", words, *va, name_a, name_b, *vb)};
  }
  for (auto [k, words] : kDriverFields)
    if (*a.get(k) != *b.get(k))
      return {NXRT_CACHE_USABLE, fmt::format("compiled with {} {} on '{}', this device has {}: the SPIR-V and tile choices "
                                             "hold, but the driver's pipeline cache bytes are not used (pipelines compile at load)",
                                             words, *a.get(k), name_a, *b.get(k))};
  // Fields this plugin version does not know, or other values.
  for (auto& [k, v] : a.fields)
    if (k != "name" && (!b.get(k) || *b.get(k) != v))
      return {NXRT_CACHE_RECOMPILE, fmt::format("compiled with {}={}, this session has {}", k, v, b.get(k) ? *b.get(k) : "none")};
  // Every field agrees yet the text differs (another name, repeated or extra text): not a
  // fingerprint this session would write, so nothing proves the blobs are its own.
  return {NXRT_CACHE_RECOMPILE, fmt::format("the fingerprint ({} bytes) is not the one this session writes, though its fields "
                                            "agree: '{}'", compiled.size(), compiled.substr(0, 80))};
}

}  // namespace nxrt::vk
