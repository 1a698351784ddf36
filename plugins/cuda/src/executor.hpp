// A claimed group as one kernel: builds the IR from the host's view (ir.hpp), folds
// activations into their producers (ops.hpp), and at run time infers every shape,
// binds the outputs, and enqueues the nodes on the run's stream with stream-ordered
// temporaries from the session's arena. With CUDA graphs on for the run (session
// option cuda.cuda_graph, per run through the run hooks) the group's launches are
// captured on the second run with the same shapes and addresses and replayed after that.
#pragma once
#include "code_cache.hpp"
#include "code_module.hpp"
#include "device.hpp"
#include "ir.hpp"
#include "schedule.hpp"

#include <nxrt_sdk/plugin.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace nxrt::cuda {

// Per run, from on_run_start to on_run_end: whether its groups use CUDA graphs, whether it
// is profiled, and the device timings (CUDA events around each group's work) it recorded.
struct GroupTiming {
  size_t node_index = 0;  // the group's first node
  std::string name;       // its op types, "Conv+Relu"
  cudaEvent_t start = nullptr, end = nullptr;
};
struct RunState {
  bool graphs = false;
  bool profiling = false;
  std::vector<GroupTiming> timings;
};
class RunRegistry {
 public:
  void start(uint64_t run, bool graphs, bool profiling) {
    std::lock_guard lock(mu_);
    runs_[run] = RunState{graphs, profiling, {}};
  }
  // Runs without on_run_start (none today) use the session defaults.
  bool graphs(uint64_t run, bool fallback) const {
    std::lock_guard lock(mu_);
    auto it = runs_.find(run);
    return it == runs_.end() ? fallback : it->second.graphs;
  }
  bool profiled(uint64_t run) const {
    std::lock_guard lock(mu_);
    auto it = runs_.find(run);
    return it != runs_.end() && it->second.profiling;
  }
  void add(uint64_t run, GroupTiming t) {
    std::lock_guard lock(mu_);
    runs_[run].timings.push_back(std::move(t));
  }
  RunState take(uint64_t run) {
    std::lock_guard lock(mu_);
    RunState r;
    auto it = runs_.find(run);
    if (it != runs_.end()) {
      r = std::move(it->second);
      runs_.erase(it);
    }
    return r;
  }

 private:
  mutable std::mutex mu_;
  std::map<uint64_t, RunState> runs_;
};

// The IR of a host graph view (a single node for claims, a group for kernels). Small
// constants (<= 64 KiB) are copied to the host side of the IR.
IrGraph build_ir(const sdk::Graph& g);
// The IR of one node of a view (get_capability).
IrGraph build_node_ir(const sdk::Graph& g, sdk::Node n);

// The generated code a kernel runs and how it is loaded: the cubin for the device's
// architecture, or the PTX of a lower one (JIT-compiled by the driver).
struct KernelCode {
  CompiledCode code;
  bool use_ptx = false;
};

class GroupKernel : public sdk::Kernel {
 public:
  GroupKernel(DeviceContext& dev, PreparedGroup p, RunRegistry& runs, KernelCode code);
  ~GroupKernel() override;
  void compute(sdk::Context& ctx) override;
  // ABI 2.4: the generated code (cubin and PTX) and the algorithms chosen for its GEMMs and
  // convolutions so far (code_cache.hpp).
  void export_blob(sdk::BlobWriter& w) override;

 private:
  void enqueue(struct LaunchEnv& env, std::vector<const void*>& addr, const std::vector<Shape>& shapes);
  void drop_graph();
  DeviceContext& dev_;
  IrGraph g_;
  uint64_t claim_ = 0;
  std::string source_;
  CompiledCode code_;
  std::unique_ptr<CodeModule> module_;  // the chains' kernels; null without chains
  RunRegistry& runs_;
  std::string name_;  // op types of the group, for device profiling
  std::vector<int> uses_;  // per value: how many (unfused) nodes read it
  std::mutex keys_mu_;
  std::set<std::vector<int64_t>> gemm_keys_, conv_keys_;  // algorithm choices this kernel used
  // The captured graph and what it was captured for (addresses and dims).
  std::vector<uint64_t> graph_key_;
  std::vector<uint64_t> plain_key_;  // the last key run without a graph (captured when it repeats)
  cudaGraphExec_t graph_exec_ = nullptr;
  bool graph_unusable_ = false;
};

// A kernel of a compile-only session (ABI 2.4 offline compile): the claim's generated code
// for the described architecture, exported, never run.
class OfflineKernel : public sdk::Kernel {
 public:
  explicit OfflineKernel(KernelBlob b) : b_(std::move(b)) {}
  void compute(sdk::Context&) override;
  void export_blob(sdk::BlobWriter& w) override;

 private:
  KernelBlob b_;
};

}  // namespace nxrt::cuda
