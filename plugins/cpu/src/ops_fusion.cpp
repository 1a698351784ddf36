// Fused groups: Conv -> [Add] -> [Relu | Clip | HardSwish], Conv -> [Relu | Clip | HardSwish]
// -> MaxPool (2-D, no Indices: the pool runs over the conv's row blocks as they are made),
// MatMul -> Add(bias) -> [Add] and
// Gemm -> Relu | Clip
// (the QDQ groups of quantized models are in ops_fusion_qdq.cpp, MobileNet's
// inverted-residual blocks of several Convs in ops_fusion_conv_block.cpp, MatMuls through
// Transpose views in ops_fusion_matmul_views.cpp, squeeze-excite's Mul -> 1x1 Conv in
// ops_fusion_channel_scale.cpp)
// claimed as one kernel, so the bias, the residual add and the activation happen
// in the GEMM's store and the result is written once; and the exact-Gelu chain
// Div -> Erf -> Add -> Mul -> Mul as one elementwise pass.
//
// A chain is claimed only when fusing cannot change what the model computes
// or how the host runs it:
//   * the view is closed (every non-constant input of a view node is a graph
//     input or produced in the view, every graph output is produced there),
//     so no node of another EP can read an intermediate value or sit between
//     two nodes of the chain: the group is convex and its only output is the
//     chain's last value;
//   * each intermediate value has exactly one consumer, the next node, and is
//     not a graph output;
//   * the Add's other input has the Conv output's static shape (no
//     broadcasting), the Clip bounds are attributes or constant scalars;
//   * every node of the chain is one the registry claims on its own.
// Otherwise nodes are claimed one by one exactly as before.
#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "elementwise.hpp"
#include "fusion_view.hpp"
#include "ops.hpp"
#include "ops_pool.hpp"

namespace nxrt::cpu {
using namespace fusion;

namespace {

// MatMul -> Add(bias) [-> Add(residual)]: the bias a constant float32 over the
// last axis ([N] or [1, .., 1, N]), the residual of the output's static shape.
struct MatMulChain {
  std::vector<size_t> nodes;  // view positions
  int bias_slot = -1;         // which input of the first Add is the bias
  int residual_slot = -1;     // which input of the second Add is the residual
};

bool is_bias_over_last_axis(const sdk::Value& b, const sdk::Value& out) {
  if (!b.present() || !b.is_constant() || b.dtype() != NXRT_DTYPE_FLOAT32 || !out.static_shape() || out.rank() < 1)
    return false;
  ConstTensorView t = b.constant();
  auto bd = t.dims();
  auto od = out.dims();
  if (bd.empty() || bd.size() > od.size() || bd.back() != od.back()) return false;
  return std::all_of(bd.begin(), bd.end() - 1, [](int64_t d) { return d == 1; });
}

template <typename Ok>
MatMulChain follow_matmul_chain(const sdk::Graph& g, const ViewIndex& ix, size_t mm, Ok ok) {
  MatMulChain c;
  c.nodes.push_back(mm);
  Node mn = g.node(mm);
  if (mn.output_count() != 1 || !mn.has_output(0)) return c;
  sdk::Value v = mn.output(0);
  if (v.dtype() != NXRT_DTYPE_FLOAT32 || !v.static_shape()) return c;
  auto use = sole_use(ix, v.raw());
  if (!use || !ok(use->first)) return c;
  Node add = g.node(use->first);
  if (!is_op(add, "Add") || add.input_count() != 2 || add.output_count() != 1 || !add.has_output(0)) return c;
  const size_t bias = 1 - use->second;
  if (add.input(bias).raw() == v.raw() || !is_bias_over_last_axis(add.input(bias), v) ||
      !same_static_shape(add.output(0), v))
    return c;
  c.nodes.push_back(use->first);
  c.bias_slot = int(bias);
  v = add.output(0);
  use = sole_use(ix, v.raw());
  if (!use || !ok(use->first)) return c;
  const auto other = residual_add_slot(g.node(use->first), use->second, v);
  if (!other) return c;
  c.nodes.push_back(use->first);
  c.residual_slot = int(*other);
  return c;
}

// After a 2-D, ungrouped float Conv chain `c` without a residual Add: a MaxPool that is the
// sole user of the chain's last value, 2 spatial dims, undilated, no Indices output.
template <typename Ok>
std::optional<size_t> follow_max_pool(const sdk::Graph& g, const ViewIndex& ix, const Chain& c, Ok ok) {
  if (c.add_other_slot >= 0) return std::nullopt;
  Node cn = g.node(c.nodes.front());
  if (cn.attr_int("group", 1) != 1 || cn.input_count() < 2 || cn.input(1).rank() != 4) return std::nullopt;
  Node last = g.node(c.nodes.back());
  if (last.output_count() != 1 || !last.has_output(0) || last.output(0).dtype() != NXRT_DTYPE_FLOAT32)
    return std::nullopt;
  auto use = sole_use(ix, last.output(0).raw());
  if (!use || !ok(use->first) || use->second != 0) return std::nullopt;
  Node p = g.node(use->first);
  if (!is_op(p, "MaxPool") || !p.has_output(0) || (p.output_count() > 1 && p.has_output(1))) return std::nullopt;
  if (p.attr_ints("kernel_shape").size() != 2) return std::nullopt;
  for (int64_t d : p.attr_ints("dilations"))
    if (d != 1) return std::nullopt;
  return use->first;
}

// Gemm -> Relu | Clip: the activation in the GEMM's store. Positions of the Gemm and, when it
// fuses, the activation (whose bounds go to `bounds`).
template <typename Ok>
std::vector<size_t> follow_gemm_chain(const sdk::Graph& g, const ViewIndex& ix, size_t gm, Ok ok,
                                      std::pair<float, float>* bounds = nullptr) {
  Node gn = g.node(gm);
  if (gn.output_count() != 1 || !gn.has_output(0) || gn.output(0).dtype() != NXRT_DTYPE_FLOAT32) return {gm};
  auto use = sole_use(ix, gn.output(0).raw());
  if (!use || !ok(use->first) || use->second != 0) return {gm};
  Node act = g.node(use->first);
  if (act.input_count() < 1 || act.output_count() != 1 || !act.has_output(0)) return {gm};
  auto b = activation_bounds(act, g.opset(""));
  if (!b) return {gm};
  if (bounds) *bounds = *b;
  return {gm, use->first};
}

// Div(x, c) -> Erf -> Add(a) -> Mul(x) -> Mul(h), c, a, h constant float32 scalars: exact
// Gelu as exporters write it (opset < 20). Positions of the five nodes, or empty.
struct GeluChain {
  std::vector<size_t> nodes;
  float c = 1.f, a = 1.f, h = 1.f;
};

template <typename Ok>
GeluChain follow_gelu_chain(const sdk::Graph& g, const ViewIndex& ix, size_t div, Ok ok) {
  GeluChain none, c;
  Node dn = g.node(div);
  if (!is_op(dn, "Div") || dn.input_count() != 2 || !dn.has_output(0)) return none;
  sdk::Value x = dn.input(0);
  if (!x.present() || x.dtype() != NXRT_DTYPE_FLOAT32 || x.is_constant()) return none;
  bool scalar_ok = true;
  auto cv = const_scalar(dn, 1, scalar_ok);
  if (!cv || !scalar_ok) return none;
  c.c = *cv;
  c.nodes.push_back(div);
  sdk::Value v = dn.output(0);
  // Each next node: the sole user of v, through input `slot` (or either for a commutative op).
  auto next = [&](std::string_view op) -> std::optional<std::pair<Node, size_t>> {
    auto use = sole_use(ix, v.raw());
    if (!use || !ok(use->first)) return std::nullopt;
    Node n = g.node(use->first);
    if (!is_op(n, op) || n.output_count() != 1 || !n.has_output(0) || n.output(0).dtype() != NXRT_DTYPE_FLOAT32 ||
        !same_static_shape(n.output(0), x))
      return std::nullopt;
    c.nodes.push_back(use->first);
    v = n.output(0);
    return std::pair{n, use->second};
  };
  auto scalar_of = [&](const Node& n, size_t slot, float& out) {
    bool ok2 = true;
    auto s2 = const_scalar(n, 1 - slot, ok2);
    if (!s2 || !ok2) return false;
    out = *s2;
    return true;
  };
  auto erf = next("Erf");
  if (!erf || erf->first.input_count() != 1) return none;
  auto add = next("Add");
  if (!add || add->first.input_count() != 2 || !scalar_of(add->first, add->second, c.a)) return none;
  auto mul = next("Mul");
  if (!mul || mul->first.input_count() != 2 || mul->first.input(1 - mul->second).raw() != x.raw()) return none;
  auto half = next("Mul");
  if (!half || half->first.input_count() != 2 || !scalar_of(half->first, half->second, c.h)) return none;
  if (!same_static_shape(dn.output(0), x)) return none;
  return c;
}

}  // namespace

void claim_nodes_fused(const sdk::Graph& g, nxrt_claim_sink* sink) {
  const Registry& reg = registry();
  const size_t count = g.node_count();
  std::vector<std::optional<Refusal>> verdict(count);
  for (size_t i = 0; i < count; ++i) {
    Node n = g.node(i);
    std::string domain(n.domain());
    Refusal why{};
    const auto* def = reg.find(n, g.opset(domain.c_str()), &why);
    if (!def) verdict[i] = why;
    else if (def->check) verdict[i] = def->check(n);
  }
  std::vector<char> taken(count, 0);
  const ViewIndex ix = index_view(g);
  if (ix.closed) {
    // QDQ groups first: their Conv / MatMul / Add would otherwise start a float chain.
    for (const auto& group : claim_qdq_groups(g, ix, [&](size_t j) { return !verdict[j] && !taken[j]; })) {
      std::vector<size_t> ids;
      for (size_t p : group) {
        taken[p] = 1;
        ids.push_back(g.node(p).index());
      }
      sdk::check(sdk::host().claim_nodes(sink, ids.data(), ids.size(), 0.0));
    }
    for (size_t i = 0; i < count; ++i) {
      if (verdict[i] || taken[i]) continue;
      const auto ok = [&](size_t j) { return !verdict[j] && !taken[j]; };
      std::vector<size_t> chain;
      if (is_op(g.node(i), "Conv")) {
        chain = follow_conv_block(g, ix, i, ok);
        if (chain.empty()) {
          const Chain c = follow_chain(g, ix, i, ok);
          chain = c.nodes;
          if (auto p = follow_max_pool(g, ix, c, ok)) chain.push_back(*p);
        }
      }
      else if (is_op(g.node(i), "MatMul")) {
        chain = follow_matmul_chain(g, ix, i, ok).nodes;
        if (chain.size() < 2) chain = follow_matmul_views(g, ix, i, ok);
      }
      else if (is_op(g.node(i), "Gemm")) chain = follow_gemm_chain(g, ix, i, ok);
      else if (is_op(g.node(i), "Div")) chain = follow_gelu_chain(g, ix, i, ok).nodes;
      else if (is_op(g.node(i), "Mul")) chain = follow_channel_scale(g, ix, i, ok);
      if (chain.size() < 2) continue;
      std::vector<size_t> ids;
      for (size_t p : chain) {
        taken[p] = 1;
        ids.push_back(g.node(p).index());
      }
      sdk::check(sdk::host().claim_nodes(sink, ids.data(), ids.size(), 0.0));
    }
  }
  for (size_t i = 0; i < count; ++i) {
    if (taken[i]) continue;
    size_t index = g.node(i).index();
    if (verdict[i]) sdk::check(sdk::host().refuse_node(sink, index, verdict[i]->reason, verdict[i]->message.c_str()));
    else sdk::check(sdk::host().claim_nodes(sink, &index, 1, 0.0));
  }
}

std::string fused_kind(const sdk::Graph& sg) {
  std::string kind;
  for (size_t i = 0; i < sg.node_count(); ++i) kind += (i ? "+" : "") + std::string(sg.node(i).op_type());
  return kind;
}

namespace {

// A MatMul group: rebuilt from its MatMul, which must head the whole group.
std::unique_ptr<Kernel> create_fused_matmul(const sdk::Graph& sg, size_t mm, CpuSession& session, sdk::Prepacked& pp) {
  const size_t count = sg.node_count();
  const ViewIndex ix = index_view(sg);
  MatMulChain c = follow_matmul_chain(sg, ix, mm, [](size_t) { return true; });
  if (c.nodes.size() != count || c.nodes.size() < 2)
    sdk::fail(NXRT_UNSUPPORTED, "group of {} nodes is not a MatMul chain this plugin fuses ({} on the chain)", count,
              c.nodes.size());
  Node last = sg.node(c.nodes.back());
  if (sg.output_count() != 1 || sg.output(0).raw() != last.output(0).raw())
    sdk::fail(NXRT_UNSUPPORTED, "fused MatMul group must have exactly one output, its last value ({} outputs)",
              sg.output_count());
  auto input_index = [&](const sdk::Value& v) { return group_input_index(sg, v); };
  Node mn = sg.node(mm);
  Node add = sg.node(c.nodes[1]);
  MatMulIo io;
  io.a = input_index(mn.input(0));
  io.b = input_index(mn.input(1));
  io.bias_add = &add;
  io.bias_slot = c.bias_slot;
  if (c.residual_slot >= 0) io.residual = input_index(sg.node(c.nodes[2]).input(size_t(c.residual_slot)));
  return make_matmul_kernel(mn, session, io, pp);
}

// A Gemm group: the Gemm and its activation.
std::unique_ptr<Kernel> create_fused_gemm(const sdk::Graph& sg, size_t gm, CpuSession& session, sdk::Prepacked& pp) {
  const ViewIndex ix = index_view(sg);
  std::pair<float, float> bounds{};
  const std::vector<size_t> chain = follow_gemm_chain(sg, ix, gm, [](size_t) { return true; }, &bounds);
  if (chain.size() != 2 || sg.node_count() != 2)
    sdk::fail(NXRT_UNSUPPORTED, "group of {} nodes is not a Gemm -> Relu | Clip chain this plugin fuses", sg.node_count());
  if (sg.output_count() != 1 || sg.output(0).raw() != sg.node(chain[1]).output(0).raw())
    sdk::fail(NXRT_UNSUPPORTED, "fused Gemm group must have exactly one output, its last value ({} outputs)",
              sg.output_count());
  Node gn = sg.node(gm);
  GemmIo io;
  io.a = group_input_index(sg, gn.input(0));
  io.b = group_input_index(sg, gn.input(1));
  io.c = gn.input_count() > 2 ? group_input_index(sg, gn.input(2)) : -1;
  io.clamp = true;
  io.lo = bounds.first;
  io.hi = bounds.second;
  return make_gemm_kernel(gn, session, io, pp);
}

}  // namespace

std::unique_ptr<Kernel> create_fused_kernel(const sdk::Graph& sg, CpuSession& session, sdk::Prepacked& pp) {
  // The group's nodes arrive in model order; rebuild the chain from its Conv (or MatMul).
  const size_t count = sg.node_count();
  if (auto k = create_qdq_kernel(sg, session, pp)) return k;
  if (auto k = create_matmul_views_kernel(sg, session)) return k;
  if (auto k = create_channel_scale_kernel(sg, session, pp)) return k;
  for (size_t i = 0; i < count; ++i) {
    if (is_op(sg.node(i), "MatMul")) return create_fused_matmul(sg, i, session, pp);
    if (is_op(sg.node(i), "Gemm")) return create_fused_gemm(sg, i, session, pp);
  }
  if (count == 5 && is_op(sg.node(0), "Div")) {
    const ViewIndex ix = index_view(sg);
    GeluChain c = follow_gelu_chain(sg, ix, 0, [](size_t) { return true; });
    if (c.nodes.size() != 5 || sg.output_count() != 1 || sg.output(0).raw() != sg.node(c.nodes.back()).output(0).raw())
      sdk::fail(NXRT_UNSUPPORTED, "group of {} nodes is not the Gelu chain this plugin fuses", count);
    const int x_index = group_input_index(sg, sg.node(0).input(0));
    ThreadPool* pool = session.pool();
    return make_kernel([c, x_index, pool](Context& ctx) {
      ConstTensorView x = ctx.input(size_t(x_index));
      TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
      gelu_erf_chain(x.data<float>(), y.data<float>(), x.numel(), c.c, c.a, c.h, pool);
    }, "exact gelu (erf) in one pass");
  }
  if (auto k = create_conv_block_kernel(sg, session, pp)) return k;
  std::optional<size_t> conv;
  for (size_t i = 0; i < count; ++i)
    if (is_op(sg.node(i), "Conv")) {
      if (conv) sdk::fail(NXRT_UNSUPPORTED, "fused group of {} nodes has more than one Conv", count);
      conv = i;
    }
  if (!conv) sdk::fail(NXRT_UNSUPPORTED, "group of {} nodes is not a Conv chain this plugin fuses", count);
  const ViewIndex ix = index_view(sg);
  Chain c = follow_chain(sg, ix, *conv, [](size_t) { return true; });
  const auto pool_node = follow_max_pool(sg, ix, c, [](size_t) { return true; });
  if (pool_node) c.nodes.push_back(*pool_node);
  // Inside a subgraph the chain's last value is the graph output, so sole_use
  // stops there; every node must be on the chain and the only output its end.
  if (c.nodes.size() != count)
    sdk::fail(NXRT_UNSUPPORTED, "group of {} nodes is not a Conv chain this plugin fuses ({} on the chain)", count,
              c.nodes.size());
  Node last = sg.node(c.nodes.back());
  if (sg.output_count() != 1 || sg.output(0).raw() != last.output(0).raw())
    sdk::fail(NXRT_UNSUPPORTED, "fused Conv group must have exactly one output, its last value ({} outputs)",
              sg.output_count());
  auto input_index = [&](const sdk::Value& v) { return group_input_index(sg, v); };
  Node cn = sg.node(*conv);
  ConvIo io;
  io.x = input_index(cn.input(0));
  io.w = input_index(cn.input(1));
  io.b = input_index(cn.input(2));
  if (c.add_other_slot >= 0) io.residual = input_index(sg.node(c.nodes[1]).input(size_t(c.add_other_slot)));
  io.post.clamp = c.clamp;
  io.post.lo = c.lo;
  io.post.hi = c.hi;
  io.post.hardswish = c.hardswish;
  if (pool_node) io.max_pool = std::make_shared<const PoolAttrs>(read_pool_attrs(sg.node(*pool_node)));
  return make_conv_kernel(cn, session, io, pp);
}

}  // namespace nxrt::cpu
