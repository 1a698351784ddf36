// Per-run buffers: arenas, slot bindings, streams. Pooled by the session so
// concurrent runs each have their own and sequential runs reuse them.
#pragma once
#include "io_binding.hpp"
#include "session.hpp"
#include "string_tensor.hpp"

#include <atomic>
#include <mutex>
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
  int pinned_arena_ep = -1;           // the host arena is this EP's HOST_PINNED memory (-1: plain)
  std::vector<SlotState> state;       // per slot
  std::vector<nxrt_stream*> streams;  // per EP, null without streams
  std::vector<std::pair<int, void*>> device_dynamic;  // (ep, handle), freed after the run
  std::vector<void*> host_dynamic;
  std::vector<HostTensor> outputs;
  // Per slot: the sequence or optional it holds this run (null for tensors); per graph output likewise.
  std::vector<ValuePtr> values;
  std::vector<ValuePtr> output_values;
  const std::atomic<bool>* cancel = nullptr;
  uint64_t run_id = 0;  // this run's id (nxrt_run_options.run_id, ctx_run_id)
  // I/O binding of this run: per slot, the graph output whose bound device memory it is
  // written into (-1 none; empty when nothing is bound), and the bindings.
  std::vector<int> output_override;
  std::vector<BoundOutput>* bound_outputs = nullptr;
  // Per EP: an event recorded on a caller's stream that a run returned without waiting
  // for; the next run on this state orders its work for that EP after it.
  std::vector<nxrt_event*> pending;
  std::vector<char> pending_set;
  std::vector<nxrt_stream*> pending_stream;  // the caller's stream each was recorded on
  // String tensors: bytes kernels wrote this run (ctx_output_string_set) and the stores of
  // host-step results the run's slots point into. Graph outputs copy theirs out at the end.
  std::shared_ptr<StringPool> strings;
  std::mutex strings_mu;  // guards creating `strings` (ctx_output of a string output)
  std::vector<std::shared_ptr<const void>> keep;
  // Per EP: events for ordering inside a run (downloads the host waits for later,
  // uploads whose host source must stay unchanged), reused from run to run.
  std::vector<std::vector<nxrt_event*>> events;
};

}  // namespace nxrt
