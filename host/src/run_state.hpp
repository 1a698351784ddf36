// Per-run buffers: arenas, slot bindings, streams. Pooled by the session so
// concurrent runs each have their own and sequential runs reuse them.
#pragma once
#include "session.hpp"

#include <atomic>
#include <vector>

namespace nxrt {

struct SlotState {
  void* handle = nullptr;
  uint64_t offset = 0;
  nxrt_dtype dtype = NXRT_DTYPE_UNDEFINED;  // per run: values without a static type get it here
  std::vector<int64_t> dims;
  bool ready = false;
};

struct RunState {
  std::vector<void*> arenas;          // per location
  std::vector<SlotState> state;       // per slot
  std::vector<nxrt_stream*> streams;  // per EP, null without streams
  std::vector<std::pair<int, void*>> device_dynamic;  // (ep, handle), freed after the run
  std::vector<void*> host_dynamic;
  std::vector<HostTensor> outputs;
  const std::atomic<bool>* cancel = nullptr;
  uint64_t run_id = 0;  // this run's id (nxrt_run_options.run_id, ctx_run_id)
};

}  // namespace nxrt
