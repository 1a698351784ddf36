// The host's definition of the ABI's profile sink: device-side timings one EP
// session reports in on_run_end of one profiled run.
#pragma once
#include <nxrt_ep.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

struct nxrt_profile_sink {
  struct Event {
    size_t node_index;  // the kernel's first node (model-wide index)
    std::string name;
    uint64_t start_ns, end_ns;  // the device's own clock
  };
  std::mutex mu;
  std::vector<Event> events;
};
