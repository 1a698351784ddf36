// A prepared model: EP instances, kernels bound to claims, value slots with a
// memory plan, and the step list the executor walks on every Run.
#pragma once
#include "error.hpp"
#include "ir.hpp"
#include "plugin_library.hpp"
#include "host_value.hpp"
#include "output_buffers.hpp"
#include "profiler.hpp"

#include <nxrt/nxrt.h>

struct nxrt_profile_sink;

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace nxrt {

class Env;
class KernelCache;

// Device memory policy of one host session, shared by its EP sessions and by the device
// tensors they made: the cap on what the host asks the EPs for (0: none) and the
// caller's allocator (NULL: the plugins' own).
struct MemoryPolicy {
  uint64_t limit = 0;
  nxrt_device_allocator allocator{};
  bool has_allocator = false;
  std::atomic<uint64_t> in_use{0};  // bytes the host holds over all EPs of the session
};

// What the host asked one EP session for, and holds.
struct EpMemoryUsage {
  uint64_t bytes_in_use = 0, peak_bytes = 0, arena_bytes = 0, allocation_count = 0;
};

// One contiguous copy region (struct_size set).
nxrt_copy_region copy_region(nxrt_memory_kind src_kind, const void* src, uint64_t src_offset, nxrt_memory_kind dst_kind,
                             void* dst, uint64_t dst_offset, uint64_t bytes);

// One plugin session on one device.
struct EpInstance {
  std::shared_ptr<PluginLibrary> lib;
  nxrt_ep_session* session = nullptr;
  uint32_t device = 0;
  bool host_addressable = false;
  bool streams = false;
  bool concurrent = false;
  bool run_hooks = false;         // NXRT_FEATURE_RUN_HOOKS
  bool device_profiling = false;  // NXRT_FEATURE_DEVICE_PROFILING
  int location = 0;  // 0: host memory; >0: this EP's own device memory

  // Opens a plugin session on `device` with the intra-op thread count and the options of
  // `options` that are this plugin's ("<name>." keys; validated against its schema by
  // the caller, see validate_ep_options). A retryable failure is retried once. Throws HostError.
  // `policy` (NULL: none) is shared with the host session: its allocator is handed to the
  // plugin right after session_create (NXRT_FEATURE_EXTERNAL_ALLOCATOR, else an error).
  static std::unique_ptr<EpInstance> create(std::shared_ptr<PluginLibrary> lib, uint32_t device, int threads,
                                            const KeyValues& options = {}, std::shared_ptr<MemoryPolicy> policy = nullptr);
  // A compile-only session for a described device (NXRT_FEATURE_OFFLINE_COMPILE): `device`
  // as key/value text (nxrt_ep.h, session_create_offline). Its kernels are exported, never run.
  static std::unique_ptr<EpInstance> create_offline(std::shared_ptr<PluginLibrary> lib, const KeyValues& device, int threads,
                                                    const KeyValues& options = {});
  bool offline = false;
  // Device memory of this EP session (NXRT_TENSOR_ALIGNMENT-aligned); a retryable
  // failure is retried once, then thrown as a HostError starting with `what`. Going
  // over the policy's limit throws NXRT_ERR_RESOURCE_EXHAUSTED before asking the plugin.
  // `arena`: counted as arena memory in the usage.
  void* alloc_device(uint64_t bytes, const std::string& what, bool arena = false);
  // Frees what alloc_device returned (and updates the usage).
  void free_device(void* handle);
  // The plugin's HOST_PINNED memory (a host pointer), or NULL when it offers none; not
  // counted or capped (host memory). Freed with free_pinned.
  void* alloc_pinned(uint64_t bytes) const;
  void free_pinned(void* pointer) const;
  // One region through the plugin's copy, on `stream` (NULL: complete on return); a
  // failure is thrown naming `what`. Nothing for an empty region.
  void copy(const nxrt_copy_region& region, nxrt_stream* stream, const std::string& what) const;
  // The native handle of DEVICE memory `handle` (NXRT_FEATURE_NATIVE_HANDLES); false when
  // the plugin has none for it (no feature, or NXRT_UNSUPPORTED). Other failures throw.
  bool native_memory(const void* handle, nxrt_native_handle* out) const;
  // Memory someone else owns, `native` as native_memory describes it, as a DEVICE handle
  // of this session (NXRT_FEATURE_MEMORY_IMPORT); freed with free_device, which drops the
  // wrapping only. Not counted or capped. NULL with the reason in `why` when the plugin
  // cannot import it (no feature, or NXRT_UNSUPPORTED); other failures throw.
  void* import_memory(const nxrt_native_handle& native, std::string* why) const;
  EpMemoryUsage usage() const;
  // The plugin's own figures (NXRT_FEATURE_MEMORY_STATS); false without the feature.
  bool plugin_stats(nxrt_memory_stats* out) const;
  ~EpInstance();

  std::shared_ptr<MemoryPolicy> policy;

 private:
  mutable std::mutex mem_mu_;
  std::map<void*, std::pair<uint64_t, bool>> held_;  // handle -> (bytes, arena)
  EpMemoryUsage usage_;
 public:
};

// A value placed in one memory location. A value used on two devices has two slots.
struct Slot {
  const nxrt_value* value = nullptr;
  int location = 0;
  int ep = -1;                  // owning EP for device locations
  nxrt_dtype dtype = NXRT_DTYPE_UNDEFINED;
  std::vector<int64_t> dims;    // static shape when planned
  bool planned = false;         // has an arena offset
  uint64_t offset = 0;
  uint64_t bytes = 0;
  // Fixed data, the same for every run (constants): handle + offset.
  bool fixed = false;
  void* fixed_handle = nullptr;
  uint64_t fixed_offset = 0;
  std::vector<int64_t> fixed_dims;
  int graph_input = -1;   // index into inputs, for host slots of graph inputs
  int graph_output = -1;  // index into outputs, for the host slot of a graph output
};

class HostOp;

struct Step {
  // Host: a node the host runs itself (control flow), ep -1, its data in host memory.
  enum Kind { Kernel, Copy, Host } kind = Kernel;
  int ep = -1;
  std::shared_ptr<const HostOp> host;
  nxrt_kernel* kernel = nullptr;
  std::unique_ptr<std::mutex> serial;  // for plugins without CONCURRENT_RUN
  std::vector<int> inputs;   // slot ids, -1 absent
  std::vector<int> outputs;  // slot ids, -1 absent
  std::vector<bool> captured;  // per input: a constant the kernel keeps itself (graph_capture_constant)
  std::vector<size_t> nodes; // model node indices, for messages
  std::string ops;           // op types of the nodes, '+'-joined (profiles)
  std::string label;         // "node 'conv_3' (Conv)" or "group of 12 nodes"
};

struct Assignment {
  int ep = -1;  // index into eps; -1 with `host`: the host runs it (control flow)
  bool host = false;
  bool fell_back = false;
  std::string reasons;  // why earlier EPs refused it
  // How its kernel computes (ABI 2.5 kernel_describe, printable, cut): the plugin's text for
  // a node of its own; "<ops>: <text>" on the first node of a group and "in the group of
  // '<first>'" on the others; "" when the plugin said nothing.
  std::string kernel;
};

struct RunState;
struct BoundInput;
struct BoundOutput;
struct CallerStream;

// Checks session options against the plugins' schemas before any session_create:
// every "<ep>.<key>" must name an EP of `eps` (or, with fallback, any of `fallback_libs`)
// and a key of its schema, with a value of the declared type; the host's own un-prefixed
// "threads" (an integer >= 0) sets *threads. Throws HostError(INVALID_ARGUMENT) naming
// the key, the EP and its known keys. Returns the options without "threads", last
// value of a repeated key winning.
KeyValues validate_ep_options(const KeyValues& options, const std::vector<std::shared_ptr<PluginLibrary>>& eps,
                              const std::vector<std::shared_ptr<PluginLibrary>>& fallback_libs, int* threads);

class Session {
 public:
  // owns_model: no one else will build a session from `model`, so constants that
  // kernels captured or that were uploaded to a device are freed from it.
  // ep_options: validated options (validate_ep_options), for EPs the partitioner adds by fallback.
  // policy: the memory policy the EPs were created with (fallback EPs get it too).
  Session(std::shared_ptr<const nxrt_model_ir> model, std::vector<std::unique_ptr<EpInstance>> eps,
          bool fallback, std::vector<std::shared_ptr<PluginLibrary>> fallback_libs, int threads, uint32_t device,
          bool owns_model = false, KeyValues ep_options = {}, std::shared_ptr<MemoryPolicy> policy = nullptr,
          std::shared_ptr<KernelCache> cache = nullptr, bool compile_only = false);
  // The program of a control-flow body: `model` (control_flow.hpp's body_model) on the
  // parent's EPs, with its fallback policy, threads, options and memory policy.
  Session(std::shared_ptr<const nxrt_model_ir> model, const Session& parent);
  ~Session();

  // run_options: "<ep>.<key>" = value, forwarded to that EP's on_run_start (the prefix must
  // name an EP of this session). *run_id (may be NULL) gets the run's id.
  void run(const nxrt_host_tensor* inputs, size_t count, std::vector<HostTensor>& outputs,
           const std::atomic<bool>* cancel = nullptr, const KeyValues* run_options = nullptr, uint64_t* run_id = nullptr);
  // The same with I/O binding: inputs in host or device memory (by name, each once);
  // bound_outputs (NULL: all host) has one entry per graph output; device-bound outputs
  // appear in `outputs` with their shape and no data. With `stream`, that EP's work is
  // queued on the caller's stream, and when nothing of the run touched the host on it
  // the run returns without waiting for it. `values` (may be NULL) gets one entry per
  // graph output: its sequence or optional, null for a tensor output.
  void run_bound(const std::vector<BoundInput>& inputs, std::vector<BoundOutput>* bound_outputs,
                 std::vector<HostTensor>& outputs, const std::atomic<bool>* cancel, const KeyValues* run_options,
                 uint64_t* run_id, const CallerStream* stream, std::vector<ValuePtr>* values = nullptr);
  // Index of `ep` in eps(), -1 if it is not this session's.
  int ep_index(const EpInstance* ep) const;
  // A caller's stream is going away: runs that returned without waiting for it are waited
  // for now, so nothing later touches the stream's (or its native semaphore's) state.
  void settle_stream(nxrt_stream* stream);
  // Expires when the session is destroyed (streams and tensors may outlive it).
  std::weak_ptr<const char> alive_token() const { return alive_; }

  const nxrt_model_ir& model() const { return *model_; }
  const std::vector<std::shared_ptr<EpInstance>>& eps() const { return eps_; }
  // Where released outputs leave their buffers (nxrt_outputs_release) for the next runs;
  // shared, so outputs may outlive the session.
  const std::shared_ptr<OutputBuffers>& output_buffers() const { return output_buffers_; }
  const std::shared_ptr<MemoryPolicy>& memory_policy() const { return policy_; }
  // A value whose size is known only at run time may hold at most `bytes` (0: no cap); a larger
  // one stops the run with ValueTooLarge. Constant folding sets it: a few constant bytes must not
  // make session creation allocate gigabytes.
  void cap_dynamic_values(uint64_t bytes) { dynamic_value_cap_ = bytes; }
  uint64_t dynamic_value_cap() const { return dynamic_value_cap_; }
  const std::vector<Assignment>& assignments() const { return assign_; }  // by node index
  size_t copy_count() const { return copies_; }
  // For a node the host runs with bodies (If, Loop, Scan, SequenceMap): where each body's
  // nodes run, one line per node, indented by depth ("" for any other node).
  const std::string& body_placement(size_t node_index) const;
  const std::vector<uint64_t>& arena_bytes() const { return arena_bytes_; }  // per memory location
  // Where its kernels came from (compiled_model.hpp); NULL when the session used no cache.
  const std::shared_ptr<KernelCache>& kernel_cache() const { return cache_; }
  // Built to be exported only (nxrt compile): kernels, no memory plan, never run.
  bool compile_only() const { return compile_only_; }
  // Milliseconds of each preparation stage, in order: "optimize" (set by the caller),
  // "partition", "compile" (kernel_create / kernel_import), "plan", "upload", "export".
  std::vector<std::pair<std::string, double>>& load_stages() { return load_stages_; }
  const std::vector<std::pair<std::string, double>>& load_stages() const { return load_stages_; }
  // The EP whose pinned host memory backs the host arena (-1: plain host memory): the
  // first device EP that copies to or from host values, when it offers HOST_PINNED.
  int pinned_ep() const { return pinned_ep_; }

  // Profiling: per-step wall times of every run, on any thread, from start to end.
  void start_profiling();
  // Writes the Chrome trace and stops; returns the number of events. Throws when
  // profiling was not started or the file cannot be written (the profile is kept).
  size_t end_profiling(const std::string& path);

  // Used by the kernel context (host services).
  const std::vector<Slot>& slots() const { return slots_; }
  const std::vector<Step>& steps() const { return steps_; }

 private:
  void prepare(bool fallback, const std::vector<std::shared_ptr<PluginLibrary>>& fallback_libs, int threads, uint32_t device);
  void partition(bool fallback, const std::vector<std::shared_ptr<PluginLibrary>>& fallback_libs, int threads,
                 uint32_t device);
  void bind_kernels();
  void describe_kernel(const EpInstance& ep, const Step& step);
  void plan_memory();
  void upload_constants();
  // upload_constants on a CPU-kind device: `ids` that are views of the compiled model's
  // mapping, wrapped in place by one memory_import; returns the ids left to copy.
  std::vector<int> import_mapped_constants(int ep, const std::vector<int>& ids);
  void merge_device_events(Profiler& prof, const std::vector<std::unique_ptr<nxrt_profile_sink>>& sinks,
                           const std::vector<Profiler::Clock::time_point>& step_begin, const std::vector<char>& step_ran,
                           uint64_t run_index) const;
  std::vector<BoundInput> resolve_inputs(const std::vector<BoundInput>& inputs) const;
  std::unique_ptr<RunState> acquire_run_state();
  void release_run_state(std::unique_ptr<RunState> rs);

  std::shared_ptr<const nxrt_model_ir> model_;
  std::vector<std::shared_ptr<EpInstance>> eps_;
  std::shared_ptr<MemoryPolicy> policy_;
  std::vector<Assignment> assign_;
  std::vector<std::vector<size_t>> groups_;  // claims: node indices
  std::vector<int> group_ep_;
  std::vector<Slot> slots_;
  std::vector<Step> steps_;
  std::vector<uint64_t> arena_bytes_;  // per location
  std::vector<std::pair<int, void*>> constant_buffers_;  // (ep, handle) uploaded once
  bool owns_model_ = false;
  // Host constants the run reads: held here, so the model may drop its copies.
  std::vector<std::shared_ptr<const HostTensor>> held_constants_;
  std::vector<int> output_slot_;       // per graph output: its host slot
  // Where the I/O binding can cut a transfer, found once (bind_kernels):
  std::vector<std::vector<int>> input_readers_;  // per graph input: the steps reading its host slot
  std::vector<int> output_home_;       // per graph output: the slot a kernel writes it into, -1 none
  std::vector<int> output_download_;   // per graph output: the copy home -> host slot, -1 none
  std::vector<char> output_host_read_; // per graph output: a step or another output reads the host slot
  size_t copies_ = 0;
  std::map<size_t, std::string> body_placement_;  // by node index (host steps with bodies)
  int pinned_ep_ = -1;
  KeyValues ep_options_;
  // What bodies' programs are prepared with (the parent's settings).
  bool fallback_ = false;
  std::vector<std::shared_ptr<PluginLibrary>> fallback_libs_;
  int threads_ = 0;
  uint32_t device_ = 0;
  std::atomic<uint64_t> next_run_id_{1};
  std::mutex profile_mu_;
  std::shared_ptr<Profiler> profiler_;
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<RunState>> pool_;
  std::shared_ptr<const char> alive_ = std::make_shared<const char>(0);
  std::shared_ptr<OutputBuffers> output_buffers_;  // released outputs' buffers, for the next runs
  std::shared_ptr<KernelCache> cache_;
  bool compile_only_ = false;
  uint64_t dynamic_value_cap_ = 0;
  std::vector<std::pair<std::string, double>> load_stages_;
};

// A run stopped at cap_dynamic_values' cap: `value` (a model value) would have held `bytes`.
struct ValueTooLarge : HostError {
  ValueTooLarge(const nxrt_value* v, uint64_t bytes, uint64_t cap);
  const nxrt_value* value;
};

}  // namespace nxrt
