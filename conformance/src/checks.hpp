// Shared pieces of the mini-host suites (abi, stress).
#pragma once
#include "minihost.hpp"
#include "runner.hpp"

#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace conf {

struct Config {
  std::string plugin;  // resolved path
  uint32_t device = 0;
  double stress_seconds = 10;
  std::string tests_dir;   // ops: node tests folder (contains node/ and simple/)
  std::string bench_dir;   // models: bench models folder
  std::string reference;   // models: reference plugin (cpu) path, "" if none
  std::string source_dir;  // nxrt source tree (tools/)
  std::string cache_dir;
  uint64_t diff_seed = 1;  // diff: seed of the generated cases
  int diff_cases = 0;      // diff: cases per op (0: each op's default; never more)
  std::string diff_case;   // diff: "OP" or "OP:ID" to run one op or one case
};

// Loads the plugin and, on demand, a device session. Each stage returns a
// record (skip/fail) when the check cannot proceed.
struct Env {
  explicit Env(const Config& c) : cfg(c) {}
  ~Env();
  const Config& cfg;
  uint32_t minor = kHostMinor;  // offered at negotiation (interop: kInteropMinor)
  std::unique_ptr<Plugin> p;
  uint32_t devices = 0;
  nxrt_device_info info{};
  std::unique_ptr<Session> s;
  std::optional<Record> load();
  std::optional<Record> device();
  std::optional<Record> session();
};

// plugin->copy with `n` regions from a contiguous array (passed as pointers).
inline nxrt_status* copy_n(const nxrt_plugin_api& api, nxrt_ep_session* s, const nxrt_copy_region* r, size_t n,
                           nxrt_stream* stream) {
  std::vector<const nxrt_copy_region*> ptrs(n);
  for (size_t i = 0; i < n; ++i) ptrs[i] = &r[i];
  return api.copy(s, n ? ptrs.data() : nullptr, n, stream);
}

// Names of required functions missing from a negotiated table ("" if none).
std::string missing_required(const Plugin& p);

// The Add -> Relu float32 graph the kernel checks run.
struct AddRelu {
  explicit AddRelu(std::vector<int64_t> dims = {2, 3});
  GraphBuilder gb;
  std::vector<int64_t> dims;
  const nxrt_value *x, *y, *t, *z;
  HostTensor in_x, in_y, expected;
};

HostTensor make_f32(const std::vector<int64_t>& dims, uint32_t seed);
// ONNX runner rule: same dtype and shape, |g-e| <= atol + rtol*|e|, NaN == NaN.
std::string compare(const HostTensor& got, const HostTensor& expected, double rtol = 1e-3, double atol = 1e-7);

// Kernels created for the claims of one graph; unclaimed nodes run on a host
// reference (Add, Relu), as a host would place them elsewhere.
class Pipeline {
 public:
  Pipeline(Session& s, const GraphBuilder& gb) : s_(s), gb_(gb) {}
  ~Pipeline();
  // capability + kernel_create for each claim. "" on success.
  std::string build();
  size_t claimed_nodes() const;
  // Runs the graph; fills `out` with the values of graph outputs in order.
  std::string run(const std::map<const nxrt_value*, HostTensor>& inputs, std::vector<HostTensor>& out,
                  const ComputeOptions& o = {}, std::vector<std::string>* violations = nullptr,
                  Result* kernel_status = nullptr);
  nxrt_claim_sink& sink() { return sink_; }
  // Kernels built, with the view each received (run hooks, profiling).
  size_t kernel_count() const { return steps_.size(); }
  const std::vector<size_t>& kernel_nodes(size_t i) const { return steps_[i].nodes; }
  nxrt_kernel* kernel(size_t i) const { return steps_[i].k; }
  // kernel_create gets a view on memory of its own, poisoned once it returns (OwnedView);
  // off: the view stays intact (to tell that cause from others).
  void set_poison_views(bool on) { poison_views_ = on; }

 private:
  std::string run_steps(const std::map<const nxrt_value*, HostTensor>& inputs, std::vector<HostTensor>& out,
                        const ComputeOptions& o, std::vector<std::string>* violations, Result* kernel_status);
  void snapshot_constants();
  std::string check_constants(const std::string& when) const;
  struct Step {
    std::vector<size_t> nodes;
    std::unique_ptr<nxrt_graph> view;     // the host's bookkeeping (the builder's values)
    std::unique_ptr<OwnedView> created;   // what kernel_create saw, poisoned after it
    nxrt_kernel* k = nullptr;
  };
  bool poison_views_ = true;
  Session& s_;
  const GraphBuilder& gb_;
  nxrt_claim_sink sink_;
  std::vector<Step> steps_;
  std::map<const nxrt_value*, uint64_t> constants_;  // checksums of constant inputs
};

// Runs Add/Relu once through a fresh pipeline; "" on a correct result.
// *claimed is set to the number of claimed nodes.
std::string run_add_relu_once(Session& s, const AddRelu& g, size_t* claimed);

std::vector<Item> abi_items(const Config& cfg);
std::vector<Item> stress_items(const Config& cfg);
// Part of the stress suite: the process state a plugin must leave alone (process_checks.cpp).
std::vector<Item> process_items(const Config& cfg);
std::vector<Item> interop_items(const Config& cfg);
std::vector<Item> diff_items(const Config& cfg);
std::vector<Item> cache_items(const Config& cfg);
// "" or why a --diff-case value names no op or case.
std::string diff_case_error(const std::string& which);
std::vector<Item> ops_items(const Config& cfg, std::string* error);
std::vector<Item> models_items(const Config& cfg, std::string* error);
bool host_suites_available();

}  // namespace conf

namespace conf {
// Wraps a worker thread's body: an exception escaping the plugin in a thread
// is recorded as the check's first error instead of terminating the process.
template <typename F>
auto guarded_thread(std::mutex& mu, std::string& first, int t, F f) {
  return [&mu, &first, t, f] {
    try {
      f();
    } catch (const std::exception& e) {
      std::lock_guard lock(mu);
      if (first.empty()) first = "thread " + std::to_string(t) + ": a C++ exception crossed the C ABI: " + e.what();
    } catch (...) {
      std::lock_guard lock(mu);
      if (first.empty()) first = "thread " + std::to_string(t) + ": a C++ exception of unknown type crossed the C ABI";
    }
  };
}
}  // namespace conf
