// Per-step wall-clock profile of a session's runs, written as a Chrome trace
// (chrome://tracing, Perfetto). Host clock: for an EP with streams a kernel's
// time is the time to enqueue its work; the run's span includes the final
// stream synchronization, so it is the true end-to-end time.
//
// Device tracks: a plugin declaring NXRT_FEATURE_DEVICE_PROFILING reports each
// kernel's device-side time in on_run_end, on the device's own clock. Those
// events go on a separate track per EP ("<ep> device", cat "device"). Clock
// alignment, per run and EP: the device event that starts first is placed at the
// host start time of the step of that kernel (the step whose first node is the
// event's node_index; the EP's first step of the run if none matches); every other
// event of that run and EP keeps its device-clock distance to it. So a device track
// shows the device's own durations and gaps, anchored where the host began
// submitting the first kernel; queueing delay before that kernel is not shown.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace nxrt {

class Profiler {
 public:
  using Clock = std::chrono::steady_clock;

  struct Event {
    std::string name;  // step label or "run"
    std::string cat;   // "run", "kernel", "copy"
    std::string ep;
    std::string ops;   // op types of the step's nodes, '+'-joined
    Clock::time_point begin, end;
    uint64_t thread = 0;
    uint64_t run = 0;
    std::string track;  // "" : the thread's row; else a named row ("vulkan device")
    int64_t node = -1;  // device events: the kernel's first node
  };

  Profiler() : origin_(Clock::now()) {}
  uint64_t next_run() {
    std::lock_guard lock(mu_);
    return runs_++;
  }
  void add(Event e);
  // Writes the trace and returns its event count; throws HostError when the file
  // cannot be written.
  size_t write_chrome_trace(const std::string& path) const;
  size_t event_count() const;

 private:
  Clock::time_point origin_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
  uint64_t runs_ = 0;
};

}  // namespace nxrt
