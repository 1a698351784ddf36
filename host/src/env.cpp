#include "env.hpp"

#include "error.hpp"
#include "status.hpp"

#include <boost/dll/runtime_symbol_info.hpp>

#include <sys/auxv.h>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

namespace nxrt {

namespace fs = std::filesystem;

std::vector<std::string> Env::discovery_dirs() {
  std::vector<std::string> dirs;
  boost::dll::fs::error_code ec;
  auto exe = boost::dll::program_location(ec);
  if (!ec) {
    dirs.push_back(exe.parent_path().string());
    dirs.push_back((exe.parent_path().parent_path() / "lib").string());
  }
  // libnxrt's own folder, and its nxrt/ subfolder: where an installed package (cmake --install,
  // the .deb) puts the plugins, so they are found wherever the prefix is, without configuration.
  auto self = boost::dll::this_line_location(ec);
  if (!ec) {
    dirs.push_back(self.parent_path().string());
    dirs.push_back((self.parent_path() / "nxrt").string());
  }
  for (auto& d : env_plugin_dirs(std::getenv("NXRT_PLUGIN_PATH"), secure_process())) dirs.push_back(std::move(d));
  return dirs;
}

bool Env::secure_process() { return getauxval(AT_SECURE) != 0; }

std::vector<std::string> Env::env_plugin_dirs(const char* value, bool secure) {
  std::vector<std::string> dirs;
  if (!value) return dirs;
  if (secure) {
    // Whoever started a setuid/setgid program chose its environment: a plugin path from
    // there would run their code with the program's privileges.
    host_services().log(NXRT_LOG_WARNING, "nxrt", "NXRT_PLUGIN_PATH is ignored in a setuid/setgid process");
    return dirs;
  }
  std::string s(value);
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(':', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) dirs.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return dirs;
}

void Env::discover() {
  std::set<std::string> seen;
  for (const auto& dir : discovery_dirs()) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (auto& e : fs::directory_iterator(dir, ec)) {
      std::string f = e.path().filename().string();
      if (f.rfind("libnxrt_ep_", 0) == 0 && e.path().extension() == ".so") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
      std::string canon = fs::weakly_canonical(f, ec).string();
      if (!seen.insert(canon).second) continue;
      try {
        add(canon);
      } catch (const HostError&) {
        // recorded in the entry by add()
      }
    }
  }
}

size_t Env::add(const std::string& path) {
  std::error_code ec;
  std::string canon = fs::weakly_canonical(path, ec).string();
  if (ec) canon = path;
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].path == canon && entries_[i].lib)
        raise(NXRT_ERR_BUSY, "plugin '{}' is already registered as '{}'", canon, entries_[i].name);
  }
  PluginEntry e;
  e.path = canon;
  std::string stem = fs::path(canon).stem().string();
  e.name = stem.rfind("libnxrt_ep_", 0) == 0 ? stem.substr(11) : stem;
  try {
    e.lib = PluginLibrary::load(canon);
    e.name = e.lib->name();
  } catch (const HostError& err) {
    e.error = err.what();
    std::lock_guard lock(mu_);
    entries_.push_back(e);
    throw;
  }
  std::lock_guard lock(mu_);
  for (auto& other : entries_)
    if (other.lib && other.name == e.name) {
      std::string msg = fmt::format("plugin '{}' is named '{}', which '{}' already uses", canon, e.name, other.path);
      e.lib.reset();
      e.error = msg;
      entries_.push_back(e);
      raise(NXRT_ERR_BUSY, "{}", msg);
    }
  entries_.push_back(std::move(e));
  return entries_.size() - 1;
}

void Env::remove(const std::string& name) {
  std::lock_guard lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->name != name || !it->lib) continue;
    long users = it->lib.use_count() - 1;
    if (users > 0)
      raise(NXRT_ERR_BUSY, "plugin '{}' is still used by {} live object(s); release its sessions first", name, users);
    entries_.erase(it);  // the last reference: shuts the plugin down and unloads it
    return;
  }
  raise(NXRT_ERR_NOT_FOUND, "no plugin named '{}' is registered", name);
}

std::vector<PluginEntry> Env::entries() const {
  std::lock_guard lock(mu_);
  return entries_;
}

std::shared_ptr<const nxrt_model_ir> Env::optimized(std::shared_ptr<const nxrt_model_ir> model, int level,
                                                    bool owns_model) const {
  if (level < 0 || level > kMaxOptLevel)
    raise(NXRT_ERR_INVALID_ARGUMENT, "optimization level {} is not one of 0..{}", level, kMaxOptLevel);
  std::shared_ptr<nxrt_model_ir> work =
      owns_model ? std::const_pointer_cast<nxrt_model_ir>(std::move(model)) : clone_model(model);
  optimize(*work, OptimizeOptions{level, find("cpu")});
  return work;
}

std::unique_ptr<Session> Env::create_session(std::shared_ptr<const nxrt_model_ir> model, const SessionConfig& config,
                                             bool owns_model) const {
  if (!model) raise(NXRT_ERR_INVALID_ARGUMENT, "no model given");
  if (config.threads < 0) raise(NXRT_ERR_INVALID_ARGUMENT, "threads must be >= 0, got {}", config.threads);
  if (config.opt_level < 0 || config.opt_level > kMaxOptLevel)
    raise(NXRT_ERR_INVALID_ARGUMENT, "optimization level {} is not one of 0..{}", config.opt_level, kMaxOptLevel);
  std::vector<std::string> names;
  bool fallback = config.fallback;
  auto all = entries();
  std::string list = config.eps;
  if (list == "auto") {
    // Best available: plugins whose first device is an accelerator, then the embedded
    // default (cpu), with fallback so every node finds a home.
    for (auto& e : all)
      if (e.lib && !e.lib->devices().empty() && e.lib->devices()[0].kind != NXRT_DEVICE_CPU) names.push_back(e.name);
    list = "cpu";
    fallback = true;
  }
  {
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty()) names.push_back(item);
  }
  if (names.empty()) raise(NXRT_ERR_INVALID_ARGUMENT, "no EP requested (give an EP list such as 'cpu')");
  auto available = [&] {
    std::string s;
    for (auto& e : all) if (e.lib) s += (s.empty() ? "" : ", ") + e.name;
    return s.empty() ? std::string("none found; set NXRT_PLUGIN_PATH") : s;
  };
  std::vector<std::shared_ptr<PluginLibrary>> libs;
  std::vector<std::string> seen, skipped;  // skipped: listed, could not load, left out by fallback
  for (auto& name : names) {
    const PluginEntry* entry = nullptr;
    for (auto& e : all)
      if (e.name == name) {
        entry = &e;
        if (e.lib) break;
      }
    if (!entry) raise(NXRT_ERR_NOT_FOUND, "unknown EP '{}' (available: {})", name, available());
    if (std::find(seen.begin(), seen.end(), name) != seen.end())
      raise(NXRT_ERR_INVALID_ARGUMENT, "EP '{}' is listed twice", name);
    seen.push_back(name);
    if (!entry->lib) {
      if (fallback) {
        skipped.push_back(name);
        continue;
      }
      raise(NXRT_ERR_PLUGIN, "EP '{}' is unavailable: {}", name, entry->error);
    }
    if (entry->lib->devices().empty() && fallback) continue;
    libs.push_back(entry->lib);
  }
  // Fallback order: the embedded default (cpu) first, then the rest as discovered.
  std::vector<std::shared_ptr<PluginLibrary>> fallback_libs;
  if (fallback) {
    for (auto& e : all) if (e.lib && e.name == "cpu") fallback_libs.push_back(e.lib);
    for (auto& e : all) if (e.lib && e.name != "cpu") fallback_libs.push_back(e.lib);
  }
  // Options are checked before any plugin session exists.
  // Options of a listed EP that fallback left out because it could not load have no
  // schema to check against and no session to go to: dropped.
  KeyValues given;
  for (auto& kv : config.ep_options) {
    const size_t dot = kv.first.find('.');
    const std::string ep = dot == std::string::npos ? std::string() : kv.first.substr(0, dot);
    if (ep.empty() || std::find(skipped.begin(), skipped.end(), ep) == skipped.end()) given.push_back(kv);
  }
  int threads = config.threads;
  KeyValues options = validate_ep_options(given, libs, fallback_libs, &threads);
  auto policy = std::make_shared<MemoryPolicy>();
  policy->limit = config.device_memory_limit;
  if (config.device_allocator) {
    const nxrt_device_allocator& a = *config.device_allocator;
    if (a.struct_size < offsetof(nxrt_device_allocator, free) + sizeof(a.free) || !a.alloc || !a.free)
      raise(NXRT_ERR_INVALID_ARGUMENT, "the device allocator has struct_size {} or a NULL callback", a.struct_size);
    std::memcpy(&policy->allocator, &a, std::min<size_t>(a.struct_size, sizeof policy->allocator));
    policy->allocator.struct_size = sizeof policy->allocator;
    policy->has_allocator = true;
  }
  std::vector<std::unique_ptr<EpInstance>> eps;
  for (auto& lib : libs) eps.push_back(EpInstance::create(lib, config.device, threads, options, policy));
  if (eps.empty() && fallback_libs.empty()) raise(NXRT_ERR_NOT_FOUND, "none of the requested EPs is available");
  model = optimized(std::move(model), config.opt_level, owns_model);
  return std::make_unique<Session>(std::move(model), std::move(eps), fallback, fallback_libs, threads, config.device,
                                   owns_model, std::move(options), std::move(policy));
}

std::shared_ptr<PluginLibrary> Env::find(const std::string& name) const {
  std::lock_guard lock(mu_);
  for (auto& e : entries_) if (e.lib && e.name == name) return e.lib;
  return nullptr;
}

}  // namespace nxrt
