// What the CPU plugin's fused-group matchers share (ops_fusion*.cpp): an
// index of the view (who reads each value, which values are graph outputs, whether the view
// is closed), small tests on nodes and values, and the Conv [Add] [Relu | Clip | HardSwish] chain.
#pragma once
#include <algorithm>
#include <limits>
#include <map>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "ops.hpp"

namespace nxrt::cpu::fusion {

using ValueKey = const nxrt_value*;

inline bool is_op(const Node& n, std::string_view op) {
  return n.op_type() == op && (n.domain().empty() || n.domain() == "ai.onnx");
}

inline bool same_static_shape(const sdk::Value& a, const sdk::Value& b) {
  if (!a.static_shape() || !b.static_shape() || a.rank() != b.rank()) return false;
  auto da = a.dims(), db = b.dims();
  return std::equal(da.begin(), da.end(), db.begin());
}

// A constant float scalar input (Clip 11+ bounds); nullopt when absent.
// Returns false in `ok` when present but not a constant f32 scalar.
inline std::optional<float> const_scalar(const Node& n, size_t i, bool& ok) {
  auto v = n.input(i);
  if (!v.present()) return std::nullopt;
  if (!v.is_constant() || v.dtype() != NXRT_DTYPE_FLOAT32) {
    ok = false;
    return std::nullopt;
  }
  ConstTensorView t = v.constant();
  if (t.numel() != 1) {
    ok = false;
    return std::nullopt;
  }
  return static_cast<const float*>(t.raw())[0];
}

// Bounds of a Relu or Clip node, or nullopt when it cannot be fused.
inline std::optional<std::pair<float, float>> activation_bounds(const Node& n, int64_t opset) {
  if (n.output(0).dtype() != NXRT_DTYPE_FLOAT32) return std::nullopt;
  if (is_op(n, "Relu")) return std::pair{0.f, std::numeric_limits<float>::infinity()};
  if (!is_op(n, "Clip")) return std::nullopt;
  float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
  if (opset < 11) {
    lo = n.attr_float("min", lo);
    hi = n.attr_float("max", hi);
  } else {
    bool ok = true;
    if (auto v = const_scalar(n, 1, ok)) lo = *v;
    if (auto v = const_scalar(n, 2, ok)) hi = *v;
    if (!ok) return std::nullopt;
  }
  return std::pair{lo, hi};
}

struct ViewIndex {
  std::map<ValueKey, std::vector<std::pair<size_t, size_t>>> consumers;  // value -> (node position, input slot)
  std::map<ValueKey, size_t> producer;                                     // value -> node position
  std::set<ValueKey> graph_outputs;
  bool closed = true;
};

inline ViewIndex index_view(const sdk::Graph& g) {
  ViewIndex ix;
  std::set<ValueKey> graph_inputs;
  for (size_t i = 0; i < g.input_count(); ++i) graph_inputs.insert(g.input(i).raw());
  for (size_t i = 0; i < g.node_count(); ++i) {
    Node n = g.node(i);
    for (size_t o = 0; o < n.output_count(); ++o)
      if (n.has_output(o)) ix.producer[n.output(o).raw()] = i;
  }
  auto produced = [&](ValueKey v) { return ix.producer.count(v) != 0; };
  for (size_t i = 0; i < g.node_count(); ++i) {
    Node n = g.node(i);
    for (size_t k = 0; k < n.input_count(); ++k) {
      auto v = n.input(k);
      if (!v.present()) continue;
      ix.consumers[v.raw()].push_back({i, k});
      if (!v.is_constant() && !produced(v.raw()) && !graph_inputs.count(v.raw())) ix.closed = false;
    }
  }
  for (size_t i = 0; i < g.output_count(); ++i) {
    auto v = g.output(i);
    if (!v.present()) continue;
    ix.graph_outputs.insert(v.raw());
    if (!v.is_constant() && !produced(v.raw()) && !graph_inputs.count(v.raw())) ix.closed = false;
  }
  return ix;
}

// The only consumer of `v` (node position, input slot), when there is exactly one use.
inline std::optional<std::pair<size_t, size_t>> sole_use(const ViewIndex& ix, ValueKey v) {
  if (ix.graph_outputs.count(v)) return std::nullopt;
  auto it = ix.consumers.find(v);
  if (it == ix.consumers.end() || it->second.size() != 1) return std::nullopt;
  return it->second.front();
}

// Which kernel input of the group `v` is (-1 for an absent optional input).
inline int group_input_index(const sdk::Graph& sg, ValueKey v, std::string_view name = "") {
  for (size_t i = 0; i < sg.input_count(); ++i)
    if (sg.input(i).raw() == v) return int(i);
  sdk::fail(NXRT_INTERNAL, "value '{}' is not an input of the fused group", name);
}
inline int group_input_index(const sdk::Graph& sg, const sdk::Value& v) {
  return v.present() ? group_input_index(sg, v.raw(), v.name()) : -1;
}


// When `add` is an Add that takes v (through input `v_slot`) and a float32 value of v's
// static shape, with an output of that shape (no broadcasting either way): the slot of that
// other input, the residual a GEMM store can add.
inline std::optional<size_t> residual_add_slot(const Node& add, size_t v_slot, const sdk::Value& v) {
  if (!is_op(add, "Add") || add.input_count() != 2 || add.output_count() != 1 || !add.has_output(0)) return std::nullopt;
  const size_t other = 1 - v_slot;
  sdk::Value o = add.input(other);
  if (!o.present() || o.raw() == v.raw() || o.dtype() != NXRT_DTYPE_FLOAT32 || !same_static_shape(o, v) ||
      !same_static_shape(add.output(0), v))
    return std::nullopt;
  return other;
}

// One fused chain in the order it computes: the Conv, then optionally an Add,
// then optionally a Relu / Clip or a HardSwish.
struct Chain {
  std::vector<size_t> nodes;  // view positions
  int add_other_slot = -1;    // which Add input is the residual
  bool clamp = false;
  float lo = 0.f, hi = 0.f;
  bool hardswish = false;
};

// Follows a Conv's output through [Add] [Relu | Clip | HardSwish]; `ok` tells whether a
// node may join (claimed on its own, not in another chain).
template <typename Ok>
Chain follow_chain(const sdk::Graph& g, const ViewIndex& ix, size_t conv, Ok ok) {
  Chain c;
  c.nodes.push_back(conv);
  Node cn = g.node(conv);
  if (cn.output_count() != 1 || !cn.has_output(0)) return c;
  sdk::Value v = cn.output(0);
  bool added = false;
  for (;;) {
    auto use = sole_use(ix, v.raw());
    if (!use || !ok(use->first)) break;
    Node nx = g.node(use->first);
    if (!added && is_op(nx, "Add")) {
      const auto other = residual_add_slot(nx, use->second, v);
      if (!other) break;
      c.nodes.push_back(use->first);
      c.add_other_slot = int(*other);
      added = true;
      v = nx.output(0);
      continue;
    }
    if (nx.input_count() < 1 || nx.output_count() != 1 || !nx.has_output(0) || use->second != 0) break;
    if (is_op(nx, "HardSwish") && nx.output(0).dtype() == NXRT_DTYPE_FLOAT32) {
      c.nodes.push_back(use->first);
      c.hardswish = true;
      break;
    }
    auto bounds = activation_bounds(nx, g.opset(""));
    if (!bounds) break;
    c.nodes.push_back(use->first);
    c.clamp = true;
    c.lo = bounds->first;
    c.hi = bounds->second;
    break;
  }
  return c;
}

}  // namespace nxrt::cpu::fusion

namespace nxrt::cpu {
// QDQ groups (ops_fusion_qdq.cpp): the view positions of each DequantizeLinear -> Conv |
// MatMul | Add -> [Relu | Clip] -> [QuantizeLinear] group found among the nodes `ok` allows.
std::vector<std::vector<size_t>> claim_qdq_groups(const sdk::Graph& g, const fusion::ViewIndex& ix,
                                                  const std::function<bool(size_t)>& ok);
// The kernel of a claimed QDQ group; nullptr when `subgraph` has no DequantizeLinear (not a
// QDQ group), a failure naming why when it has one but is no pattern this plugin fuses.
std::unique_ptr<Kernel> create_qdq_kernel(const sdk::Graph& subgraph, CpuSession& session, sdk::Prepacked& pp);
}  // namespace nxrt::cpu

namespace nxrt::cpu {
// Inverted-residual blocks (ops_fusion_conv_block.cpp): the view positions of the
// [1x1 Conv [act]] -> depthwise 3x3 Conv [act] -> [1x1 Conv [Add] [act]] block (act: Relu |
// Clip | HardSwish; at least two Convs) that starts at Conv `head`, when it is worth running
// in row bands; empty otherwise.
std::vector<size_t> follow_conv_block(const sdk::Graph& g, const fusion::ViewIndex& ix, size_t head,
                                      const std::function<bool(size_t)>& ok);
// The kernel of a claimed block; nullptr when `subgraph` holds fewer than two Convs.
std::unique_ptr<Kernel> create_conv_block_kernel(const sdk::Graph& subgraph, CpuSession& session,
                                                 sdk::Prepacked& pp);
}  // namespace nxrt::cpu

namespace nxrt::cpu {
// Squeeze-excite's Mul folded into the 1x1 Conv after it (ops_fusion_channel_scale.cpp): the
// view positions of Mul `mul` (x times a per-channel scale) and the Conv [Add] [act] chain
// reading its output, when the scale folds into the Conv (conv_channel_scale_folds); empty
// otherwise.
std::vector<size_t> follow_channel_scale(const sdk::Graph& g, const fusion::ViewIndex& ix, size_t mul,
                                         const std::function<bool(size_t)>& ok);
// The kernel of a claimed group; nullptr when `subgraph` does not start with a Mul.
std::unique_ptr<Kernel> create_channel_scale_kernel(const sdk::Graph& subgraph, CpuSession& session,
                                                    sdk::Prepacked& pp);
}  // namespace nxrt::cpu

namespace nxrt::cpu {
// MatMul through Transpose views (ops_fusion_matmul_views.cpp): the view positions of MatMul
// `mm` with the Transpose [<- Reshape] views feeding it and the Transpose [-> Reshape] after
// it, when there is at least one Transpose to skip; empty otherwise.
std::vector<size_t> follow_matmul_views(const sdk::Graph& g, const fusion::ViewIndex& ix, size_t mm,
                                        const std::function<bool(size_t)>& ok);
// The kernel of a claimed group; nullptr when `subgraph` has no MatMul and Transpose.
std::unique_ptr<Kernel> create_matmul_views_kernel(const sdk::Graph& subgraph, CpuSession& session);
}  // namespace nxrt::cpu
