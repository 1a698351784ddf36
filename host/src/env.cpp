#include "env.hpp"

#include "compiled_model.hpp"
#include "error.hpp"
#include "status.hpp"

#include <boost/dll/runtime_symbol_info.hpp>

#include <sys/auxv.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <optional>
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
  auto folder = find("cpu");
  const std::string key = optimizer_key(level, folder.get());
  if (model->optimized == key) return model;  // a compiled graph, optimized with these settings
  std::shared_ptr<nxrt_model_ir> work =
      owns_model ? std::const_pointer_cast<nxrt_model_ir>(std::move(model)) : clone_model(model);
  optimize(*work, OptimizeOptions{level, folder});
  work->optimized = key;
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
  std::string cache_dir = config.cache_dir;
  for (auto& kv : config.ep_options) {
    if (kv.first == "cache_dir") {  // the host's own option, not an EP's
      cache_dir = kv.second;
      continue;
    }
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
  for (auto& lib : libs) {
    if (!config.target.empty() && eps.empty()) eps.push_back(EpInstance::create_offline(lib, config.target, threads, options));
    else eps.push_back(EpInstance::create(lib, config.device, threads, options, policy));
  }
  if (eps.empty() && fallback_libs.empty()) raise(NXRT_ERR_NOT_FOUND, "none of the requested EPs is available");
  if (!config.target.empty() && (libs.empty() || eps[0]->lib != libs[0]))
    raise(NXRT_ERR_INVALID_ARGUMENT, "a compile target needs its EP first in the EP list");

  // Compiled-model cache: the container to import kernels from, judged against this
  // model's digest and these settings.
  std::string names_text;
  for (auto& lib : libs) names_text += (names_text.empty() ? "" : ",") + lib->name();
  const std::string config_txt = config_text(names_text, fallback, config.opt_level, config.device, options);
  const std::string opt_key = optimizer_key(config.opt_level, find("cpu").get());
  if (auto fresh = model_for_settings(*model, cache_dir, config_txt, opt_key)) {
    model = std::move(fresh);  // the folder's graph was optimized with other settings
    owns_model = true;
  }
  const bool keyed = model->digest != 0;
  std::shared_ptr<KernelCache> cache;
  std::optional<GraphSection> section;
  std::string entry;
  bool will_write = false;
  if (!cache_dir.empty() || !config.compile_to.empty() || model->compiled) {
    std::shared_ptr<const Artifact> src;
    Verdict v;
    std::string mode = "compiled-model";
    if (!cache_dir.empty()) {
      mode = "miss";
      if (!keyed) {
        v = {NXRT_CACHE_RECOMPILE, "the model was made in memory and has no digest to key the cache"};
      } else {
        std::error_code ec;
        if (!std::filesystem::is_directory(cache_dir, ec) && !std::filesystem::create_directories(cache_dir, ec))
          raise(NXRT_ERR_NOT_FOUND, "cache folder '{}' does not exist and cannot be made: {}", cache_dir, ec.message());
        entry = cache_entry_path(cache_dir, model->digest, config_txt);
        if (model->compiled && model->compiled->path() == entry) {
          src = model->compiled;  // the entry the graph came from: opened and checked once
        } else if (std::filesystem::exists(entry, ec)) {
          try {
            src = Artifact::open(entry, &v);
          } catch (const HostError& e) {
            v = {NXRT_CACHE_RECOMPILE, e.what()};
          }
        } else {
          v = {NXRT_CACHE_RECOMPILE, "nothing cached yet for this model and these settings"};
        }
      }
    } else if (model->compiled) {
      src = model->compiled;
    } else {
      mode = "off";
    }
    cache = std::make_shared<KernelCache>(src, v, model->digest, config_txt, mode);
    if (mode == "miss" && cache->report().verdict.usable()) cache->report().mode = "hit";
    // The container keeps the graph as optimized (a warm start skips the optimizer), taken
    // below before the session frees weights it uploaded; level 3's fusion marks are not
    // stored, so there the graph is taken before optimizing.
    will_write = !config.compile_to.empty() || (!entry.empty() && !cache->report().verdict.usable());
    if (will_write && keyed && config.opt_level >= 3) section = graph_section(*model, model->compiled.get());
    if (!config.compile_to.empty() && !keyed)
      raise(NXRT_ERR_INVALID_ARGUMENT, "the model was made in memory and has no digest; compile it from a file");
  }
  const std::string model_path = model->path;
  const uint64_t digest = model->digest;
  const auto t0 = std::chrono::steady_clock::now();
  model = optimized(std::move(model), config.opt_level, owns_model);
  const double optimize_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (will_write && keyed && !section) {
    const bool unchanged = model->compiled && model->compiled->info("optimized") == model->optimized;
    section = graph_section(*model, unchanged ? model->compiled.get() : nullptr);
  }
  auto session = std::make_unique<Session>(std::move(model), std::move(eps), fallback, fallback_libs, threads, config.device,
                                           owns_model, std::move(options), std::move(policy), cache,
                                           /*compile_only=*/!config.target.empty());
  session->load_stages().insert(session->load_stages().begin(), {"optimize", optimize_ms});
  // Write the container: nxrt compile always; a cache folder when its entry was missing or stale.
  const std::string write_to = !config.compile_to.empty() ? config.compile_to : (!entry.empty() && cache->stale() ? entry : "");
  if (!write_to.empty()) {
    const auto t1 = std::chrono::steady_clock::now();
    try {
      if (!section) section = graph_section(session->model(), cache->artifact().get());
      namespace fs = std::filesystem;
      std::error_code ec;
      std::string source = fs::absolute(model_path, ec).string();
      if (!config.compile_to.empty()) {  // beside the model: where it lies relative to the container
        const fs::path rel = fs::absolute(model_path, ec).lexically_relative(fs::absolute(config.compile_to, ec).parent_path());
        if (!rel.empty()) source = rel.string();
      }
      write_compiled_model(*session, *section, digest, config_txt, source, write_to);
      cache->report().written = write_to;
    } catch (const HostError& e) {
      if (!config.compile_to.empty()) throw;
      cache->report().write_error = e.what();  // a read-only cache folder costs speed, not the session
    }
    session->load_stages().emplace_back(
        "export", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count());
  }
  return session;
}

std::shared_ptr<PluginLibrary> Env::find(const std::string& name) const {
  std::lock_guard lock(mu_);
  for (auto& e : entries_) if (e.lib && e.name == name) return e.lib;
  return nullptr;
}

}  // namespace nxrt
