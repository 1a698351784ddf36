#include "plugin_library.hpp"

#include "error.hpp"
#include "host_tensor.hpp"
#include "sha256.hpp"
#include "status.hpp"
#include "version.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <regex>
#include <sys/stat.h>
#include <unistd.h>

namespace nxrt {

std::mutex& loader_mutex();

bool DeviceInfo::has_uuid() const {
  for (uint8_t b : uuid)
    if (b) return true;
  return false;
}

std::string DeviceInfo::uuid_str() const {
  std::string s;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", uuid[i]);
  }
  return s;
}

std::string DeviceInfo::describe() const {
  static const char* kinds[] = {"cpu", "gpu", "npu", "other"};
  std::string out = fmt::format("kind: {}\nname: {}\nvendor: {}\n", kinds[kind <= 3 ? kind : 3], name, vendor);
  if (vendor_id || device_id) out += fmt::format("pci: {:04x}:{:04x}\n", vendor_id, device_id);
  if (!pci_bus_id.empty()) out += fmt::format("pci_bus_id: {}\n", pci_bus_id);
  if (has_uuid()) out += fmt::format("uuid: {}\n", uuid_str());
  out += fmt::format("memory: {} MiB\n", memory_bytes >> 20);
  if (memory_free_bytes) out += fmt::format("memory_free: {} MiB\n", memory_free_bytes >> 20);
  out += fmt::format("host_addressable: {}\n", host_addressable ? "yes" : "no");
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

std::vector<std::pair<std::string, std::string>> DeviceInfo::description() const {
  static const char* kinds[] = {"cpu", "gpu", "npu", "other"};
  std::string types;
  for (int t = 1; t < 64; ++t)
    if (dtypes & (1ull << t)) types += (types.empty() ? "" : ",") + std::string(dtype_name(nxrt_dtype(t)));
  std::vector<std::pair<std::string, std::string>> d = {
      {"kind", kinds[kind <= 3 ? kind : 3]},     {"name", name},
      {"vendor", vendor},                         {"vendor_id", std::to_string(vendor_id)},
      {"device_id", std::to_string(device_id)},  {"uuid", has_uuid() ? uuid_str() : ""},
      {"memory_bytes", std::to_string(memory_bytes)}, {"host_addressable", host_addressable ? "1" : "0"},
      {"pci_bus_id", pci_bus_id},                {"dtypes", types}};
  for (auto& p : properties) d.push_back(p);
  return d;
}

const char* option_type_name(nxrt_option_type t) {
  switch (t) {
    case NXRT_OPTION_STRING: return "string";
    case NXRT_OPTION_INT: return "int";
    case NXRT_OPTION_FLOAT: return "float";
    case NXRT_OPTION_BOOL: return "bool";
    case NXRT_OPTION_PATH: return "path";
  }
  return "string";  // a type newer than this host: taken as text
}

bool option_value_ok(nxrt_option_type t, const std::string& v) {
  switch (t) {
    case NXRT_OPTION_INT: {
      if (v.empty() || std::isspace(static_cast<unsigned char>(v[0]))) return false;
      errno = 0;
      char* end = nullptr;
      (void)std::strtoll(v.c_str(), &end, 10);
      return errno == 0 && end && *end == '\0';
    }
    case NXRT_OPTION_FLOAT: {
      if (v.empty() || std::isspace(static_cast<unsigned char>(v[0]))) return false;
      char* end = nullptr;
      (void)std::strtod(v.c_str(), &end);
      return end && *end == '\0';
    }
    case NXRT_OPTION_BOOL: return v == "0" || v == "1" || v == "true" || v == "false";
    default: return true;
  }
}

const OptionInfo* PluginLibrary::find_option(const std::string& key) const {
  for (auto& o : options_)
    if (o.name == key) return &o;
  return nullptr;
}

std::string PluginLibrary::option_names() const {
  std::string s;
  for (auto& o : options_) s += (s.empty() ? "" : ", ") + o.name;
  return s;
}

void check_plugin(const PluginLibrary& lib, nxrt_status* status, const std::string& what, bool user_input) {
  if (!status) return;
  StatusPtr s(status);
  // A plugin refusing work it already claimed is a plugin failure: NXRT_ERR_UNSUPPORTED is
  // kept for nodes nobody claims, so callers can tell the two apart by code.
  nxrt_error_code code = user_input && s->code == NXRT_INVALID_ARGUMENT ? NXRT_ERR_INVALID_ARGUMENT : NXRT_ERR_PLUGIN;
  std::string msg = s->message.empty() ? "(the plugin gave no message)" : s->message;
  raise(code, "{} ({}): {}: {}", what, lib.name(), status_code_name(s->code), msg);
}

void throw_abi_exception(const std::string& who, std::string_view fn) {
  raise(NXRT_ERR_PLUGIN, "plugin '{}' threw a C++ exception through the ABI in {}", who, fn);
}

namespace {

struct Fn {
  const char* name;
  const void* p;
};
#define NXRT_FN(a, f) Fn{#f, reinterpret_cast<const void*>((a).f)}

void require_functions(const nxrt_plugin_api& a, uint64_t features, const std::filesystem::path& path) {
  const Fn required[] = {NXRT_FN(a, shutdown),       NXRT_FN(a, device_count),   NXRT_FN(a, no_device_reason),
                         NXRT_FN(a, device_info),    NXRT_FN(a, option_count),   NXRT_FN(a, option_info),
                         NXRT_FN(a, session_create), NXRT_FN(a, session_release), NXRT_FN(a, get_capability),
                         NXRT_FN(a, kernel_create),  NXRT_FN(a, kernel_compute), NXRT_FN(a, kernel_release),
                         NXRT_FN(a, memory_alloc),   NXRT_FN(a, memory_free),    NXRT_FN(a, copy)};
  for (auto& f : required)
    if (!f.p) raise(NXRT_ERR_PLUGIN, "plugin '{}' has no {} function (required by ABI 2.0)", path.string(), f.name);
  if (features & NXRT_FEATURE_STREAMS) {
    const Fn streams[] = {NXRT_FN(a, stream_create), NXRT_FN(a, stream_synchronize), NXRT_FN(a, stream_release),
                          NXRT_FN(a, event_create),  NXRT_FN(a, event_record),       NXRT_FN(a, stream_wait_event),
                          NXRT_FN(a, event_synchronize), NXRT_FN(a, event_release)};
    for (auto& f : streams)
      if (!f.p) raise(NXRT_ERR_PLUGIN, "plugin '{}' declares streams but has no {} function", path.string(), f.name);
  }
  if ((features & NXRT_FEATURE_DEVICE_PROFILING) && !(features & NXRT_FEATURE_RUN_HOOKS))
    raise(NXRT_ERR_PLUGIN, "plugin '{}' declares device profiling without run hooks (device profiling needs them)",
          path.string());
  if (features & NXRT_FEATURE_RUN_HOOKS) {
    const Fn hooks[] = {NXRT_FN(a, on_run_start), NXRT_FN(a, on_run_end)};
    for (auto& f : hooks)
      if (!f.p) raise(NXRT_ERR_PLUGIN, "plugin '{}' declares run hooks but has no {} function", path.string(), f.name);
  }
  // 2.1 (2.2, 2.4) bits are set only when the agreed minor is >= 1 (2, 4), and then the table
  // was checked to reach copy_peer (memory_import, session_create_offline): each function is
  // read only when its bit is set, so these reads stay inside a smaller (older) table.
  struct Interop {
    uint64_t bit;
    const char* feature;
    const char* name;
    const void* (*read)(const nxrt_plugin_api&);
  };
#define NXRT_LAZY_FN(f) #f, [](const nxrt_plugin_api& t) { return reinterpret_cast<const void*>(t.f); }
  const Interop interop[] = {{NXRT_FEATURE_NATIVE_HANDLES, "native-handles", NXRT_LAZY_FN(native_handle)},
                             {NXRT_FEATURE_STREAM_IMPORT, "stream-import", NXRT_LAZY_FN(stream_import)},
                             {NXRT_FEATURE_EXTERNAL_ALLOCATOR, "external-allocator", NXRT_LAZY_FN(session_set_allocator)},
                             {NXRT_FEATURE_MEMORY_STATS, "memory-stats", NXRT_LAZY_FN(session_stats)},
                             {NXRT_FEATURE_PEER_COPY, "peer-copy", NXRT_LAZY_FN(copy_peer)},
                             {NXRT_FEATURE_MEMORY_IMPORT, "memory-import", NXRT_LAZY_FN(memory_import)},
                             {NXRT_FEATURE_KERNEL_CACHE, "kernel-cache", NXRT_LAZY_FN(session_fingerprint)},
                             {NXRT_FEATURE_KERNEL_CACHE, "kernel-cache", NXRT_LAZY_FN(cache_check)},
                             {NXRT_FEATURE_KERNEL_CACHE, "kernel-cache", NXRT_LAZY_FN(kernel_export)},
                             {NXRT_FEATURE_KERNEL_CACHE, "kernel-cache", NXRT_LAZY_FN(kernel_import)},
                             {NXRT_FEATURE_OFFLINE_COMPILE, "offline-compile", NXRT_LAZY_FN(session_create_offline)}};
#undef NXRT_LAZY_FN
  for (auto& i : interop)
    if ((features & i.bit) && !i.read(a))
      raise(NXRT_ERR_PLUGIN, "plugin '{}' declares {} but has no {} function", path.string(), i.feature, i.name);
  if ((features & NXRT_FEATURE_OFFLINE_COMPILE) && !(features & NXRT_FEATURE_KERNEL_CACHE))
    raise(NXRT_ERR_PLUGIN, "plugin '{}' declares offline-compile without kernel-cache (it needs it)", path.string());
  if ((features & NXRT_FEATURE_STREAM_IMPORT) &&
      (features & (NXRT_FEATURE_STREAMS | NXRT_FEATURE_NATIVE_HANDLES)) != (NXRT_FEATURE_STREAMS | NXRT_FEATURE_NATIVE_HANDLES))
    raise(NXRT_ERR_PLUGIN, "plugin '{}' declares stream-import without streams and native-handles (it needs both)",
          path.string());
}
#undef NXRT_FN

bool valid_name(const char* n) {
  if (!n || !*n || std::strlen(n) > 64) return false;
  for (const char* p = n; *p; ++p)
    if (!(std::isalnum((unsigned char)*p) || *p == '_' || *p == '-')) return false;
  return true;
}

// The plugin's major, when a refusal tells it: the reply's abi_major if the plugin set
// it to something else than ours, else the first "ABI <n>" in its message naming
// another major. 0 when unknown.
uint32_t refusing_major(const nxrt_negotiate_reply& rp) {
  if (rp.abi_major != 0 && rp.abi_major != NXRT_EP_ABI_MAJOR) return rp.abi_major;
  static const std::regex abi(R"(ABI\s+v?(\d+))");
  std::string msg = rp.message;
  for (std::sregex_iterator it(msg.begin(), msg.end(), abi), end; it != end; ++it) {
    unsigned long m = std::strtoul((*it)[1].str().c_str(), nullptr, 10);
    if (m != NXRT_EP_ABI_MAJOR && m < 1000) return uint32_t(m);
  }
  return 0;
}

std::string major_mismatch(const std::filesystem::path& path, uint32_t plugin_major) {
  std::string built = plugin_major ? fmt::format("is built for nxrt EP ABI {}.x", plugin_major)
                                   : std::string("is built for another nxrt EP ABI major");
  return fmt::format("plugin '{}' {}; this host speaks {}.{} (rebuild it against the {}.x header)",
                     path.filename().string(), built, NXRT_EP_ABI_MAJOR, NXRT_EP_ABI_MINOR, NXRT_EP_ABI_MAJOR);
}

std::string str(const char* s) { return s ? s : ""; }

// The digests NXRT_PLUGIN_ALLOWLIST's file lists: the first word of each line that is not
// empty or a '#' comment, 64 hex digits (so `sha256sum *.so > list` writes one). A list
// that cannot be read or has a malformed line refuses every plugin: it fails closed.
std::set<std::string> read_allowlist(const std::string& file) {
  std::ifstream in(file);
  if (!in) raise(NXRT_ERR_PLUGIN, "NXRT_PLUGIN_ALLOWLIST names '{}', which cannot be read; no plugin is loaded without it", file);
  std::set<std::string> digests;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos || line[start] == '#') continue;
    std::string word = line.substr(start, line.find_first_of(" \t\r", start) - start);
    std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (word.size() != 64 || word.find_first_not_of("0123456789abcdef") != std::string::npos)
      raise(NXRT_ERR_PLUGIN, "plugin allow-list '{}' line {}: '{}' is not a SHA-256 digest (64 hex digits)", file, n, word);
    digests.insert(word);
  }
  return digests;
}

bool info_logging() {
  const char* e = std::getenv("NXRT_LOG_LEVEL");  // as host_services' log reads it
  return e && std::atoi(e) <= int(NXRT_LOG_INFO);
}

// The plugin file, opened once. The checks, the digest and the load all go through this
// descriptor, so the file that was checked is the one loaded, whatever happens to the path
// in between (docs/security.md, "time of check to time of use").
struct CheckedFile {
  int fd = -1;
  std::string digest;  // "" when not computed
};

// Before any of its code runs (docs/security.md): a plugin file, or the folder holding it,
// that anyone may write is refused (anyone could have replaced the code); with
// NXRT_PLUGIN_ALLOWLIST set, the file's SHA-256 must be listed. The digest is computed when
// an allow-list is set or info logging is on. Returns the open file; the caller owns fd.
CheckedFile open_checked(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(path, ec);
  if (ec) raise(NXRT_ERR_NOT_FOUND, "plugin file '{}' cannot be resolved: {}", path.string(), ec.message());
  // `real` has no symbolic link left: one appearing at its last part now is a swap (ELOOP).
  CheckedFile f;
  f.fd = ::open(real.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (f.fd < 0) {
    const int err = errno;
    raise(err == ENOENT ? NXRT_ERR_NOT_FOUND : NXRT_ERR_PLUGIN, "cannot open plugin file '{}': {}", real.string(),
          err == ELOOP ? "it was replaced by a symbolic link while being checked" : std::strerror(err));
  }
  try {
    struct stat st {};
    if (::fstat(f.fd, &st) != 0)
      raise(NXRT_ERR_NOT_FOUND, "cannot stat plugin file '{}': {}", real.string(), std::strerror(errno));
    if (!S_ISREG(st.st_mode)) raise(NXRT_ERR_PLUGIN, "plugin '{}' is not a regular file", real.string());
    if (st.st_mode & S_IWOTH)
      raise(NXRT_ERR_PLUGIN, "plugin '{}' is world-writable (mode {:03o}); nxrt refuses to load it, since anyone could have "
            "replaced its code (chmod o-w it)", real.string(), st.st_mode & 07777);
    const std::filesystem::path folder = real.parent_path();
    if (::stat(folder.c_str(), &st) == 0 && (st.st_mode & S_IWOTH))
      raise(NXRT_ERR_PLUGIN, "plugin '{}' is in the world-writable folder '{}' (mode {:03o}); nxrt refuses to load it, since "
            "anyone could have replaced it (move it, or chmod o-w the folder)", real.string(), folder.string(),
            st.st_mode & 07777);
    const char* list = std::getenv("NXRT_PLUGIN_ALLOWLIST");
    const bool allowlist = list && *list;
    if (allowlist || info_logging()) f.digest = sha256_fd(f.fd, real.string());
    if (allowlist && !read_allowlist(list).count(f.digest))
      raise(NXRT_ERR_PLUGIN, "plugin '{}' (SHA-256 {}) is not in the allow-list '{}' (NXRT_PLUGIN_ALLOWLIST)", real.string(),
            f.digest, list);
  } catch (...) {
    ::close(f.fd);
    throw;
  }
  return f;
}

// The name dlopen() gets for an open file: /proc/<pid>/fd/N, which the loader opens as the
// same file (checked by device and inode, so a /proc that is absent or not procfs is an
// error, never a load of something else). The pid, not "self": debuggers and sanitizer
// symbolizers read the library from its name in their own process.
std::string fd_path(int fd, const std::filesystem::path& path) {
  const std::string name = fmt::format("/proc/{}/fd/{}", ::getpid(), fd);
  struct stat by_fd {}, by_name {};
  if (::fstat(fd, &by_fd) != 0 || ::stat(name.c_str(), &by_name) != 0 || by_fd.st_dev != by_name.st_dev ||
      by_fd.st_ino != by_name.st_ino)
    raise(NXRT_ERR_PLUGIN, "cannot load plugin '{}': nxrt loads a plugin through the file it checked (/proc/<pid>/fd), and "
          "/proc is not mounted here", path.string());
  return name;
}

// ld.so knows a library by every name it was opened under, and matches a new dlopen() by
// name before it looks at the file: a name /proc/<pid>/fd/N kept by a loaded library after
// N was closed and reused for another plugin would return that library. So every load of
// one file (device, inode) goes through one descriptor, shared while any PluginLibrary has
// the file loaded, and closed only once ld.so no longer has it: a /proc name in ld.so's
// list always means the file it was checked as. Under loader_mutex.
struct SharedFd {
  int fd;
  int users;
};
std::map<std::pair<dev_t, ino_t>, SharedFd>& shared_fds() {
  static std::map<std::pair<dev_t, ino_t>, SharedFd> fds;
  return fds;
}

std::pair<dev_t, ino_t> file_id(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) raise(NXRT_ERR_PLUGIN, "cannot stat an open plugin file: {}", std::strerror(errno));
  return {st.st_dev, st.st_ino};
}

// Takes `fd`; returns the descriptor to load the file through (fd itself, or the one already
// shared for the same file, fd then being closed).
int share_fd(int fd) {
  std::pair<dev_t, ino_t> id;
  try {
    id = file_id(fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
  auto [it, inserted] = shared_fds().try_emplace(id, SharedFd{fd, 0});
  if (!inserted) ::close(fd);
  ++it->second.users;
  return it->second.fd;
}

// One user of `fd` is done (its handle closed). The last closes it, unless ld.so still has
// the library (loaded by someone else, or never unloadable): then its name stays valid.
void unshare_fd(int fd) noexcept {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return;
  auto it = shared_fds().find({st.st_dev, st.st_ino});
  if (it == shared_fds().end() || --it->second.users > 0) return;
  shared_fds().erase(it);
  char name[40];
  std::snprintf(name, sizeof name, "/proc/%d/fd/%d", int(::getpid()), fd);
  if (void* still = ::dlopen(name, RTLD_LAZY | RTLD_NOLOAD)) {
    ::dlclose(still);
    return;  // the descriptor stays open for as long as the process runs
  }
  ::close(fd);
}

}  // namespace

std::shared_ptr<PluginLibrary> PluginLibrary::load(const std::filesystem::path& given) {
  std::error_code ec;
  if (!std::filesystem::exists(given, ec)) raise(NXRT_ERR_NOT_FOUND, "plugin file '{}' does not exist", given.string());
  std::filesystem::path path = std::filesystem::absolute(given, ec);
  if (ec) path = given;
  const CheckedFile checked = open_checked(path);
  std::shared_ptr<PluginLibrary> lib(new PluginLibrary());
  lib->path_ = path;
  lib->sha256_ = checked.digest;
  if (testing::after_plugin_check) testing::after_plugin_check(path);
  std::string by_fd;
  boost::dll::fs::error_code dec;
  const char* why = nullptr;
  {
    std::lock_guard lock(loader_mutex());
    lib->fd_ = share_fd(checked.fd);  // released by the destructor
    by_fd = fd_path(lib->fd_, path);
    lib->lib_.load(boost::dll::fs::path(by_fd), boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local, dec);
    if (dec) why = dlerror();  // the loader's own words beat Boost's generic error
  }
  if (dec) {
    // The loader names the file by its /proc name: say the path instead.
    std::string msg = why ? why : dec.message();
    for (size_t at = 0; (at = msg.find(by_fd, at)) != std::string::npos; at += path.string().size())
      msg.replace(at, by_fd.size(), path.string());
    raise(NXRT_ERR_PLUGIN, "cannot load plugin '{}': {}", path.string(), msg);
  }
  if (!lib->lib_.has(NXRT_EP_ENTRY_SYMBOL))
    raise(NXRT_ERR_PLUGIN, "'{}' is not an nxrt plugin: it does not export {}", path.string(), NXRT_EP_ENTRY_SYMBOL);
  auto negotiate = lib->lib_.get<int32_t(const nxrt_negotiate_request*, nxrt_negotiate_reply*)>(NXRT_EP_ENTRY_SYMBOL);

  const std::string path_str = path.string();
  nxrt_negotiate_request rq{};
  rq.struct_size = sizeof rq;
  rq.abi_major = NXRT_EP_ABI_MAJOR;
  rq.abi_minor = NXRT_EP_ABI_MINOR;
  rq.host = &host_services();
  rq.library_path = path_str.c_str();
  rq.host_name = kHostName;
  rq.host_version = kHostVersion;
  nxrt_negotiate_reply rp{};
  rp.struct_size = sizeof rp;
  int32_t rc = guarded(path_str, "nxrt_ep_negotiate", [&] { return negotiate(&rq, &rp); });
  rp.message[sizeof rp.message - 1] = '\0';
  if (rc != NXRT_OK) {
    std::string why = rp.message[0] ? rp.message : "no reason given";
    if (rc == NXRT_VERSION_MISMATCH) raise(NXRT_ERR_PLUGIN, "{}: {}", major_mismatch(path, refusing_major(rp)), why);
    raise(NXRT_ERR_PLUGIN, "plugin '{}' refused negotiation ({}): {}", path_str, status_code_name(nxrt_status_code(rc)), why);
  }
  // The frozen prefix (struct_size..message) is readable whatever the plugin's major.
  if (rp.abi_major != NXRT_EP_ABI_MAJOR) raise(NXRT_ERR_PLUGIN, "{}", major_mismatch(path, rp.abi_major));
  // Callee-filled: the plugin wrote back the size it filled; fields beyond it are absent.
  if (!NXRT_HAS_FIELD(&rp, nxrt_negotiate_reply, plugin))
    raise(NXRT_ERR_PLUGIN, "plugin '{}' filled {} bytes of the negotiation reply, ABI {}.0 needs {}", path_str, rp.struct_size,
          NXRT_EP_ABI_MAJOR, sizeof(nxrt_negotiate_reply));
  // The agreed minor is min(host, plugin); a plugin answering a newer one than we offered
  // is held to ours.
  const uint32_t minor = std::min<uint32_t>(rp.abi_minor, NXRT_EP_ABI_MINOR);
  if (!rp.api) raise(NXRT_ERR_PLUGIN, "plugin '{}' accepted negotiation but returned a null function table", path_str);
  lib->api_ = rp.api;
  lib->instance_ = rp.plugin;
  lib->abi_major_ = rp.abi_major;
  lib->abi_minor_ = minor;
  // Bits the agreed minor does not define are a newer plugin's features: off here.
  lib->features_ = rp.features & NXRT_FEATURES_OF_MINOR(minor);
  // From here on, failing must still shut the instance down: the destructor does.
  lib->shutdown_needed_ = NXRT_HAS_FIELD(rp.api, nxrt_plugin_api, shutdown) && rp.api->shutdown != nullptr;
  // A table smaller than the agreed minor's is refused; a larger one is a newer minor
  // whose extra entries we ignore.
  // The last entry each minor appended: the table must reach it.
  const size_t table_needs = minor >= 5   ? offsetof(nxrt_plugin_api, kernel_describe) + sizeof(nxrt_plugin_api::kernel_describe)
                             : minor >= 4 ? offsetof(nxrt_plugin_api, session_create_offline) + sizeof(nxrt_plugin_api::session_create_offline)
                             : minor >= 2 ? offsetof(nxrt_plugin_api, memory_import) + sizeof(nxrt_plugin_api::memory_import)
                             : minor >= 1 ? offsetof(nxrt_plugin_api, copy_peer) + sizeof(nxrt_plugin_api::copy_peer)
                                          : offsetof(nxrt_plugin_api, on_run_end) + sizeof(nxrt_plugin_api::on_run_end);
  if (rp.api->struct_size < table_needs)
    raise(NXRT_ERR_PLUGIN, "plugin '{}' function table is {} bytes, ABI {}.{} needs {}", path_str, rp.api->struct_size,
          rp.abi_major, minor, table_needs);
  require_functions(*rp.api, lib->features_, path);
  if (!valid_name(rp.api->name))
    raise(NXRT_ERR_PLUGIN, "plugin '{}' has an invalid EP name (want 1-64 characters of [A-Za-z0-9_-])", path_str);
  lib->name_ = rp.api->name;
  lib->version_ = str(rp.api->version);
  const nxrt_plugin_api& api = *rp.api;
  nxrt_plugin* inst = rp.plugin;

  // Option schema.
  uint32_t n_options = guarded(path_str, "option_count", [&] { return api.option_count(inst); });
  if (n_options > 1024) raise(NXRT_ERR_PLUGIN, "plugin '{}' declares {} options", path_str, n_options);
  const std::string prefix = lib->name_ + ".";
  for (uint32_t i = 0; i < n_options; ++i) {
    nxrt_option_info info{};
    info.struct_size = sizeof info;
    check_plugin(*lib, guarded(path_str, "option_info", [&] { return api.option_info(inst, i, &info); }),
                 fmt::format("reading option {}", i));
    OptionInfo o;
    if (NXRT_HAS_FIELD(&info, nxrt_option_info, type)) o.type = info.type;
    if (NXRT_HAS_FIELD(&info, nxrt_option_info, name)) o.name = str(info.name);
    if (NXRT_HAS_FIELD(&info, nxrt_option_info, default_value)) o.default_value = str(info.default_value);
    if (NXRT_HAS_FIELD(&info, nxrt_option_info, help)) o.help = str(info.help);
    if (o.name.size() <= prefix.size() || o.name.compare(0, prefix.size(), prefix) != 0)
      raise(NXRT_ERR_PLUGIN, "plugin '{}' declares option {} named '{}', which lacks its '{}' prefix", path_str, i, o.name,
            prefix);
    if (lib->find_option(o.name)) raise(NXRT_ERR_PLUGIN, "plugin '{}' declares option '{}' twice", path_str, o.name);
    lib->options_.push_back(std::move(o));
  }

  // Devices.
  uint32_t count = 0;
  check_plugin(*lib, guarded(path_str, "device_count", [&] { return api.device_count(inst, &count); }), "listing devices");
  if (count > 1024) raise(NXRT_ERR_PLUGIN, "plugin '{}' reports {} devices", path_str, count);
  if (count == 0) {
    const char* why = guarded(path_str, "no_device_reason", [&] { return api.no_device_reason(inst); });
    lib->no_device_reason_ = why && *why ? why : "the plugin found no device and gave no reason";
  }
  for (uint32_t i = 0; i < count; ++i) {
    nxrt_device_info info{};
    info.struct_size = sizeof info;
    check_plugin(*lib, guarded(path_str, "device_info", [&] { return api.device_info(inst, i, &info); }),
                 fmt::format("reading device {}", i));
    DeviceInfo d;
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, kind)) d.kind = info.kind;
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, name)) d.name = str(info.name);
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, vendor)) d.vendor = str(info.vendor);
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, device_id)) { d.vendor_id = info.vendor_id; d.device_id = info.device_id; }
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, uuid)) std::memcpy(d.uuid, info.uuid, 16);
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, memory_bytes)) d.memory_bytes = info.memory_bytes;
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, memory_free_bytes)) d.memory_free_bytes = info.memory_free_bytes;
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, dtypes)) d.dtypes = info.dtypes;
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, host_addressable)) d.host_addressable = info.host_addressable != 0;
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, properties) && info.properties)
      for (uint32_t p = 0; p < info.property_count && p < 4096; ++p) {
        const nxrt_property* prop = info.properties[p];
        if (!prop || !NXRT_HAS_FIELD(prop, nxrt_property, value)) continue;
        if (prop->key && prop->value) d.properties.emplace_back(prop->key, prop->value);
      }
    if (NXRT_HAS_FIELD(&info, nxrt_device_info, pci_bus_id)) d.pci_bus_id = str(info.pci_bus_id);
    lib->devices_.push_back(std::move(d));
  }
  if (info_logging()) {
    const std::string msg = fmt::format("loaded plugin '{}' {} from '{}' (SHA-256 {}, ABI {}.{})", lib->name_, lib->version_,
                                        path_str, lib->sha256_, lib->abi_major_, lib->abi_minor_);
    host_services().log(NXRT_LOG_INFO, "nxrt", msg.c_str());
  }
  return lib;
}

// Every dlopen and dlclose of a plugin happens under this lock. ld.so serialises them
// anyway, but with a lock of its own that ThreadSanitizer cannot see: this one gives
// TSan the order, so a library unloaded by one thread and mapped again at the same
// address by another is not reported as racing with itself. It costs nothing.
std::mutex& loader_mutex() {
  static std::mutex mu;
  return mu;
}

PluginLibrary::~PluginLibrary() {
  if (shutdown_needed_ && api_ && api_->shutdown) {
    try {
      api_->shutdown(instance_);
    } catch (...) {
      // A plugin that throws from shutdown is reported by conformance; never propagate here.
    }
  }
  // Nothing of the plugin is alive now: unload, under the loader lock (see loader_mutex).
  std::lock_guard lock(loader_mutex());
  lib_.unload();
  if (fd_ >= 0) unshare_fd(fd_);
}

}  // namespace nxrt
