#include "env.hpp"

#include "error.hpp"

#include <boost/dll/runtime_symbol_info.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

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
  auto self = boost::dll::this_line_location(ec);
  if (!ec) dirs.push_back(self.parent_path().string());
  if (const char* p = std::getenv("NXRT_PLUGIN_PATH")) {
    std::string s(p);
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find(':', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) dirs.push_back(s.substr(start, end - start));
      start = end + 1;
    }
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

std::shared_ptr<PluginLibrary> Env::find(const std::string& name) const {
  std::lock_guard lock(mu_);
  for (auto& e : entries_) if (e.lib && e.name == name) return e.lib;
  return nullptr;
}

}  // namespace nxrt
