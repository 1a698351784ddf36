// Per-step wall-clock profile of a session's runs, written as a Chrome trace
// (chrome://tracing, Perfetto). Host clock: for an EP with streams a kernel's
// time is the time to enqueue its work; the run's span includes the final
// stream synchronization, so it is the true end-to-end time.
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
