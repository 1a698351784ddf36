// Operator support: exact claim checks, run-time shape inference and the
// commands (dispatches, copies, buffer updates) each node records. Implemented
// in ops.cpp over the per-op kernel descriptions (op_kernel.hpp) listed in
// ops_registry.cpp; fuse_epilogues in epilogue_fusion.cpp.
#pragma once
#include "ir.hpp"
#include "vk_core.hpp"

#include <nxrt_sdk/kernel_registry.hpp>

#include <optional>
#include <string>
#include <vector>

namespace nxrt::vk {

using Shape = std::vector<int64_t>;

// A tensor's place in device memory.
struct Loc {
  Alloc* a = nullptr;
  uint64_t off = 0;
  uint64_t bytes = 0;
};

struct Cmd {
  enum Kind { dispatch, copy, update } kind = dispatch;
  const Pipeline* pipeline = nullptr;
  std::vector<Loc> binds;
  std::vector<bool> writes;  // per bind
  std::vector<uint32_t> push;
  uint32_t gx = 1, gy = 1, gz = 1;
  Loc src, dst;                // copy / update
  std::vector<uint32_t> data;  // update
};

struct DeviceLimits {
  uint64_t max_storage_range = 128ull << 20;
  bool storage16 = false;  // storageBuffer16BitAccess: float16 kernels may be claimed
};

// nullopt: the node is supported exactly as it is.
std::optional<sdk::Refusal> check_node(const IrGraph& g, const IrNode& n, const DeviceLimits& lim);
std::vector<std::string> supported_ops();
// Folds an elementwise activation (Relu, Clip with constant bounds,
// LeakyRelu, Sigmoid, HardSwish) into the Conv/MatMul/Gemm that produces its
// only input, when that intermediate has no other use and is not a group
// output: the producer takes the activation's output and the activation node
// is removed (the intermediate then gets no buffer). Returns the count fused.
size_t fuse_epilogues(IrGraph& g);
// True for ops whose output aliases the input (Reshape family).
bool is_view(const IrNode& n);
// Output shapes from input shapes (constants' data come from the IR).
void infer_shapes(const IrGraph& g, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out);
// Appends the node's commands. Absent optional inputs have a null Loc.a.
void emit_node(PipelineSource& dev, const IrGraph& g, const IrNode& n, const std::vector<Loc>& in_loc,
               const std::vector<const Shape*>& in_shape, const std::vector<Loc>& out_loc,
               const std::vector<Shape>& out_shape, std::vector<Cmd>& cmds);

}  // namespace nxrt::vk
