// The runs of one Vulkan session between on_run_start and on_run_end: whether
// each is profiled, its run options, and the Timings of the kernels it
// submitted. Runs on one session may overlap, so everything is keyed by run id
// under a mutex; a kernel learns its run from ctx_run_id.
#pragma once
#include "program.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace nxrt::vk {

class RunRegistry {
 public:
  // One device-side kernel event of a finished run, on the device clock.
  struct Event {
    size_t node;
    std::string name;
    uint64_t start_ns, end_ns;
  };

  void start(uint64_t run_id, bool profiling, std::map<std::string, std::string> options = {}) {
    std::lock_guard lock(mu_);
    Run& r = runs_[run_id];
    r.profiling = profiling;
    r.options = std::move(options);
    r.timings.clear();
  }
  // False for a run never started (a host without run hooks: nothing is profiled).
  bool profiled(uint64_t run_id) const {
    std::lock_guard lock(mu_);
    auto it = runs_.find(run_id);
    return it != runs_.end() && it->second.profiling;
  }
  void add(uint64_t run_id, std::shared_ptr<Timing> t) {
    if (!t) return;
    std::lock_guard lock(mu_);
    auto it = runs_.find(run_id);
    if (it != runs_.end()) it->second.timings.push_back(std::move(t));
  }
  // Forgets the run; with `read`, returns one event per kernel execution of it
  // in submission order (reading waits for the timestamps: call it after the
  // run's streams were synchronized).
  std::vector<Event> finish(uint64_t run_id, bool read) {
    std::vector<std::shared_ptr<Timing>> timings;
    {
      std::lock_guard lock(mu_);
      auto it = runs_.find(run_id);
      if (it == runs_.end()) return {};
      timings = std::move(it->second.timings);
      runs_.erase(it);
    }
    std::vector<Event> out;
    if (!read) return out;
    for (auto& t : timings) {
      auto [s, e] = t->read();
      out.push_back({t->node, t->name, s, e});
    }
    return out;
  }
  size_t open_runs() const {
    std::lock_guard lock(mu_);
    return runs_.size();
  }

 private:
  struct Run {
    bool profiling = false;
    std::map<std::string, std::string> options;
    std::vector<std::shared_ptr<Timing>> timings;
  };
  mutable std::mutex mu_;
  std::map<uint64_t, Run> runs_;
};

}  // namespace nxrt::vk
