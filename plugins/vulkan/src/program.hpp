// A claimed group compiled for one device: run-time shapes, buffer plan,
// one command buffer with hazard-driven barriers, reused while the bindings
// and shapes stay the same.
#pragma once
#include "ops.hpp"

#include <functional>

namespace nxrt::vk {

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
  void run(const std::vector<Input>& inputs, const BindOutput& bind, Stream& s);

  // The group after epilogue fusion (fused activations removed from nodes).
  const IrGraph& graph() const { return g_; }
  size_t fused_count() const { return fused_; }
  uint64_t scratch_bytes() const { return scratch_bytes_; }  // internal values of the last recording
  size_t dispatch_count() const { return dispatches_; }
  size_t barrier_count() const { return barriers_; }
  bool last_run_reused() const { return reused_; }

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
  bool recorded_ = false, reused_ = false;
  size_t dispatches_ = 0, barriers_ = 0, fused_ = 0, nodes_in_ = 0;
  uint64_t scratch_bytes_ = 0;
};

}  // namespace nxrt::vk
