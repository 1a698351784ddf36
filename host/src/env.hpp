// The plugin registry: discovery, explicit registration, unregistration.
#pragma once
#include "plugin_library.hpp"

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

class Env {
 public:
  // Folders searched: the executable's, ../lib beside it, libnxrt's, then NXRT_PLUGIN_PATH.
  static std::vector<std::string> discovery_dirs();
  void discover();
  // Loads a plugin file; throws HostError. Returns the entry's index.
  size_t add(const std::string& path);
  void remove(const std::string& name);

  std::vector<PluginEntry> entries() const;
  std::shared_ptr<PluginLibrary> find(const std::string& name) const;

 private:
  mutable std::mutex mu_;
  std::vector<PluginEntry> entries_;
};

}  // namespace nxrt
