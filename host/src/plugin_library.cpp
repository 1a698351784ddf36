#include "plugin_library.hpp"

#include "error.hpp"
#include "host_tensor.hpp"
#include "status.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <dlfcn.h>
#include <memory>

namespace nxrt {

std::string DeviceInfo::describe() const {
  static const char* kinds[] = {"cpu", "gpu", "npu", "other"};
  std::string out = fmt::format("kind: {}\nname: {}\nvendor: {}\n", kinds[kind <= 3 ? kind : 3], name, vendor);
  if (vendor_id || device_id) out += fmt::format("pci: {:04x}:{:04x}\n", vendor_id, device_id);
  out += fmt::format("memory: {} MiB\nhost_addressable: {}\n", memory_bytes >> 20, host_addressable ? "yes" : "no");
  std::string types;
  for (int t = 1; t < 64; ++t)
    if (dtypes & (1ull << t)) {
      if (!types.empty()) types += ',';
      types += dtype_name(nxrt_dtype(t));
    }
  out += fmt::format("dtypes: {}\n", types);
  for (auto& [k, v] : properties) out += fmt::format("{}: {}\n", k, v);
  return out;
}

void check_plugin(const PluginLibrary& lib, nxrt_status* status, const std::string& what) {
  if (!status) return;
  std::unique_ptr<nxrt_status> s(status);
  // A plugin refusing work it already claimed is a plugin failure: NXRT_ERR_UNSUPPORTED is
  // kept for nodes nobody claims, so callers can tell the two apart by code.
  nxrt_error_code code = s->code == NXRT_INVALID_ARGUMENT ? NXRT_ERR_INVALID_ARGUMENT : NXRT_ERR_PLUGIN;
  std::string msg = s->message.empty() ? "(the plugin gave no message)" : s->message;
  raise(code, "{} ({}): {}: {}", what, lib.name(), status_code_name(s->code), msg);
}

void throw_abi_exception(const std::string& who, std::string_view fn) {
  raise(NXRT_ERR_PLUGIN, "plugin '{}' threw a C++ exception through the ABI in {}", who, fn);
}

namespace {

void require_functions(const nxrt_plugin_api& a, uint64_t features, const std::filesystem::path& path) {
  struct Fn { const char* name; const void* p; };
  const Fn required[] = {
      {"shutdown", (const void*)a.shutdown}, {"device_count", (const void*)a.device_count},
      {"no_device_reason", (const void*)a.no_device_reason}, {"device_info", (const void*)a.device_info},
      {"session_create", (const void*)a.session_create}, {"session_release", (const void*)a.session_release},
      {"get_capability", (const void*)a.get_capability}, {"kernel_create", (const void*)a.kernel_create},
      {"kernel_compute", (const void*)a.kernel_compute}, {"kernel_release", (const void*)a.kernel_release},
      {"memory_alloc", (const void*)a.memory_alloc}, {"memory_free", (const void*)a.memory_free},
      {"copy", (const void*)a.copy}};
  for (auto& f : required)
    if (!f.p) raise(NXRT_ERR_PLUGIN, "plugin '{}' has no {} function (required by ABI 1.0)", path.string(), f.name);
  if (features & NXRT_FEATURE_STREAMS) {
    const Fn streams[] = {
        {"stream_create", (const void*)a.stream_create}, {"stream_synchronize", (const void*)a.stream_synchronize},
        {"stream_release", (const void*)a.stream_release}, {"event_create", (const void*)a.event_create},
        {"event_record", (const void*)a.event_record}, {"stream_wait_event", (const void*)a.stream_wait_event},
        {"event_synchronize", (const void*)a.event_synchronize}, {"event_release", (const void*)a.event_release}};
    for (auto& f : streams)
      if (!f.p) raise(NXRT_ERR_PLUGIN, "plugin '{}' declares streams but has no {} function", path.string(), f.name);
  }
}

bool valid_name(const char* n) {
  if (!n || !*n || std::strlen(n) > 64) return false;
  for (const char* p = n; *p; ++p)
    if (!(std::isalnum((unsigned char)*p) || *p == '_' || *p == '-')) return false;
  return true;
}

}  // namespace

std::shared_ptr<PluginLibrary> PluginLibrary::load(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) raise(NXRT_ERR_NOT_FOUND, "plugin file '{}' does not exist", path.string());
  std::shared_ptr<PluginLibrary> lib(new PluginLibrary());
  lib->path_ = path;
  boost::dll::fs::error_code dec;
  lib->lib_.load(boost::dll::fs::path(path.string()), boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local, dec);
  if (dec) {
    const char* why = dlerror();  // the loader's own words beat Boost's generic error
    raise(NXRT_ERR_PLUGIN, "cannot load plugin '{}': {}", path.string(), why ? why : dec.message());
  }
  if (!lib->lib_.has(NXRT_EP_ENTRY_SYMBOL))
    raise(NXRT_ERR_PLUGIN, "'{}' is not an nxrt plugin: it does not export {}", path.string(), NXRT_EP_ENTRY_SYMBOL);
  auto negotiate = lib->lib_.get<int32_t(const nxrt_negotiate_request*, nxrt_negotiate_reply*)>(NXRT_EP_ENTRY_SYMBOL);

  nxrt_negotiate_request rq{};
  rq.struct_size = sizeof rq;
  rq.abi_major = NXRT_EP_ABI_MAJOR;
  rq.abi_minor = NXRT_EP_ABI_MINOR;
  rq.host = &host_services();
  nxrt_negotiate_reply rp{};
  rp.struct_size = sizeof rp;
  int32_t rc = guarded(path.string(), "nxrt_ep_negotiate", [&] { return negotiate(&rq, &rp); });
  rp.message[sizeof rp.message - 1] = '\0';
  if (rc != NXRT_OK)
    raise(NXRT_ERR_PLUGIN, "plugin '{}' refused negotiation ({}): {}", path.string(), status_code_name(nxrt_status_code(rc)),
          rp.message[0] ? rp.message : "no reason given");
  if (rp.abi_major != NXRT_EP_ABI_MAJOR || rp.abi_minor > NXRT_EP_ABI_MINOR)
    raise(NXRT_ERR_PLUGIN, "plugin '{}' answered ABI {}.{}, host speaks {}.{}", path.string(), rp.abi_major, rp.abi_minor,
          NXRT_EP_ABI_MAJOR, NXRT_EP_ABI_MINOR);
  if (!rp.api) raise(NXRT_ERR_PLUGIN, "plugin '{}' accepted negotiation but returned a null function table", path.string());
  if (!NXRT_HAS_FIELD(rp.api, nxrt_plugin_api, event_release))
    raise(NXRT_ERR_PLUGIN, "plugin '{}' function table is {} bytes, ABI {}.{} needs {}", path.string(), rp.api->struct_size,
          rp.abi_major, rp.abi_minor, sizeof(nxrt_plugin_api));
  lib->api_ = rp.api;
  lib->abi_major_ = rp.abi_major;
  lib->abi_minor_ = rp.abi_minor;
  lib->features_ = rp.features;
  // From here on, failing must still shut the plugin down: the destructor does.
  try {
    require_functions(*rp.api, rp.features, path);
  } catch (...) {
    lib->api_ = nullptr;  // an incomplete table: do not call its shutdown
    throw;
  }
  if (!valid_name(rp.api->name))
    raise(NXRT_ERR_PLUGIN, "plugin '{}' has an invalid EP name (want 1-64 characters of [A-Za-z0-9_-])", path.string());
  lib->name_ = rp.api->name;
  lib->version_ = rp.api->version ? rp.api->version : "";

  uint32_t count = 0;
  check_plugin(*lib, guarded(path.string(), "device_count", [&] { return rp.api->device_count(&count); }), "listing devices");
  if (count > 1024) raise(NXRT_ERR_PLUGIN, "plugin '{}' reports {} devices", path.string(), count);
  if (count == 0) {
    const char* why = guarded(path.string(), "no_device_reason", [&] { return rp.api->no_device_reason(); });
    lib->no_device_reason_ = why && *why ? why : "the plugin found no device and gave no reason";
  }
  for (uint32_t i = 0; i < count; ++i) {
    nxrt_device_info info{};
    info.struct_size = sizeof info;
    check_plugin(*lib, guarded(path.string(), "device_info", [&] { return rp.api->device_info(i, &info); }),
                 fmt::format("reading device {}", i));
    DeviceInfo d;
    auto field = [&](auto member) { return info.struct_size >= member; };
    d.kind = info.kind;
    if (field(offsetof(nxrt_device_info, name) + sizeof(info.name)) && info.name) d.name = info.name;
    if (field(offsetof(nxrt_device_info, vendor) + sizeof(info.vendor)) && info.vendor) d.vendor = info.vendor;
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, device_id)) { d.vendor_id = info.vendor_id; d.device_id = info.device_id; }
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, uuid)) std::memcpy(d.uuid, info.uuid, 16);
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, memory_bytes)) d.memory_bytes = info.memory_bytes;
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, dtypes)) d.dtypes = info.dtypes;
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, host_addressable)) d.host_addressable = info.host_addressable != 0;
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, properties) && info.properties)
      for (uint32_t p = 0; p < info.property_count && p < 4096; ++p)
        if (info.properties[p].key && info.properties[p].value)
          d.properties.emplace_back(info.properties[p].key, info.properties[p].value);
    lib->devices_.push_back(std::move(d));
  }
  return lib;
}

PluginLibrary::~PluginLibrary() {
  if (api_ && api_->shutdown) {
    try {
      api_->shutdown();
    } catch (...) {
      // A plugin that throws from shutdown is reported by conformance; never propagate here.
    }
  }
  // lib_ unloads after this body, once nothing of the plugin is alive.
}

}  // namespace nxrt
