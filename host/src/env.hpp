// The plugin registry: discovery, explicit registration, unregistration; and the
// EP-list policy (ordering, "auto", --fallback) that turns a request into a session.
#pragma once
#include "plugin_library.hpp"
#include "session.hpp"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace nxrt {

struct PluginEntry {
  std::string path;
  std::string name;   // EP name, or the file stem when loading failed
  std::string error;  // why it could not load
  std::shared_ptr<PluginLibrary> lib;
};

// What a caller asks of a session (the C API's nxrt_session_options).
struct SessionConfig {
  std::string eps = "cpu";  // ordered, comma-separated; "auto": accelerators first, then cpu, with fallback
  bool fallback = false;    // nodes no listed EP claims go to any loaded EP that claims them
  int threads = 0;          // intra-op threads, 0 = plugin default
  uint32_t device = 0;      // device index for every EP
  KeyValues ep_options;     // "<ep>.<key>" = value (validated against the schemas), "threads"
  uint64_t device_memory_limit = 0;                  // bytes the host may ask the EPs for; 0: no cap
  const nxrt_device_allocator* device_allocator = nullptr;  // every EP's backing memory from the caller
  int opt_level = kDefaultOptLevel;  // graph optimization level, 0..3 (optimizer.hpp)
  // Compiled-model cache folder ("" none; also the un-prefixed EP option "cache_dir"):
  // sessions import kernels from its entry for the model and these settings, and write
  // the entry when it is missing or stale (compiled_model.hpp).
  std::string cache_dir;
  // nxrt compile: write the session's compiled model to this file. With `target`, the
  // first EP compiles for that described device (compile-only session, never run).
  std::string compile_to;
  KeyValues target;
};

class Env {
 public:
  // Folders searched: the executable's, ../lib beside it, libnxrt's, then NXRT_PLUGIN_PATH
  // (not in a setuid/setgid process).
  static std::vector<std::string> discovery_dirs();
  // The folders of a NXRT_PLUGIN_PATH value (':'-separated); none when `secure`.
  static std::vector<std::string> env_plugin_dirs(const char* value, bool secure);
  static bool secure_process();  // getauxval(AT_SECURE): setuid/setgid or similar
  void discover();
  // Loads a plugin file; throws HostError. Returns the entry's index.
  size_t add(const std::string& path);
  void remove(const std::string& name);

  std::vector<PluginEntry> entries() const;
  std::shared_ptr<PluginLibrary> find(const std::string& name) const;

  // Resolves the EP list (auto, fallback order: cpu first, then as discovered), validates
  // the options against the plugins' schemas, opens the EP sessions and prepares the
  // session. owns_model: see Session. Throws HostError.
  // Optimizes the model for a session at `level`, folding constants on this env's CPU
  // plugin: in place when owns_model, else on a copy (other sessions keep the original).
  std::shared_ptr<const nxrt_model_ir> optimized(std::shared_ptr<const nxrt_model_ir> model, int level, bool owns_model) const;

  std::unique_ptr<Session> create_session(std::shared_ptr<const nxrt_model_ir> model, const SessionConfig& config,
                                          bool owns_model) const;

 private:
  mutable std::mutex mu_;
  std::vector<PluginEntry> entries_;
};

}  // namespace nxrt
