// A claimed group compiled for one device: run-time shapes, buffer plan,
// one command buffer with hazard-driven barriers, reused while the bindings
// and shapes stay the same.
#pragma once
#include "ops.hpp"

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace nxrt::vk {

// The two timestamp queries of one Program, shared by the Program (its command
// buffer writes them) and the Timings that read them.
struct QueryPool {
  Device& dev;
  VkQueryPool pool = VK_NULL_HANDLE;
  explicit QueryPool(Device& d);
  ~QueryPool();
  QueryPool(const QueryPool&) = delete;
  QueryPool& operator=(const QueryPool&) = delete;
};

// Device ticks of a [start, end] pair to nanoseconds on the device clock: the
// ticks are masked to `valid_bits`, an end that wrapped past the mask is
// unwrapped, and ticks are scaled by `period` (ns per tick). end >= start.
std::pair<uint64_t, uint64_t> ticks_to_ns(uint64_t start, uint64_t end, uint32_t valid_bits, double period);

// The device-side time of one profiled execution (one submission) of a Program.
// `node` is the group's first node, `name` its op types ("Conv+Relu").
class Timing {
 public:
  Timing(size_t node, std::string name, std::shared_ptr<QueryPool> pool, uint32_t valid_bits, double period)
      : node(node), name(std::move(name)), pool_(std::move(pool)), bits_(valid_bits), period_(period) {}
  const size_t node;
  const std::string name;
  // Reads the timestamps once (waiting for them) and keeps them; later calls
  // return the kept values. Only after the submission that writes them.
  std::pair<uint64_t, uint64_t> read();

 private:
  std::mutex mu_;
  std::shared_ptr<QueryPool> pool_;  // released once read
  uint32_t bits_;
  double period_;
  bool done_ = false;
  std::pair<uint64_t, uint64_t> ns_{0, 0};
};

// The group's compile-time rewrite (epilogue fusion unless NXRT_VULKAN_NO_FUSION=1), as
// Program's constructor applies it; offline sessions apply it without a device. Returns
// the number of activations fused.
size_t prepare_group(IrGraph& g);

class Program {
 public:
  Program(Device& dev, IrGraph g);
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  struct Input {
    Loc loc;  // loc.a null: absent optional input
    Shape dims;
  };
  using BindOutput = std::function<Loc(size_t index, nxrt_dtype dtype, const Shape& dims)>;
  // Records (or reuses) the group's command buffer and submits it on `s`.
  // profile: the command buffer also writes a timestamp at its start (top of
  // pipe, after resetting the Program's two queries) and at its end (bottom of
  // pipe); the result is the Timing of this submission (null when not
  // profiled or the device has no timestamps). A change of `profile` from the
  // last recording re-records the command buffer; the timestamps of the previous
  // submission are read into its Timing before the buffer is submitted again.
  std::shared_ptr<Timing> run(const std::vector<Input>& inputs, const BindOutput& bind, Stream& s, bool profile = false);

  // The group after epilogue fusion (fused activations removed from nodes).
  const IrGraph& graph() const { return g_; }
  size_t fused_count() const { return fused_; }
  uint64_t scratch_bytes() const { return scratch_bytes_; }  // internal values of the last recording
  size_t dispatch_count() const { return dispatches_; }
  size_t barrier_count() const { return barriers_; }
  bool last_run_reused() const { return reused_; }
  size_t first_node() const { return first_node_; }
  // "Conv+Relu": the op types of the group's nodes before fusion ("A+B+...(N nodes)" past 64 characters).
  const std::string& op_types() const { return op_types_; }

 private:
  void wait_idle();
  Device& dev_;
  IrGraph g_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkDescriptorPool dpool_ = VK_NULL_HANDLE;
  uint32_t dpool_sets_ = 0, dpool_descs_ = 0;
  Alloc* scratch_ = nullptr;
  std::shared_ptr<Timeline> last_tl_;
  uint64_t last_val_ = 0;
  std::vector<uint64_t> sig_;
  std::vector<std::pair<size_t, Shape>> out_shapes_;
  bool recorded_ = false, reused_ = false, recorded_profiled_ = false;
  size_t first_node_ = 0;
  std::string op_types_;
  std::shared_ptr<QueryPool> queries_;  // created by the first profiled recording
  std::shared_ptr<Timing> pending_;     // the last profiled submission
  size_t dispatches_ = 0, barriers_ = 0, fused_ = 0, nodes_in_ = 0;
  uint64_t scratch_bytes_ = 0;
};

}  // namespace nxrt::vk
