// The optimizer (optimizer.cpp, optimizer/*.cpp): host graph rewrites, by level.
//   0  none
//   1  exact local rewrites: no-op removal (Identity, inference Dropout, Cast to its own type),
//      shape folding (Shape/Size/Gather/Concat over static dims), constant folding (nodes whose
//      inputs are all constant run once on the CPU plugin, through the ABI), common-subexpression
//      and dead-node elimination, one DequantizeLinear per reader (so each QDQ pattern is
//      whole for an EP's 8-bit kernels). Outputs are bit-identical.
//   2  + MatMul+Add -> Gemm and BatchNormalization folded into the Conv before it: the same
//      math, float rounding may differ in the last bits.
//   3  + fusion groups: recognised LayerNorm / GELU / attention subgraphs are annotated so a
//      plugin may claim each whole (its kernel decides the numerics); unclaimed, they run as before.
// Constant nodes become constant values at load at every level (model_loader.cpp).
#pragma once
#include "ir.hpp"

#include <memory>
#include <set>
#include <string>

namespace nxrt {

class PluginLibrary;

constexpr int kMaxOptLevel = 3;
constexpr int kDefaultOptLevel = 2;  // the highest whose rewrites are exact in real arithmetic

struct OptimizeOptions {
  int level = kDefaultOptLevel;
  // The CPU plugin, for constant folding; without it that pass is skipped (and says so).
  std::shared_ptr<PluginLibrary> folder;
};

// Rewrites `model` in place and appends one line per pass to model.optimizer_log.
void optimize(nxrt_model_ir& model, const OptimizeOptions& options);

// A copy of `model` that can be optimized on its own: values and nodes are new (same ids,
// same indices), constant data and control-flow bodies are shared with `model`.
std::shared_ptr<nxrt_model_ir> clone_model(const std::shared_ptr<const nxrt_model_ir>& model);

// The annotations the fusion-group pass (level 3) puts on every node of a recognised
// subgraph (nxrt_node::annotations): "nxrt.fusion" (STRING: LayerNormalization, Gelu,
// Attention) and "nxrt.fusion_group" (INTS: the group's node indices, ascending). A plugin
// reads them with node_attribute(node, name); one that declares NXRT_FEATURE_FUSED_GROUPS
// may claim those indices as one group. node_attribute_count/_at do not list them.
inline constexpr const char* kFusionAttr = "nxrt.fusion";
inline constexpr const char* kFusionGroupAttr = "nxrt.fusion_group";

// The passes, for unit tests and the driver. Each returns how many nodes it changed.
namespace passes {
size_t fold_constant_nodes(nxrt_model_ir& m);  // Constant -> constant value (load, every level)
size_t remove_noops(nxrt_model_ir& m);
size_t fold_shapes(nxrt_model_ir& m);
// Throws nothing: a failure to fold is written to *note and nothing is changed.
size_t fold_constants(nxrt_model_ir& m, const std::shared_ptr<PluginLibrary>& cpu, std::string* note);
size_t eliminate_common_subexpressions(nxrt_model_ir& m);
size_t eliminate_dead_nodes(nxrt_model_ir& m);
// Each reader past the first of a DequantizeLinear's output gets its own copy (optimizer/qdq.cpp).
size_t split_shared_dequantize(nxrt_model_ir& m);
size_t fuse_matmul_add(nxrt_model_ir& m);
size_t fold_batchnorm(nxrt_model_ir& m);
size_t mark_fusion_groups(nxrt_model_ir& m);  // returns the number of groups
}  // namespace passes

}  // namespace nxrt
