// A claimed group as one kernel: builds the IR from the host's view (ir.hpp), folds
// activations into their producers (ops.hpp), and at run time infers every shape,
// binds the outputs, and enqueues the nodes on the run's stream with stream-ordered
// temporaries from the session's arena. With CUDA graphs on for the run (session
// option cuda.cuda_graph, per run through the run hooks) the group's launches are
// captured on the second run with the same shapes and addresses and replayed after that.
#pragma once
#include "device.hpp"
#include "ir.hpp"
#include "schedule.hpp"

#include <nxrt_sdk/plugin.hpp>

#include <map>
#include <mutex>

namespace nxrt::cuda {

// Which runs use CUDA graphs: set by on_run_start, read by kernels, dropped by on_run_end.
class RunFlags {
 public:
  void start(uint64_t run, bool graphs) {
    std::lock_guard lock(mu_);
    graphs_[run] = graphs;
  }
  void end(uint64_t run) {
    std::lock_guard lock(mu_);
    graphs_.erase(run);
  }
  // Runs the host started without the hooks (none today) fall back to the session default.
  bool graphs(uint64_t run, bool fallback) const {
    std::lock_guard lock(mu_);
    auto it = graphs_.find(run);
    return it == graphs_.end() ? fallback : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<uint64_t, bool> graphs_;
};

// The IR of a host graph view (a single node for claims, a group for kernels). Small
// constants (<= 64 KiB) are copied to the host side of the IR.
IrGraph build_ir(const sdk::Graph& g);
// The IR of one node of a view (get_capability).
IrGraph build_node_ir(const sdk::Graph& g, sdk::Node n);

class GroupKernel : public sdk::Kernel {
 public:
  GroupKernel(DeviceContext& dev, IrGraph g, RunFlags& runs);
  ~GroupKernel() override;
  void compute(sdk::Context& ctx) override;

 private:
  void enqueue(struct LaunchEnv& env, std::vector<const void*>& addr, const std::vector<Shape>& shapes);
  void drop_graph();
  DeviceContext& dev_;
  IrGraph g_;
  RunFlags& runs_;
  std::vector<int> uses_;  // per value: how many (unfused) nodes read it
  // The captured graph and what it was captured for (addresses and dims).
  std::vector<uint64_t> graph_key_;
  std::vector<uint64_t> plain_key_;  // the last key run without a graph (captured when it repeats)
  cudaGraphExec_t graph_exec_ = nullptr;
  bool graph_unusable_ = false;
};

}  // namespace nxrt::cuda
