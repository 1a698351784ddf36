// Reductions on reduce.comp: the Reduce* family over contiguous constant axes
// (keepdims, noop_with_empty_axes) and GlobalAveragePool/GlobalMaxPool, a
// mean/max over the spatial dims.
#include "op_kernel.hpp"
#include "shape_math.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace nxrt::vk {

using sdk::fail;
using sdk::refuse;

namespace {

struct ReducePush { uint32_t n, len, inner, op; };

// reduce.comp's op codes.
const std::map<std::string, uint32_t> kReduce = {{"ReduceSum", 0}, {"ReduceMean", 1}, {"ReduceMax", 2}, {"ReduceMin", 3},
                                                 {"ReduceProd", 4}, {"ReduceSumSquare", 5}, {"ReduceL2", 6}, {"ReduceL1", 7}};

// ------------------------------------------------------------ Reduce*

// Axes became an input in opset 13 for ReduceSum, 18 for the others.
bool reduce_axes_from_input(const IrNode& n) {
  return n.op == "ReduceSum" ? n.opset >= 13 : n.opset >= 18;
}

// Reduction geometry: sorted normalized axes must be contiguous.
struct RedGeo { int64_t outer, len, inner; Shape out; bool identity; };
RedGeo reduce_geo(const IrGraph& g, const IrNode& n, const Shape& x) {
  auto axes = *axes_of(g, n, reduce_axes_from_input(n));
  int64_t r = int64_t(x.size());
  bool keep = attr_i(n, "keepdims", 1) != 0;
  RedGeo rg{1, 1, 1, {}, false};
  if (axes.empty()) {
    if (attr_i(n, "noop_with_empty_axes", 0)) {
      rg.identity = true;
      rg.out = x;
      rg.len = 1;
      rg.outer = numel(x);
      return rg;
    }
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  for (auto& a : axes) a = norm_axis(a, r);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  if (axes.back() - axes.front() + 1 != int64_t(axes.size())) fail(NXRT_UNSUPPORTED, "{}: non-contiguous reduction axes", n.op);
  for (int64_t i = 0; i < r; ++i) {
    bool red = std::binary_search(axes.begin(), axes.end(), i);
    if (i < axes.front()) rg.outer *= x[size_t(i)];
    else if (red) rg.len *= x[size_t(i)];
    else rg.inner *= x[size_t(i)];
    if (!red) rg.out.push_back(x[size_t(i)]);
    else if (keep) rg.out.push_back(1);
  }
  return rg;
}

R check_reduce(const IrGraph& g, const IrNode& n) {
  bool from_input = reduce_axes_from_input(n);
  if (!from_input && n.attrs.count("noop_with_empty_axes")) return refuse(NXRT_REFUSE_ATTRIBUTE, "noop_with_empty_axes before axes became an input");
  auto ax = axes_of(g, n, from_input);
  if (!ax) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} axes must be a constant", n.op);
  auto x = g.in(n, 0);
  if (x->rank < 0) return refuse(NXRT_REFUSE_SHAPE, "{} needs a known rank", n.op);
  auto a = *ax;
  if (a.empty() && !attr_i(n, "noop_with_empty_axes", 0))
    for (int64_t i = 0; i < x->rank; ++i) a.push_back(i);
  for (auto& v : a) v = norm_axis(v, x->rank);
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  if (!a.empty() && a.back() - a.front() + 1 != int64_t(a.size()))
    return refuse(NXRT_REFUSE_ATTRIBUTE, "{} over non-contiguous axes is not implemented", n.op);
  return std::nullopt;
}

void infer_reduce(const IrGraph& g, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  out[0] = reduce_geo(g, n, *in[0]).out;
}

void emit_reduce(Emitter& e, const EmitArgs& a) {
  RedGeo rg = reduce_geo(a.g, a.n, *a.is[0]);
  if (rg.identity) {
    e.copy(a.il[0], a.ol[0]);
    return;
  }
  ReducePush p{u32(rg.outer * rg.inner), u32(rg.len), u32(rg.inner), kReduce.at(a.n.op)};
  uint32_t gx, gy;
  Emitter::grid(uint64_t(p.n), 256, gx, gy);
  e.dispatch(a.f16 ? Shader::reduce_f16 : Shader::reduce, {}, {a.il[0], a.ol[0]}, 1, p, gx, gy);
}

// ------------------------------------------------------------ global pools

R check_global_pool(const IrGraph& g, const IrNode& n) {
  if (g.in(n, 0)->rank >= 0 && g.in(n, 0)->rank < 3) return refuse(NXRT_REFUSE_SHAPE, "{} needs rank >= 3", n.op);
  return std::nullopt;
}

void infer_global_pool(const IrGraph&, const IrNode&, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  out[0] = *in[0];
  for (size_t i = 2; i < out[0].size(); ++i) out[0][i] = 1;
}

void emit_global_pool(Emitter& e, const EmitArgs& a) {
  const Shape& X = *a.is[0];
  int64_t sp = numel(X) / std::max<int64_t>(1, X[0] * X[1]);
  ReducePush p{u32(a.ny), u32(sp), 1, a.n.op == "GlobalMaxPool" ? 2u : 1u};
  uint32_t gx, gy;
  Emitter::grid(uint64_t(a.ny), 256, gx, gy);
  e.dispatch(a.f16 ? Shader::reduce_f16 : Shader::reduce, {}, {a.il[0], a.ol[0]}, 1, p, gx, gy);
}

}  // namespace

std::vector<OpKernel> reduce_ops() {
  return {
      {.names = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL2", "ReduceL1"},
       .types = kFloatTypes,
       .meta_inputs = {1},  // axes (an input from opset 13 for ReduceSum, 18 for the others)
       .attrs = {"keepdims", "noop_with_empty_axes", "axes"},
       .check = check_reduce,
       .infer = infer_reduce,
       .emit = emit_reduce},
      {.names = {"GlobalAveragePool", "GlobalMaxPool"},
       .types = kFloatTypes,
       .check = check_global_pool,
       .infer = infer_global_pool,
       .emit = emit_global_pool},
  };
}

}  // namespace nxrt::vk
