// A minimal nxrt host, independent of libnxrt, used by the abi, interop and
// stress suites: it loads a plugin with dlopen, negotiates with hand-built requests,
// serves the host-services table (real, inspectable status objects, graph
// views of small hand-built graphs, claim sinks, kernel contexts) and records
// every contract violation it sees so checks can fail on them.
#pragma once
#include <nxrt_ep.h>
#include <nxrt_sdk/dtype.hpp>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

// The opaque ABI types, defined by this host.
struct nxrt_graph;
struct nxrt_status {
  uint32_t magic;
  nxrt_status_code code;
  int retryable;
  std::string message;
};

struct nxrt_value {
  std::string name;
  const nxrt_graph* owner = nullptr;  // the whole graph (value_is_graph_output)
  nxrt_dtype dtype = NXRT_DTYPE_FLOAT32;
  int64_t rank = 0;
  std::vector<int64_t> dims;
  bool constant = false;
  std::vector<uint8_t> data;
  // A kernel_create view's copy of a builder value: its constant data is the builder's
  // (not poisoned: ctx_input hands the same constant to every run).
  const nxrt_value* origin = nullptr;
};

struct nxrt_attribute {
  std::string name;
  nxrt_attribute_type type = NXRT_ATTR_UNDEFINED;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
};

struct nxrt_node {
  size_t index = 0;
  std::string name, op_type, domain;
  std::vector<const nxrt_value*> inputs, outputs;
  std::vector<nxrt_attribute> attrs;
};

struct nxrt_graph {
  std::vector<const nxrt_node*> nodes;
  std::vector<const nxrt_value*> inputs, outputs;
  std::map<std::string, int64_t> opsets;
  // A claim's view while kernel_create runs on it, and the constants the
  // kernel captured (graph_capture_constant): ctx_input gives them data = NULL.
  std::atomic<bool> creating{false};
  std::mutex mu;
  std::set<const nxrt_value*> captured;
};

struct nxrt_claim_sink {
  const nxrt_graph* graph = nullptr;
  uint64_t features = 0;
  bool active = true;
  std::mutex mu;
  std::vector<std::vector<size_t>> claims;
  std::map<size_t, std::pair<int, std::string>> refusals;
  std::vector<std::string> violations;
};

// Collects device timings during on_run_end (profiled runs).
struct nxrt_profile_sink {
  struct Event {
    size_t node_index;
    std::string name;
    uint64_t start, end;
  };
  std::mutex mu;
  bool active = true;
  std::vector<Event> events;
  std::vector<std::string> violations;
};

namespace conf {

class Plugin;

// Process-wide record of what the plugin did with host services.
struct HostLog {
  std::atomic<long> statuses_created{0};
  std::atomic<long> statuses_released{0};
  // While set, status_create returns the static out-of-memory status (as a
  // host that cannot allocate does); releasing that one is a no-op.
  std::atomic<bool> starve_statuses{false};
  std::mutex mu;
  std::vector<std::string> violations;  // misuse of host services
  void violation(const std::string& v);
  std::vector<std::string> take();
};
HostLog& host_log();

// Host-side status helpers.
bool is_live_status(const nxrt_status* s);
// Validates a status the plugin returned; consumes (frees) it. Returns a
// description "CODE: message" and sets *problem when the status is malformed.
std::string consume_status(nxrt_status* s, nxrt_status_code* code, std::string* problem);
const char* status_code_name(int code);

// The static status status_create returns when it cannot allocate.
const nxrt_status* oom_status();

// The mini-host's identity in the negotiation request.
constexpr const char* kHostName = "nxrt-conformance";
constexpr const char* kHostVersion = "2.0.0";
// The minor the mini-host speaks: it is the oldest host of major 2 (abi and
// stress suites). The interop suite negotiates as the newest host (kInteropMinor) to
// reach the 2.1 and 2.2 entry points; the services table did not change in 2.1 or 2.2.
constexpr uint32_t kHostMinor = 0;
constexpr uint32_t kInteropMinor = 2;
// The cache suite negotiates as a 2.4 host (the compiled-kernel cache entry points).
constexpr uint32_t kCacheMinor = 4;
// abi/kernel.describe negotiates as a 2.5 host (kernel_describe).
constexpr uint32_t kDescribeMinor = 5;

// The host services table. `full` is the ABI 2.0 table (abi_minor 0).
const nxrt_host_services* host_table_full();
// The same table as a 2.1 host offers it (abi_minor 1; 2.1 appended no host service).
const nxrt_host_services* host_table_21();
// The table as a 2.4 host offers it (ctx_output_string_set answers that no STRING output is bound).
const nxrt_host_services* host_table_24();
const nxrt_host_services* host_table_25();
// A table claiming minor 7 with a larger struct_size (fields appended).
const nxrt_host_services* host_table_newer();
// A truncated table: struct_size stops before ctx_run_id; the fields past it
// point at traps that record a violation when called.
const nxrt_host_services* host_table_truncated();

// A small owned graph.
class GraphBuilder {
 public:
  const nxrt_value* value(const std::string& name, nxrt_dtype t, std::vector<int64_t> dims);
  // An initializer: value_is_constant, value_constant gives `data`.
  const nxrt_value* constant(const std::string& name, nxrt_dtype t, std::vector<int64_t> dims, std::vector<uint8_t> data);
  const nxrt_node* node(const std::string& op, const std::string& domain, std::vector<const nxrt_value*> in,
                        std::vector<const nxrt_value*> out, std::vector<nxrt_attribute> attrs = {});
  nxrt_graph& graph() { return g_; }
  const nxrt_graph& graph() const { return g_; }
  // The view of one claim: nodes by index, external inputs and outputs.
  std::unique_ptr<nxrt_graph> subgraph(const std::vector<size_t>& node_indices) const;
  // The same view built on a copy of every node, value and attribute (see OwnedView).
  std::unique_ptr<struct OwnedView> owned_subgraph(const std::vector<size_t>& node_indices) const;

 private:
  std::deque<nxrt_value> values_;
  std::deque<nxrt_node> nodes_;
  nxrt_graph g_;
};

// A view for kernel_create on memory of its own. Views are valid only during the call that
// received them, so once kernel_create returns the host poisons this memory (names, op types,
// attribute values, dims, dtypes) and keeps it: a kernel that kept a pointer into its view
// reads poison in kernel_compute instead of the values it was created for.
struct OwnedView {
  std::deque<nxrt_value> values;
  std::deque<nxrt_node> nodes;
  nxrt_graph whole;  // owner of the copied values (value_is_graph_output)
  std::unique_ptr<nxrt_graph> view;
  std::map<const nxrt_value*, const nxrt_value*> original;  // copy -> the builder's value
  void poison();
};
// What a poisoned view holds: dims, INT attributes and ints; names and strings are all '#'.
constexpr int64_t kPoisonInt = -0x5A5A5A5A5A5A5A5A;

// A host buffer given to or taken from a kernel.
struct HostTensor {
  nxrt_dtype dtype = NXRT_DTYPE_FLOAT32;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};

// How one negotiation request is built.
struct NegotiateArgs {
  uint32_t major = NXRT_EP_ABI_MAJOR;
  uint32_t minor = kHostMinor;
  const nxrt_host_services* host = nullptr;  // nullptr: host_table_full() unless null_host
  bool null_host = false;
  uint32_t request_size = sizeof(nxrt_negotiate_request);  // fields past it hold trap pointers
  uint32_t reply_size = sizeof(nxrt_negotiate_reply);      // bytes past it are canaries
};

struct NegotiateResult {
  int32_t rc = -1;
  nxrt_negotiate_reply reply{};  // fields past the written-back size are zero
  uint32_t written_size = 0;     // reply.struct_size after the call
  bool canary_ok = true;         // nothing written past the caller's reply.struct_size
  size_t first_bad_byte = 0;     // the first canary byte written
  bool tail_ok = true;           // nothing written past the written-back size either
};

// A loaded plugin library and (after negotiate()) one plugin instance of it.
// Opening the same path twice gives two Plugin objects sharing the library
// (dlopen reference counting), each with its own instance.
class Plugin {
 public:
  ~Plugin();
  // dlopen + dlsym. Returns null and sets *err on failure; *stage is "dlopen" or "symbol".
  static std::unique_ptr<Plugin> open(const std::string& path, std::string* err, std::string* stage);
  // Calls the entry point with a hand-built request. An accepted negotiation's
  // instance is NOT kept: release it with shutdown_raw().
  NegotiateResult negotiate_raw(const NegotiateArgs& a);
  NegotiateResult negotiate_raw(uint32_t major, uint32_t minor, const nxrt_host_services* host = nullptr) {
    NegotiateArgs a;
    a.major = major;
    a.minor = minor;
    a.host = host;
    return negotiate_raw(a);
  }
  // Releases an instance from negotiate_raw (its table's shutdown).
  static void shutdown_raw(const NegotiateResult& r);
  // Standard negotiation (2.<minor>, full table; 2.0 unless a check asks for a
  // later minor). Fills api() and instance(); returns "" or why it failed.
  std::string negotiate(uint32_t minor = kHostMinor);
  void shutdown();
  // Drops the instance without shutting it down (it is another Plugin's).
  void forget() {
    negotiated_ = false;
    instance_ = nullptr;
  }
  const nxrt_plugin_api& api() const { return api_; }
  const nxrt_plugin_api* api_ptr() const { return api_ptr_; }
  nxrt_plugin* instance() const { return instance_; }
  uint32_t api_struct_size() const { return api_size_; }
  uint64_t features() const { return features_; }          // masked by the agreed minor
  uint64_t raw_features() const { return raw_features_; }  // as the plugin answered
  uint32_t offered_minor() const { return offered_minor_; }
  uint32_t agreed_minor() const { return reply_.abi_minor; }
  const nxrt_negotiate_reply& reply() const { return reply_; }
  bool negotiated() const { return negotiated_; }
  nxrt_ep_negotiate_fn entry() const { return fn_; }
  const std::string& path() const { return path_; }

 private:
  void* dl_ = nullptr;
  size_t threads_at_open_ = 0;  // the process's threads before dlopen
  std::string path_;
  nxrt_ep_negotiate_fn fn_ = nullptr;
  nxrt_plugin_api api_{};
  const nxrt_plugin_api* api_ptr_ = nullptr;
  nxrt_plugin* instance_ = nullptr;
  uint32_t api_size_ = 0;
  uint64_t features_ = 0, raw_features_ = 0;
  uint32_t offered_minor_ = kHostMinor;
  nxrt_negotiate_reply reply_{};
  bool negotiated_ = false;
};

// Session options: key/value pairs, passed as an array of pointers.
using OptionList = std::vector<std::pair<std::string, std::string>>;

// Wraps a plugin status: ok or code + message.
struct Result {
  bool ok = true;
  nxrt_status_code code = NXRT_OK;
  std::string message;
  std::string problem;  // malformed status (not ours, empty message)
  std::string str() const;
};
Result take(nxrt_status* s);

// One device session with helpers for memory, transfers and kernels.
class Session {
 public:
  Session(Plugin& p, uint32_t device) : p_(p), device_(device) {}
  ~Session();
  Result create(const OptionList& options = {});
  nxrt_ep_session* raw() const { return s_; }
  Plugin& plugin() { return p_; }
  bool host_addressable() const { return host_addressable_; }
  void set_host_addressable(bool v) { host_addressable_ = v; }

  // Uploads host bytes into a fresh DEVICE allocation.
  Result upload(const void* data, size_t bytes, void** handle, nxrt_stream* stream = nullptr);
  Result download(void* handle, uint64_t offset, void* dst, size_t bytes, nxrt_stream* stream = nullptr);
  void free(void* handle, nxrt_memory_kind kind = NXRT_MEMORY_DEVICE);

  // Capability on a graph; fills the sink.
  Result capability(const nxrt_graph& g, nxrt_claim_sink& sink);

  // Hands back the buffers of a finished kernel_compute (inputs and outputs): they are
  // overwritten with kPoisonByte and freed only after the next call's retire, so the next
  // call's buffers never reuse them and a kernel that reads a buffer of an earlier call reads poison.
  void retire(const std::vector<std::pair<void*, size_t>>& buffers);

 private:
  std::mutex retired_mu_;
  std::vector<void*> retired_;
  Plugin& p_;
  uint32_t device_;
  nxrt_ep_session* s_ = nullptr;
  bool host_addressable_ = false;
};

// Kernel compute options (fault injection).
struct ComputeOptions {
  int fail_output = -1;  // ctx_output(i) returns OUT_OF_MEMORY
  int fail_input = -1;   // ctx_input(i) returns INTERNAL
  bool cancelled = false;
  bool starve_statuses = false;  // status_create returns the static OOM status during compute
  const nxrt_graph* view = nullptr;  // the kernel's view: captured constants get data = NULL
  uint64_t run_id = 1;           // ctx_run_id
  bool manual_run = false;       // the caller calls the run hooks itself (Pipeline::run does otherwise)
  nxrt_stream* stream = nullptr;
  const char* phase = nullptr;   // names the call in a crash report (default "kernel_compute")
  // Non-zero: input i and every output are placed at byte_offset (i + 1) * this (a multiple of
  // NXRT_TENSOR_ALIGNMENT) inside a larger allocation whose other bytes hold kDecoyByte.
  uint64_t byte_offset = 0;
  bool poison_outputs = false;  // outputs start filled with kDecoyByte (an unwritten element shows)
};
// What a finished call's buffers are overwritten with: NaN as float32 and float16, -1 as a
// signed integer, so results computed from a stale buffer show.
constexpr uint8_t kPoisonByte = 0xFF;
// Fills the bytes around a tensor placed at an offset: as float32 each element is
// 3.3961514e38, so a kernel that ignores byte_offset reads (or leaves) huge values.
constexpr uint8_t kDecoyByte = 0x7F;
// Every output lies in a larger allocation with at least this many decoy bytes after it
// (and byte_offset's before it), checked after each call: a store past the end of an
// output is caught in the call that made it, not as another tensor's corruption later.
constexpr uint64_t kGuardBytes = 256;

struct ComputeResult {
  Result status;
  std::vector<HostTensor> outputs;
  std::vector<std::string> violations;  // context misuse
  std::string problem;                  // host-side failure (upload/download)
  // Inputs are read-only: the first input whose bytes changed across the call
  // (-1: none), checked after the stream is synchronized.
  int input_written = -1;
  std::string input_written_detail;
  // A guard region around an output changed: what, where (empty: none).
  std::string out_of_bounds;
};

// FNV-1a over a byte range (input and constant checksums).
uint64_t checksum(const void* data, size_t bytes);

// Runs one kernel on host inputs. `n_outputs` is the subgraph's output count.
ComputeResult compute(Session& s, nxrt_kernel* k, const std::vector<HostTensor>& inputs, size_t n_outputs,
                      const ComputeOptions& o = {});

using nxrt::sdk::dtype_name;  // element-type helpers shared with plugins
using nxrt::sdk::dtype_size;
int64_t numel(const std::vector<int64_t>& dims);

// Memory figures of this process.
size_t rss_bytes();
// Threads of this process (/proc/self/task).
size_t thread_count();
// thread_count() once it is at most `n`, waiting up to `wait_ms` for threads that are leaving.
size_t thread_count_settled(size_t n, int wait_ms);
size_t malloc_bytes();

}  // namespace conf
