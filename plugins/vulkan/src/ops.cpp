#include "ops.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>

namespace nxrt::vk {

using sdk::fail;
using sdk::Refusal;
using sdk::refuse;
using R = std::optional<Refusal>;

namespace {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}
Shape dense_strides(const Shape& s) {
  Shape st(s.size(), 1);
  for (int i = int(s.size()) - 2; i >= 0; --i) st[size_t(i)] = st[size_t(i) + 1] * s[size_t(i) + 1];
  return st;
}
int64_t norm_axis(int64_t a, int64_t rank) { return a < 0 ? a + rank : a; }
uint32_t u32(int64_t v) { return uint32_t(v); }

// ------------------------------------------------------------ op table

struct OpDef {
  std::set<std::string> attrs;                 // every attribute the kernel implements
  std::vector<nxrt_dtype> dtypes;              // allowed for data inputs/outputs
  std::function<R(const IrGraph&, const IrNode&)> check;  // extra checks
  std::function<void(const IrGraph&, const IrNode&, const std::vector<const Shape*>&, std::vector<Shape>&)> infer;
  bool view = false;
  // Inputs exempt from the dtype check (indices, shapes, axes...).
  std::set<size_t> meta_inputs;
  std::set<size_t> meta_outputs;
  // A float16-storage variant of the kernel exists: float16 nodes (all data
  // tensors float16) are claimed where the device has 16-bit storage.
  bool f16 = false;
  // Input and output types differ by design (Cast): check_cast replaces check_dtypes.
  bool cast = false;
};

const std::vector<nxrt_dtype> F32 = {NXRT_DTYPE_FLOAT32};
// Copy kernels move raw elements: 32-bit words, and 16-bit units for float16 (f16).
const std::vector<nxrt_dtype> MOVE = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_INT32, NXRT_DTYPE_INT64};
// Views alias their input (a materialised graph output is a byte copy) and
// Shape reads only the shape: no kernel, so float16 needs no device feature.
const std::vector<nxrt_dtype> VIEW = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_INT32, NXRT_DTYPE_INT64, NXRT_DTYPE_FLOAT16};

enum UnaryOp { U_RELU, U_ERF, U_SIGMOID, U_TANH, U_EXP, U_LOG, U_SQRT, U_NEG, U_ABS, U_RECIP, U_CLIP, U_LEAKY, U_IDENT,
               U_FLOOR, U_CEIL, U_ELU, U_HSIG, U_SOFTPLUS, U_SIN, U_COS, U_HSWISH, U_SILU, U_SIGN };
const std::map<std::string, UnaryOp> kUnary = {
    {"Relu", U_RELU}, {"Erf", U_ERF}, {"Sigmoid", U_SIGMOID}, {"Tanh", U_TANH}, {"Exp", U_EXP}, {"Log", U_LOG},
    {"Sqrt", U_SQRT}, {"Neg", U_NEG}, {"Abs", U_ABS}, {"Reciprocal", U_RECIP}, {"Clip", U_CLIP}, {"LeakyRelu", U_LEAKY},
    {"Floor", U_FLOOR}, {"Ceil", U_CEIL}, {"Elu", U_ELU}, {"HardSigmoid", U_HSIG}, {"Softplus", U_SOFTPLUS},
    {"Sin", U_SIN}, {"Cos", U_COS}, {"HardSwish", U_HSWISH}, {"Sign", U_SIGN}};
const std::map<std::string, uint32_t> kBinary = {{"Add", 0}, {"Sub", 1}, {"Mul", 2}, {"Div", 3}, {"Pow", 4},
                                                 {"Max", 5}, {"Min", 6}, {"PRelu", 7}};
const std::map<std::string, uint32_t> kReduce = {{"ReduceSum", 0}, {"ReduceMean", 1}, {"ReduceMax", 2}, {"ReduceMin", 3},
                                                 {"ReduceProd", 4}, {"ReduceSumSquare", 5}, {"ReduceL2", 6}, {"ReduceL1", 7}};

void same_shape(const IrGraph&, const IrNode&, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  out[0] = *in[0];
}

Shape broadcast(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape o(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i + a.size() >= r ? a[i + a.size() - r] : 1;
    int64_t y = i + b.size() >= r ? b[i + b.size() - r] : 1;
    if (x != y && x != 1 && y != 1) fail(NXRT_INVALID_ARGUMENT, "shapes cannot broadcast ({} vs {})", x, y);
    o[i] = x == 1 ? y : x;
  }
  return o;
}

// Spatial geometry of Conv / pooling, from attributes and input/kernel sizes.
struct Geo {
  int64_t H, W, KH, KW, sh, sw, dh, dw, ph0, pw0, ph1, pw1, OH, OW;
};
Geo geometry(const IrNode& n, const Shape& x, int64_t kh, int64_t kw, bool ceil_mode) {
  Geo g{};
  bool one_d = x.size() == 3;
  g.H = one_d ? 1 : x[2];
  g.W = one_d ? x[2] : x[3];
  g.KH = kh;
  g.KW = kw;
  auto strides = attr_ints(n, "strides");
  auto dil = attr_ints(n, "dilations");
  auto pads = attr_ints(n, "pads");
  auto at = [&](const std::vector<int64_t>& v, size_t i2, size_t i1, int64_t d) {
    if (v.empty()) return d;
    return one_d ? (i1 == SIZE_MAX ? d : v[i1]) : v[i2];
  };
  g.sh = at(strides, 0, SIZE_MAX, 1);
  g.sw = at(strides, 1, 0, 1);
  g.dh = at(dil, 0, SIZE_MAX, 1);
  g.dw = at(dil, 1, 0, 1);
  g.ph0 = at(pads, 0, SIZE_MAX, 0);
  g.pw0 = at(pads, 1, 0, 0);
  g.ph1 = at(pads, 2, SIZE_MAX, 0);
  g.pw1 = at(pads, 3, 1, 0);
  std::string ap = attr_s(n, "auto_pad", "NOTSET");
  auto same = [&](int64_t in, int64_t k, int64_t s, int64_t d, int64_t& p0, int64_t& p1, bool upper) {
    int64_t out = (in + s - 1) / s;
    int64_t total = std::max<int64_t>(0, (out - 1) * s + (k - 1) * d + 1 - in);
    p0 = upper ? total / 2 : total - total / 2;
    p1 = total - p0;
  };
  if (ap == "VALID") {
    g.ph0 = g.pw0 = g.ph1 = g.pw1 = 0;
  } else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    bool up = ap == "SAME_UPPER";
    if (!one_d) same(g.H, g.KH, g.sh, g.dh, g.ph0, g.ph1, up);
    same(g.W, g.KW, g.sw, g.dw, g.pw0, g.pw1, up);
  }
  auto outdim = [&](int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
    int64_t span = in + p0 + p1 - ((k - 1) * d + 1);
    if (span < 0) return int64_t(0);
    return (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  };
  g.OH = outdim(g.H, g.KH, g.sh, g.dh, g.ph0, g.ph1);
  g.OW = outdim(g.W, g.KW, g.sw, g.dw, g.pw0, g.pw1);
  return g;
}
Shape spatial_out(const Shape& x, int64_t c, const Geo& g) {
  if (x.size() == 3) return {x[0], c, g.OW};
  return {x[0], c, g.OH, g.OW};
}

R check_spatial_attrs(const IrGraph& g, const IrNode& n, size_t want_pads_per_dim = 2) {
  auto x = g.in(n, 0);
  if (!x || x->rank < 0) return refuse(NXRT_REFUSE_SHAPE, "{} needs a known input rank", n.op);
  if (x->rank != 3 && x->rank != 4) return refuse(NXRT_REFUSE_SHAPE, "{} supports 1-D and 2-D spatial inputs, got rank {}", n.op, x->rank);
  size_t sp = size_t(x->rank - 2);
  for (const char* a : {"strides", "dilations", "kernel_shape"}) {
    auto v = attr_ints(n, a);
    if (!v.empty() && v.size() != sp) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} attribute {} has {} entries for {} spatial dims", n.op, a, v.size(), sp);
    for (auto e : v) if (e <= 0) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} attribute {} has a non-positive entry", n.op, a);
  }
  auto pads = attr_ints(n, "pads");
  if (!pads.empty() && pads.size() != sp * want_pads_per_dim) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} pads has {} entries", n.op, pads.size());
  for (auto p : pads) if (p < 0) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} has negative pads", n.op);
  std::string ap = attr_s(n, "auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID" && ap != "SAME_UPPER" && ap != "SAME_LOWER")
    return refuse(NXRT_REFUSE_ATTRIBUTE, "{} auto_pad '{}' is not implemented", n.op, ap);
  return std::nullopt;
}

// Axes for Reduce*, Squeeze, Unsqueeze: attribute or constant input 1.
std::optional<std::vector<int64_t>> axes_of(const IrGraph& g, const IrNode& n, bool from_input) {
  if (!from_input) return attr_ints(n, "axes");
  auto v = g.in(n, 1);
  if (!v) return std::vector<int64_t>{};
  return const_ints(v);
}
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

// Slice parameters, normalized to per-dimension start/step/length.
struct SliceGeo { Shape out; std::vector<int64_t> start, step; };
SliceGeo slice_geo(const IrGraph& g, const IrNode& n, const Shape& x) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.opset < 10) {
    starts = attr_ints(n, "starts");
    ends = attr_ints(n, "ends");
    axes = attr_ints(n, "axes");
  } else {
    starts = *const_ints(g.in(n, 1));
    ends = *const_ints(g.in(n, 2));
    if (g.in(n, 3)) axes = *const_ints(g.in(n, 3));
    if (g.in(n, 4)) steps = *const_ints(g.in(n, 4));
  }
  int64_t r = int64_t(x.size());
  if (axes.empty()) for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  SliceGeo s;
  s.out = x;
  s.start.assign(size_t(r), 0);
  s.step.assign(size_t(r), 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = norm_axis(axes[i], r);
    int64_t d = x[size_t(a)], st = steps[i];
    if (st == 0) fail(NXRT_INVALID_ARGUMENT, "Slice step 0");
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += d;
    if (e < 0) e += d;
    int64_t len;
    if (st > 0) {
      b = std::clamp<int64_t>(b, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      len = e > b ? (e - b + st - 1) / st : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      len = b > e ? (b - e + (-st) - 1) / (-st) : 0;
    }
    s.out[size_t(a)] = len;
    s.start[size_t(a)] = b;
    s.step[size_t(a)] = st;
  }
  return s;
}

Shape reshape_target(const IrGraph& g, const IrNode& n, const Shape& x) {
  auto tgt = *const_ints(g.in(n, 1));
  bool allowzero = attr_i(n, "allowzero", 0) != 0;
  Shape out(tgt.size());
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < tgt.size(); ++i) {
    int64_t d = tgt[i];
    if (d == 0 && !allowzero) d = i < x.size() ? x[i] : 0;
    if (d == -1) {
      infer = int64_t(i);
      d = 1;
    } else {
      known *= d;
    }
    out[i] = d;
  }
  if (infer >= 0) out[size_t(infer)] = known ? numel(x) / known : 0;
  if (numel(out) != numel(x)) fail(NXRT_INVALID_ARGUMENT, "Reshape from {} to {} elements", numel(x), numel(out));
  return out;
}

std::map<std::string, OpDef> build_table() {
  std::map<std::string, OpDef> t;
  for (auto& [name, code] : kUnary) {
    OpDef d;
    d.dtypes = F32;
    d.f16 = true;
    d.infer = same_shape;
    if (name == "Clip") {
      d.attrs = {"min", "max"};
      d.meta_inputs = {1, 2};
      d.check = [](const IrGraph& g, const IrNode& n) -> R {
        for (size_t i = 1; i < 3; ++i) {
          auto v = g.in(n, i);
          if (v && (!v->is_const || !const_floats(v) || v->dtype != g.in(n, 0)->dtype))
            return refuse(NXRT_REFUSE_ATTRIBUTE, "Clip {} must be a constant of the input's type", i == 1 ? "min" : "max");
        }
        return std::nullopt;
      };
    }
    if (name == "LeakyRelu" || name == "Elu") d.attrs = {"alpha"};
    if (name == "HardSigmoid") d.attrs = {"alpha", "beta"};
    t[name] = d;
  }
  for (auto& [name, code] : kBinary) {
    OpDef d;
    d.dtypes = F32;
    d.f16 = true;
    d.check = [](const IrGraph&, const IrNode& n) -> R {
      if (n.in.size() != 2) return refuse(NXRT_REFUSE_OTHER, "{} with {} inputs (only 2 are implemented)", n.op, n.in.size());
      if (n.opset < 7) return refuse(NXRT_REFUSE_OPSET, "{} before opset 7 (legacy broadcast) is not implemented", n.op);
      return std::nullopt;
    };
    d.infer = [](const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      out[0] = broadcast(*in[0], *in[1]);
      if (n.op == "PRelu" && out[0] != *in[0]) fail(NXRT_INVALID_ARGUMENT, "PRelu slope does not broadcast to X");
    };
    t[name] = d;
  }
  {
    OpDef d;
    d.dtypes = F32;
    d.f16 = true;
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      auto a = g.in(n, 0), b = g.in(n, 1);
      if (a->rank < 0 || b->rank < 0) return refuse(NXRT_REFUSE_SHAPE, "MatMul needs known ranks");
      if (std::max(a->rank, b->rank) > 4) return refuse(NXRT_REFUSE_SHAPE, "MatMul with rank > 4 is not implemented");
      return std::nullopt;
    };
    d.infer = [](const IrGraph&, const IrNode&, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      Shape a = *in[0], b = *in[1];
      bool a1 = a.size() == 1, b1 = b.size() == 1;
      if (a1) a.insert(a.begin(), 1);
      if (b1) b.push_back(1);
      if (a[a.size() - 1] != b[b.size() - 2]) fail(NXRT_INVALID_ARGUMENT, "MatMul inner dims {} vs {}", a.back(), b[b.size() - 2]);
      Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
      Shape o = broadcast(ba, bb);
      if (!a1) o.push_back(a[a.size() - 2]);
      if (!b1) o.push_back(b.back());
      out[0] = o;
    };
    t["MatMul"] = d;
  }
  {
    OpDef d;
    d.dtypes = F32;
    d.f16 = true;
    d.attrs = {"alpha", "beta", "transA", "transB"};
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      if (n.opset < 7) return refuse(NXRT_REFUSE_OPSET, "Gemm before opset 7 is not implemented");
      if (g.in(n, 0)->rank != 2 || g.in(n, 1)->rank != 2) return refuse(NXRT_REFUSE_SHAPE, "Gemm needs rank-2 A and B");
      if (auto c = g.in(n, 2); c && (c->rank < 0 || c->rank > 2)) return refuse(NXRT_REFUSE_SHAPE, "Gemm C of rank {}", c->rank);
      return std::nullopt;
    };
    d.infer = [](const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      const Shape &a = *in[0], &b = *in[1];
      int64_t M = attr_i(n, "transA", 0) ? a[1] : a[0], K = attr_i(n, "transA", 0) ? a[0] : a[1];
      int64_t K2 = attr_i(n, "transB", 0) ? b[1] : b[0], N = attr_i(n, "transB", 0) ? b[0] : b[1];
      if (K != K2) fail(NXRT_INVALID_ARGUMENT, "Gemm inner dims {} vs {}", K, K2);
      out[0] = {M, N};
      if (in.size() > 2 && in[2]) broadcast(*in[2], out[0]);
    };
    t["Gemm"] = d;
  }
  {
    OpDef d;
    d.dtypes = F32;
    d.f16 = true;
    d.attrs = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"};
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      if (auto r = check_spatial_attrs(g, n)) return r;
      auto w = g.in(n, 1);
      if (w->rank >= 0 && w->rank != g.in(n, 0)->rank) return refuse(NXRT_REFUSE_SHAPE, "Conv weight rank {}", w->rank);
      if (attr_i(n, "group", 1) < 1) return refuse(NXRT_REFUSE_ATTRIBUTE, "Conv group < 1");
      return std::nullopt;
    };
    d.infer = [](const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      const Shape &x = *in[0], &w = *in[1];
      int64_t grp = attr_i(n, "group", 1);
      if (x[1] != w[1] * grp || w[0] % grp) fail(NXRT_INVALID_ARGUMENT, "Conv channels: input {} weight {}x{} group {}", x[1], w[0], w[1], grp);
      Geo ge = geometry(n, x, x.size() == 3 ? 1 : w[2], w.back(), false);
      out[0] = spatial_out(x, w[0], ge);
    };
    t["Conv"] = d;
  }
  for (std::string name : {"MaxPool", "AveragePool"}) {
    OpDef d;
    d.dtypes = F32;
    d.f16 = true;
    d.attrs = {"auto_pad", "ceil_mode", "kernel_shape", "pads", "strides"};
    if (name == "MaxPool") d.attrs.insert({"dilations", "storage_order"});
    else d.attrs.insert("count_include_pad");
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      if (auto r = check_spatial_attrs(g, n)) return r;
      if (n.out.size() > 1 && n.out[1] >= 0) return refuse(NXRT_REFUSE_OTHER, "MaxPool Indices output is not implemented");
      if (attr_ints(n, "kernel_shape").empty()) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} without kernel_shape", n.op);
      return std::nullopt;
    };
    d.infer = [](const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      auto k = attr_ints(n, "kernel_shape");
      Geo ge = geometry(n, *in[0], k.size() == 1 ? 1 : k[0], k.back(), attr_i(n, "ceil_mode", 0) != 0);
      out[0] = spatial_out(*in[0], (*in[0])[1], ge);
    };
    t[name] = d;
  }
  for (std::string name : {"GlobalAveragePool", "GlobalMaxPool"}) {
    OpDef d;
    d.dtypes = F32;
    d.f16 = true;
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      if (g.in(n, 0)->rank >= 0 && g.in(n, 0)->rank < 3) return refuse(NXRT_REFUSE_SHAPE, "{} needs rank >= 3", n.op);
      return std::nullopt;
    };
    d.infer = [](const IrGraph&, const IrNode&, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      out[0] = *in[0];
      for (size_t i = 2; i < out[0].size(); ++i) out[0][i] = 1;
    };
    t[name] = d;
  }
  {
    OpDef d;
    d.dtypes = F32;
    d.f16 = true;
    d.attrs = {"epsilon", "momentum", "training_mode"};
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      if (n.opset < 9) return refuse(NXRT_REFUSE_OPSET, "BatchNormalization before opset 9 is not implemented");
      if (attr_i(n, "training_mode", 0) != 0) return refuse(NXRT_REFUSE_ATTRIBUTE, "BatchNormalization training_mode=1 is not implemented");
      for (size_t i = 1; i < n.out.size(); ++i)
        if (n.out[i] >= 0) return refuse(NXRT_REFUSE_OTHER, "BatchNormalization training outputs are not implemented");
      if (g.in(n, 0)->rank >= 0 && g.in(n, 0)->rank < 2) return refuse(NXRT_REFUSE_SHAPE, "BatchNormalization needs rank >= 2");
      return std::nullopt;
    };
    d.infer = same_shape;
    t["BatchNormalization"] = d;
  }
  for (std::string name : {"Softmax", "LogSoftmax"}) {
    OpDef d;
    d.dtypes = F32;
    d.f16 = true;
    d.attrs = {"axis"};
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      if (g.in(n, 0)->rank < 0) return refuse(NXRT_REFUSE_SHAPE, "{} needs a known rank", n.op);
      return std::nullopt;
    };
    d.infer = same_shape;
    t[name] = d;
  }
  {
    OpDef d;
    d.dtypes = F32;
    d.f16 = true;
    d.attrs = {"axis", "epsilon", "stash_type"};
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      if (attr_i(n, "stash_type", 1) != 1) return refuse(NXRT_REFUSE_ATTRIBUTE, "LayerNormalization stash_type != 1");
      for (size_t i = 1; i < n.out.size(); ++i)
        if (n.out[i] >= 0) return refuse(NXRT_REFUSE_OTHER, "LayerNormalization Mean/InvStdDev outputs are not implemented");
      auto x = g.in(n, 0), s = g.in(n, 1);
      if (x->rank < 0) return refuse(NXRT_REFUSE_SHAPE, "LayerNormalization needs a known rank");
      int64_t ax = norm_axis(attr_i(n, "axis", -1), x->rank);
      if (s->rank >= 0 && s->rank != x->rank - ax)
        return refuse(NXRT_REFUSE_SHAPE, "LayerNormalization Scale of rank {} (broadcast scale is not implemented)", s->rank);
      if (auto b = g.in(n, 2); b && b->rank >= 0 && b->rank != x->rank - ax)
        return refuse(NXRT_REFUSE_SHAPE, "LayerNormalization B of rank {} (broadcast bias is not implemented)", b->rank);
      return std::nullopt;
    };
    d.infer = same_shape;
    t["LayerNormalization"] = d;
  }
  for (auto& [name, code] : kReduce) {
    OpDef d;
    d.dtypes = F32;
    d.f16 = true;
    d.attrs = {"keepdims", "noop_with_empty_axes"};
    d.meta_inputs = {1};
    std::string nm = name;
    d.check = [nm](const IrGraph& g, const IrNode& n) -> R {
      bool from_input = reduce_axes_from_input(n);
      if (!from_input && n.attrs.count("noop_with_empty_axes")) return refuse(NXRT_REFUSE_ATTRIBUTE, "noop_with_empty_axes before axes became an input");
      auto ax = axes_of(g, n, from_input);
      if (!ax) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} axes must be a constant", nm);
      auto x = g.in(n, 0);
      if (x->rank < 0) return refuse(NXRT_REFUSE_SHAPE, "{} needs a known rank", nm);
      auto a = *ax;
      if (a.empty() && !attr_i(n, "noop_with_empty_axes", 0))
        for (int64_t i = 0; i < x->rank; ++i) a.push_back(i);
      for (auto& v : a) v = norm_axis(v, x->rank);
      std::sort(a.begin(), a.end());
      a.erase(std::unique(a.begin(), a.end()), a.end());
      if (!a.empty() && a.back() - a.front() + 1 != int64_t(a.size()))
        return refuse(NXRT_REFUSE_ATTRIBUTE, "{} over non-contiguous axes is not implemented", nm);
      return std::nullopt;
    };
    d.infer = [](const IrGraph& g, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      out[0] = reduce_geo(g, n, *in[0]).out;
    };
    if (name == "ReduceSum" || name == "ReduceMean" || name == "ReduceMax" || name == "ReduceMin" || name == "ReduceProd" ||
        name == "ReduceSumSquare" || name == "ReduceL1" || name == "ReduceL2") {
      auto def = d;
      def.attrs.insert("axes");
      t[name] = def;
    }
  }
  {
    OpDef d;
    d.dtypes = MOVE;
    d.f16 = true;
    d.attrs = {"perm"};
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      auto x = g.in(n, 0);
      if (x->rank < 0 || x->rank > 6) return refuse(NXRT_REFUSE_SHAPE, "Transpose needs a known rank <= 6");
      return std::nullopt;
    };
    d.infer = [](const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      const Shape& x = *in[0];
      auto perm = attr_ints(n, "perm");
      if (perm.empty()) for (int64_t i = int64_t(x.size()) - 1; i >= 0; --i) perm.push_back(i);
      out[0].clear();
      for (auto p : perm) out[0].push_back(x[size_t(p)]);
    };
    t["Transpose"] = d;
  }
  {
    OpDef d;
    d.dtypes = MOVE;
    d.f16 = true;
    d.attrs = {"axis"};
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      auto x = g.in(n, 0);
      if (x->rank < 0 || x->rank > 6) return refuse(NXRT_REFUSE_SHAPE, "Concat needs a known rank <= 6");
      for (size_t i = 0; i < n.in.size(); ++i)
        if (g.in(n, i)->dtype != x->dtype) return refuse(NXRT_REFUSE_DTYPE, "Concat inputs of mixed types");
      return std::nullopt;
    };
    d.infer = [](const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      Shape o = *in[0];
      int64_t ax = norm_axis(attr_i(n, "axis", 0), int64_t(o.size()));
      o[size_t(ax)] = 0;
      for (auto s : in) o[size_t(ax)] += (*s)[size_t(ax)];
      out[0] = o;
    };
    t["Concat"] = d;
  }
  {
    OpDef d;
    d.dtypes = MOVE;
    d.f16 = true;
    d.attrs = {"axis"};
    d.meta_inputs = {1};
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      auto i = g.in(n, 1);
      if (i->dtype != NXRT_DTYPE_INT64 && i->dtype != NXRT_DTYPE_INT32) return refuse(NXRT_REFUSE_DTYPE, "Gather indices of type {}", int(i->dtype));
      if (g.in(n, 0)->rank < 1) return refuse(NXRT_REFUSE_SHAPE, "Gather needs a known data rank >= 1");
      return std::nullopt;
    };
    d.infer = [](const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      const Shape &x = *in[0], &i = *in[1];
      int64_t ax = norm_axis(attr_i(n, "axis", 0), int64_t(x.size()));
      Shape o(x.begin(), x.begin() + ax);
      o.insert(o.end(), i.begin(), i.end());
      o.insert(o.end(), x.begin() + ax + 1, x.end());
      out[0] = o;
    };
    t["Gather"] = d;
  }
  {
    OpDef d;
    d.dtypes = MOVE;
    d.f16 = true;
    d.meta_inputs = {1, 2, 3, 4};
    d.attrs = {"starts", "ends", "axes"};
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      if (g.in(n, 0)->rank < 0 || g.in(n, 0)->rank > 6) return refuse(NXRT_REFUSE_SHAPE, "Slice needs a known rank <= 6");
      if (n.opset >= 10)
        for (size_t i = 1; i < 5; ++i)
          if (n.in.size() > i && n.in[i] >= 0 && !const_ints(g.in(n, i))) return refuse(NXRT_REFUSE_ATTRIBUTE, "Slice input {} must be a constant", i);
      return std::nullopt;
    };
    d.infer = [](const IrGraph& g, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      out[0] = slice_geo(g, n, *in[0]).out;
    };
    t["Slice"] = d;
  }
  {
    OpDef d;
    d.dtypes = MOVE;
    d.f16 = true;
    d.meta_inputs = {1};
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      if (!const_ints(g.in(n, 1))) return refuse(NXRT_REFUSE_ATTRIBUTE, "Expand shape must be a constant");
      return std::nullopt;
    };
    d.infer = [](const IrGraph& g, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      out[0] = broadcast(*in[0], *const_ints(g.in(n, 1)));
      if (out[0].size() > 6) fail(NXRT_UNSUPPORTED, "Expand to rank > 6");
    };
    t["Expand"] = d;
  }
  // Views.
  {
    OpDef d;
    d.dtypes = VIEW;
    d.view = true;
    d.attrs = {"allowzero"};
    d.meta_inputs = {1};
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      if (!const_ints(g.in(n, 1))) return refuse(NXRT_REFUSE_ATTRIBUTE, "Reshape shape must be a constant");
      return std::nullopt;
    };
    d.infer = [](const IrGraph& g, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      out[0] = reshape_target(g, n, *in[0]);
    };
    t["Reshape"] = d;
  }
  {
    OpDef d;
    d.dtypes = VIEW;
    d.view = true;
    d.attrs = {"axis"};
    d.infer = [](const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      const Shape& x = *in[0];
      int64_t ax = norm_axis(attr_i(n, "axis", 1), int64_t(x.size()));
      int64_t a = 1, b = 1;
      for (size_t i = 0; i < x.size(); ++i) (int64_t(i) < ax ? a : b) *= x[i];
      out[0] = {a, b};
    };
    t["Flatten"] = d;
  }
  for (std::string name : {"Squeeze", "Unsqueeze"}) {
    OpDef d;
    d.dtypes = VIEW;
    d.view = true;
    d.attrs = {"axes"};
    d.meta_inputs = {1};
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      if (!axes_of(g, n, n.opset >= 13)) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} axes must be a constant", n.op);
      if (n.op == "Squeeze" && axes_of(g, n, n.opset >= 13)->empty() && g.in(n, 0)->rank < 0)
        return refuse(NXRT_REFUSE_SHAPE, "Squeeze without axes needs a known rank");
      return std::nullopt;
    };
    d.infer = [](const IrGraph& g, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      const Shape& x = *in[0];
      auto axes = *axes_of(g, n, n.opset >= 13);
      Shape o;
      if (n.op == "Squeeze") {
        for (auto& a : axes) a = norm_axis(a, int64_t(x.size()));
        for (size_t i = 0; i < x.size(); ++i) {
          bool sq = axes.empty() ? x[i] == 1 : std::count(axes.begin(), axes.end(), int64_t(i)) > 0;
          if (sq && x[i] != 1) fail(NXRT_INVALID_ARGUMENT, "Squeeze of a dimension of size {}", x[i]);
          if (!sq) o.push_back(x[i]);
        }
      } else {
        int64_t r = int64_t(x.size() + axes.size());
        for (auto& a : axes) a = norm_axis(a, r);
        size_t j = 0;
        for (int64_t i = 0; i < r; ++i) {
          if (std::count(axes.begin(), axes.end(), i)) o.push_back(1);
          else o.push_back(x[j++]);
        }
      }
      out[0] = o;
    };
    t[name] = d;
  }
  {
    OpDef d;
    d.dtypes = VIEW;
    d.view = true;
    d.infer = same_shape;
    t["Identity"] = d;
    OpDef dr = d;
    dr.attrs = {"seed", "ratio", "is_test"};
    dr.meta_inputs = {1, 2};
    dr.check = [](const IrGraph& g, const IrNode& n) -> R {
      if (n.out.size() > 1 && n.out[1] >= 0) return refuse(NXRT_REFUSE_OTHER, "Dropout mask output is not implemented");
      if (n.opset < 7) return refuse(NXRT_REFUSE_OPSET, "Dropout before opset 7");
      if (auto tm = g.in(n, 2)) {
        if (!tm->has_data || tm->data.bytes.empty() || tm->data.bytes[0] != 0)
          return refuse(NXRT_REFUSE_ATTRIBUTE, "Dropout training_mode must be a constant false");
      }
      return std::nullopt;
    };
    t["Dropout"] = dr;
  }
  {
    OpDef d;
    d.dtypes = VIEW;  // reads only the input's shape: float16 needs no device feature
    d.attrs = {"start", "end"};
    d.meta_outputs = {0};
    d.check = [](const IrGraph& g, const IrNode& n) -> R {
      if (g.in(n, 0)->rank > 6 || g.in(n, 0)->rank < 0) return refuse(NXRT_REFUSE_SHAPE, "Shape needs a known rank <= 6 here");
      return std::nullopt;
    };
    d.infer = [](const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
      int64_t r = int64_t(in[0]->size());
      int64_t s = std::clamp<int64_t>(norm_axis(attr_i(n, "start", 0), r), 0, r);
      int64_t e = std::clamp<int64_t>(norm_axis(attr_i(n, "end", r), r), 0, r);
      out[0] = {std::max<int64_t>(0, e - s)};
    };
    t["Shape"] = d;
  }
  {
    OpDef d;
    d.attrs = {"to", "saturate"};  // saturate only affects float8, which is refused
    d.cast = true;
    d.infer = same_shape;
    t["Cast"] = d;
    d.attrs = {"saturate"};  // CastLike: the type of input 1 (never read) is the target
    t["CastLike"] = d;
  }
  return t;
}

const std::map<std::string, OpDef>& table() {
  static const auto t = build_table();
  return t;
}

// ------------------------------------------------------------ emission

struct Emitter {
  Device& dev;
  std::vector<Cmd>& cmds;

  template <typename P>
  void dispatch(Shader s, std::vector<uint32_t> spec, std::vector<Loc> binds, size_t n_writes_at_end, const P& push,
                uint32_t gx, uint32_t gy = 1, uint32_t gz = 1) {
    static_assert(sizeof(P) <= 128 && sizeof(P) % 4 == 0);
    Cmd c;
    c.kind = Cmd::dispatch;
    c.pipeline = &dev.pipeline(s, spec);
    c.writes.assign(binds.size(), false);
    for (size_t i = binds.size() - n_writes_at_end; i < binds.size(); ++i) c.writes[i] = true;
    c.binds = std::move(binds);
    c.push.resize(sizeof(P) / 4);
    std::memcpy(c.push.data(), &push, sizeof(P));
    c.gx = gx;
    c.gy = gy;
    c.gz = gz;
    if (gz > 65535) fail(NXRT_UNSUPPORTED, "dispatch of {} batches exceeds the device limit", gz);
    cmds.push_back(std::move(c));
  }
  // 1-D element grid of 256-thread groups, folded into 2-D past 65535 groups.
  static void grid(uint64_t items, uint32_t per_group, uint32_t& gx, uint32_t& gy) {
    uint64_t groups = std::max<uint64_t>(1, (items + per_group - 1) / per_group);
    gx = uint32_t(std::min<uint64_t>(groups, 65535));
    gy = uint32_t((groups + gx - 1) / gx);
  }
  void copy(Loc src, Loc dst) {
    Cmd c;
    c.kind = Cmd::copy;
    c.src = src;
    c.dst = dst;
    cmds.push_back(std::move(c));
  }
};

// The two float parameters of a unary op (unary.comp's alpha/beta, also the
// fused epilogue's): LeakyRelu/Elu alpha, HardSigmoid alpha/beta, Clip bounds.
void unary_params(const IrGraph& g, const IrNode& n, float& alpha, float& beta) {
  const std::string& op = n.op;
  if (op == "LeakyRelu") alpha = attr_f(n, "alpha", 0.01f);
  if (op == "Elu") alpha = attr_f(n, "alpha", 1.0f);
  if (op == "HardSigmoid") {
    alpha = attr_f(n, "alpha", 0.2f);
    beta = attr_f(n, "beta", 0.5f);
  }
  if (op == "Clip") {
    alpha = -std::numeric_limits<float>::infinity();
    beta = std::numeric_limits<float>::infinity();
    if (n.opset < 11) {
      alpha = attr_f(n, "min", alpha);
      beta = attr_f(n, "max", beta);
    } else {
      if (auto v = const_floats(g.in(n, 1)); v && !v->empty()) alpha = (*v)[0];
      if (auto v = const_floats(g.in(n, 2)); v && !v->empty()) beta = (*v)[0];
    }
  }
}

// The GEMM/conv kernels' ACT specialization constant: 0 none, else the fused
// activation's unary op code + 1 (one pipeline per activation, so the plain
// kernels are unchanged); its parameters go in the push constants' lo/hi.
uint32_t act_spec(const IrNode& n) { return n.act >= 0 ? uint32_t(n.act) + 1 : 0u; }

struct CopyPush { uint32_t n, rank, ew, ibase, obase, dims[6]; int32_t is[6]; uint32_t os[6]; };

// Strided copy with dims/strides in elements (rank <= 6 after dropping size-1 dims).
// ew: 32-bit words per element (words()), or 1 with f16 (16-bit elements, copy_f16).
void strided_copy(Emitter& e, Loc src, Loc dst, const Shape& dims, const std::vector<int64_t>& is, const std::vector<int64_t>& os,
                  int64_t ibase, int64_t obase, uint32_t ew, bool f16) {
  CopyPush p{};
  int64_t n = numel(dims);
  if (n == 0) return;
  // Drop unit dims and merge dims contiguous in both src and dst.
  Shape d2;
  std::vector<int64_t> is2, os2;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!d2.empty() && is2.back() == is[i] * dims[i] && os2.back() == os[i] * dims[i]) {
      d2.back() *= dims[i];
      is2.back() = is[i];
      os2.back() = os[i];
      continue;
    }
    d2.push_back(dims[i]);
    is2.push_back(is[i]);
    os2.push_back(os[i]);
  }
  if (d2.size() > 6) fail(NXRT_UNSUPPORTED, "strided copy of rank {} (max 6)", d2.size());
  p.n = u32(n);
  p.rank = u32(int64_t(d2.size()));
  p.ew = ew;
  p.ibase = u32(ibase);
  p.obase = u32(obase);
  for (size_t i = 0; i < d2.size(); ++i) {
    p.dims[i] = u32(d2[i]);
    p.is[i] = int32_t(is2[i]);
    p.os[i] = u32(os2[i]);
  }
  if (p.rank == 0) {
    p.rank = 1;
    p.dims[0] = 1;
  }
  uint32_t gx, gy;
  Emitter::grid(uint64_t(n), 256, gx, gy);
  e.dispatch(f16 ? Shader::copy_f16 : Shader::copy, {}, {src, dst}, 1, p, gx, gy);
}

// Copy units per element: 32-bit words (2 for int64); a float16 element is one 16-bit unit of copy_f16.
uint32_t words(nxrt_dtype t) { return t == NXRT_DTYPE_INT64 ? 2 : 1; }

struct MatmulPush {
  uint32_t M, N, K, sam, sak, sbk, sbn, batch2, sab1, sab2, sbb1, sbb2, scm, scn, flags;
  float alpha, beta, lo, hi;
};
struct ConvPush {
  uint32_t M, N, K, Cin, H, W, Cout, OW, KH, KW, sh, sw;
  int32_t ph, pw;
  uint32_t dh, dw, groups, flags;
  float lo, hi;
};
struct ConvDirectPush {
  uint32_t n, Cin, H, W, Cout, OH, OW, KH, KW, sh, sw;
  int32_t ph, pw;
  uint32_t dh, dw, cin_g, cout_g, flags;
  float lo, hi;
};

std::vector<uint32_t> tile_spec(int64_t M, int64_t N) {
  // Developer override: NXRT_VULKAN_TILE="BM,BN,BK,TM,TN" for the large class.
  static const std::vector<uint32_t> forced = [] {
    std::vector<uint32_t> v;
    if (const char* e = std::getenv("NXRT_VULKAN_TILE")) {
      unsigned a[5];
      if (std::sscanf(e, "%u,%u,%u,%u,%u", &a[0], &a[1], &a[2], &a[3], &a[4]) == 5 && a[3] && a[4] && a[0] % a[3] == 0 &&
          a[1] % a[4] == 0)
        v = {(a[0] / a[3]) * (a[1] / a[4]), a[0], a[1], a[2], a[3], a[4]};
    }
    return v;
  }();
  if (!forced.empty() && M >= 64 && N >= 64) return forced;
  // {threads, BM, BN, BK, TM, TN}: shared memory (BM+BN)*BK*4 bytes <= 8 KiB.
  if (M <= 8) return {128, 8, 64, 16, 1, 4};
  // Measured on lavapipe (mlp bench): 64x64 tiles with 8x8 outputs per thread
  // beat 4x4 per thread by 2x.
  if (M >= 64 && N >= 64) return {64, 64, 64, 8, 8, 8};
  return {64, 32, 32, 8, 4, 4};
}

void emit_matmul(Emitter& e, Loc a, Loc b, Loc bias, Loc c, int64_t M, int64_t N, int64_t K, int64_t sam, int64_t sak,
                 int64_t sbk, int64_t sbn, int64_t batch1, int64_t batch2, int64_t sab1, int64_t sab2, int64_t sbb1,
                 int64_t sbb2, int64_t scm, int64_t scn, float alpha, float beta, bool f16, const IrNode& n) {
  if (M == 0 || N == 0) return;
  MatmulPush p{u32(M), u32(N), u32(K), u32(sam), u32(sak), u32(sbk), u32(sbn), u32(batch2), u32(sab1), u32(sab2),
               u32(sbb1), u32(sbb2), u32(scm), u32(scn), bias.a ? 1u : 0u, alpha, beta, n.act_a, n.act_b};
  auto spec = tile_spec(M, N);
  spec.push_back(act_spec(n));
  uint32_t gx = u32((N + spec[2] - 1) / spec[2]), gy = u32((M + spec[1] - 1) / spec[1]);
  e.dispatch(f16 ? Shader::matmul_f16 : Shader::matmul, spec, {a, b, bias.a ? bias : a, c}, 1, p, gx, gy, u32(batch1 * batch2));
}

struct UnaryPush { uint32_t n, op; float alpha, beta; };
struct BinaryPush { uint32_t n, op, rank, pad, dims[6], sa[6], sb[6]; };
struct ReducePush { uint32_t n, len, inner, op; };
struct SoftmaxPush { uint32_t rows, len, inner, log; };
struct LnPush { uint32_t rows, len; float eps; uint32_t has_bias; };
struct BnPush { uint32_t n, c, spatial; float eps; };
struct PoolPush {
  uint32_t n, H, W, OH, OW, KH, KW, sh, sw;
  int32_t ph, pw, ph1, pw1;
  uint32_t dh, dw, mode, cip;
};
struct GatherPush { uint32_t n, axis, inner, ni, ew, idx64; };

// Data inputs/outputs against the op's dtypes. A float16 node needs the op's
// float16 kernel, 16-bit storage on the device, and float16 on every data tensor.
R check_dtypes(const IrGraph& g, const IrNode& n, const OpDef& d, const DeviceLimits& lim) {
  auto ok = [&](nxrt_dtype t) { return std::find(d.dtypes.begin(), d.dtypes.end(), t) != d.dtypes.end(); };
  bool any16 = false, all16 = true;
  auto visit = [&](const IrValue* v, const char* role, size_t i) -> R {
    if (v->dtype == NXRT_DTYPE_FLOAT16 && d.f16) {
      any16 = true;
      return std::nullopt;
    }
    all16 = false;
    if (ok(v->dtype)) return std::nullopt;
    if (v->dtype == NXRT_DTYPE_FLOAT16)
      return refuse(NXRT_REFUSE_DTYPE, "{} {} {} is float16 (no float16 Vulkan kernel for {})", n.op, role, i, n.op);
    std::string takes;
    for (auto t : d.dtypes) takes += (takes.empty() ? "" : "/") + std::string(sdk::dtype_name(t));
    if (d.f16) takes += "/float16";
    return refuse(NXRT_REFUSE_DTYPE, "{} {} {} is {} (the Vulkan kernel takes {})", n.op, role, i, sdk::dtype_name(v->dtype), takes);
  };
  for (size_t i = 0; i < n.in.size(); ++i)
    if (auto v = g.in(n, i); v && !d.meta_inputs.count(i))
      if (auto r = visit(v, "input", i)) return r;
  for (size_t i = 0; i < n.out.size(); ++i)
    if (auto v = g.out(n, i); v && !d.meta_outputs.count(i))
      if (auto r = visit(v, "output", i)) return r;
  if (any16 && !all16) return refuse(NXRT_REFUSE_DTYPE, "{} mixes float16 with other types", n.op);
  if (any16 && !lim.storage16)
    return refuse(NXRT_REFUSE_DTYPE, "{} is float16 but the device lacks storageBuffer16BitAccess", n.op);
  return std::nullopt;
}

// Cast kernels: float32<->float16, float32<->int32, int64<->int32, and same-type copies.
struct CastKernel { Shader shader; uint32_t mode; bool copy; };
std::optional<CastKernel> cast_kernel(nxrt_dtype from, nxrt_dtype to) {
  using enum Shader;
  const auto F32 = NXRT_DTYPE_FLOAT32, F16 = NXRT_DTYPE_FLOAT16, I32 = NXRT_DTYPE_INT32, I64 = NXRT_DTYPE_INT64;
  if (from == to && (from == F32 || from == F16 || from == I32 || from == I64)) return CastKernel{cast, 0, true};
  if (from == F32 && to == F16) return CastKernel{cast_to_f16, 0, false};
  if (from == F16 && to == F32) return CastKernel{cast_from_f16, 0, false};
  if (from == F32 && to == I32) return CastKernel{cast, 0, false};
  if (from == I32 && to == F32) return CastKernel{cast, 1, false};
  if (from == I64 && to == I32) return CastKernel{cast, 2, false};
  if (from == I32 && to == I64) return CastKernel{cast, 3, false};
  return std::nullopt;
}

R check_cast(const IrGraph& g, const IrNode& n, const DeviceLimits& lim) {
  auto x = g.in(n, 0);
  auto y = g.out(n, 0);
  if (!x || !y) return refuse(NXRT_REFUSE_OTHER, "Cast without an input or output");
  const bool like = n.op == "CastLike";
  if (like && !g.in(n, 1)) return refuse(NXRT_REFUSE_OTHER, "CastLike without its target_type input");
  const nxrt_dtype to = like ? g.in(n, 1)->dtype : nxrt_dtype(attr_i(n, "to", 0));
  if (y->dtype != to) return refuse(NXRT_REFUSE_DTYPE, "{} output type differs from its target type", n.op);
  if (!cast_kernel(x->dtype, to))
    return refuse(NXRT_REFUSE_DTYPE, "{} from {} to {} is not implemented (float32<->float16, float32<->int32, "
                  "int64<->int32)", n.op, sdk::dtype_name(x->dtype), sdk::dtype_name(to));
  if ((x->dtype == NXRT_DTYPE_FLOAT16 || to == NXRT_DTYPE_FLOAT16) && !lim.storage16)
    return refuse(NXRT_REFUSE_DTYPE, "{} to or from float16 needs storageBuffer16BitAccess, which the device lacks", n.op);
  return std::nullopt;
}

}  // namespace

std::optional<Refusal> check_node(const IrGraph& g, const IrNode& n, const DeviceLimits& lim) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return refuse(NXRT_REFUSE_OP, "no Vulkan kernel for {}::{}", n.domain, n.op);
  auto it = table().find(n.op);
  if (it == table().end()) return refuse(NXRT_REFUSE_OP, "no Vulkan kernel for {}", n.op);
  const OpDef& d = it->second;
  for (auto& [name, a] : n.attrs)
    if (!d.attrs.count(name)) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} attribute '{}' is not implemented", n.op, name);
  if (n.in.empty() || !g.in(n, 0)) return refuse(NXRT_REFUSE_OTHER, "{} without a first input", n.op);
  if (auto r = d.cast ? check_cast(g, n, lim) : check_dtypes(g, n, d, lim)) return r;
  // Every tensor must fit one storage-buffer binding.
  for (size_t k = 0; k < n.in.size() + n.out.size(); ++k) {
    auto v = k < n.in.size() ? g.in(n, k) : g.out(n, k - n.in.size());
    if (!v || v->rank < 0) continue;
    bool known = true;
    uint64_t bytes = sdk::dtype_size(v->dtype);
    for (auto dd : v->dims) {
      if (dd < 0) known = false;
      else bytes *= uint64_t(dd);
    }
    if (known && bytes > lim.max_storage_range)
      return refuse(NXRT_REFUSE_SHAPE, "{}: a {}-byte tensor exceeds maxStorageBufferRange ({})", n.op, bytes, lim.max_storage_range);
    if (known && bytes / std::max<size_t>(1, sdk::dtype_size(v->dtype)) > 0xffffffffull)
      return refuse(NXRT_REFUSE_SHAPE, "{}: tensor with more than 2^32 elements", n.op);
  }
  if (d.check) return d.check(g, n);
  return std::nullopt;
}

std::vector<std::string> supported_ops() {
  std::vector<std::string> v;
  for (auto& [k, d] : table()) v.push_back(k);
  return v;
}

size_t fuse_epilogues(IrGraph& g) {
  std::vector<size_t> uses(g.values.size(), 0);
  for (auto& n : g.nodes)
    for (int v : n.in)
      if (v >= 0) uses[size_t(v)]++;
  for (int v : g.outputs)
    if (v >= 0) uses[size_t(v)]++;
  std::vector<int> producer(g.values.size(), -1);
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (int v : g.nodes[k].out)
      if (v >= 0) producer[size_t(v)] = int(k);
  std::vector<bool> drop(g.nodes.size(), false);
  size_t fused = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    IrNode& a = g.nodes[k];
    if (a.op != "Relu" && a.op != "Clip" && a.op != "LeakyRelu" && a.op != "Sigmoid" && a.op != "HardSwish") continue;
    if (a.in.empty() || a.in[0] < 0 || a.out.size() != 1 || a.out[0] < 0) continue;
    const int v = a.in[0];
    if (uses[size_t(v)] != 1 || producer[size_t(v)] < 0) continue;
    IrNode& p = g.nodes[size_t(producer[size_t(v)])];
    if ((p.op != "Conv" && p.op != "MatMul" && p.op != "Gemm") || p.act >= 0 || p.out.size() != 1) continue;
    if (g.values[size_t(v)].dtype != g.values[size_t(a.out[0])].dtype) continue;
    if (a.op == "Clip" && a.opset >= 11) {  // bounds must be constants the IR holds
      bool ok = true;
      for (size_t i = 1; i < a.in.size(); ++i)
        if (a.in[i] >= 0 && !const_floats(g.in(a, i))) ok = false;
      if (!ok) continue;
    }
    p.act = int(kUnary.at(a.op));
    unary_params(g, a, p.act_a, p.act_b);
    p.fused = a.op;
    p.out[0] = a.out[0];
    producer[size_t(a.out[0])] = producer[size_t(v)];
    drop[k] = true;
    fused++;
  }
  if (fused) {
    std::vector<IrNode> kept;
    for (size_t k = 0; k < g.nodes.size(); ++k)
      if (!drop[k]) kept.push_back(std::move(g.nodes[k]));
    g.nodes = std::move(kept);
  }
  return fused;
}

bool is_view(const IrNode& n) {
  auto it = table().find(n.op);
  return it != table().end() && it->second.view;
}

void infer_shapes(const IrGraph& g, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  out.assign(n.out.size(), {});
  table().at(n.op).infer(g, n, in, out);
}

void emit_node(Device& dev, const IrGraph& g, const IrNode& n, const std::vector<Loc>& il, const std::vector<const Shape*>& is,
               const std::vector<Loc>& ol, const std::vector<Shape>& os, std::vector<Cmd>& cmds) {
  Emitter e{dev, cmds};
  const std::string& op = n.op;
  const Shape& y = os[0];
  const int64_t ny = numel(y);
  if (ny == 0) return;
  uint32_t gx, gy;
  // check_node claims float16 only with every data tensor float16: pick the
  // 16-bit storage variant from the output's type.
  const bool f16 = g.out(n, 0)->dtype == NXRT_DTYPE_FLOAT16;

  if (auto u = kUnary.find(op); u != kUnary.end()) {
    UnaryPush p{u32(ny), uint32_t(u->second), 0.f, 0.f};
    unary_params(g, n, p.alpha, p.beta);
    Emitter::grid(uint64_t(ny), 256, gx, gy);
    e.dispatch(f16 ? Shader::unary_f16 : Shader::unary, {}, {il[0], ol[0]}, 1, p, gx, gy);
    return;
  }
  if (auto b = kBinary.find(op); b != kBinary.end()) {
    BinaryPush p{};
    p.n = u32(ny);
    p.op = b->second;
    const Shape &A = *is[0], &B = *is[1];
    if (A == y && B == y) {
      p.rank = 0;
    } else {
      size_t r = y.size();
      Shape ap(r, 1), bp(r, 1);
      std::copy(A.begin(), A.end(), ap.begin() + long(r - A.size()));
      std::copy(B.begin(), B.end(), bp.begin() + long(r - B.size()));
      Shape sa = dense_strides(ap), sb = dense_strides(bp);
      for (size_t i = 0; i < r; ++i) {
        if (ap[i] == 1) sa[i] = 0;
        if (bp[i] == 1) sb[i] = 0;
      }
      Shape d2;
      std::vector<int64_t> sa2, sb2;
      for (size_t i = 0; i < r; ++i) {
        if (y[i] == 1) continue;
        if (!d2.empty() && sa2.back() == sa[i] * y[i] && sb2.back() == sb[i] * y[i]) {
          d2.back() *= y[i];
          sa2.back() = sa[i];
          sb2.back() = sb[i];
          continue;
        }
        d2.push_back(y[i]);
        sa2.push_back(sa[i]);
        sb2.push_back(sb[i]);
      }
      if (d2.empty()) {
        d2 = {1};
        sa2 = {0};
        sb2 = {0};
      }
      if (d2.size() > 6) fail(NXRT_UNSUPPORTED, "{}: broadcast of rank {} after collapsing (max 6)", op, d2.size());
      p.rank = u32(int64_t(d2.size()));
      for (size_t i = 0; i < d2.size(); ++i) {
        p.dims[i] = u32(d2[i]);
        p.sa[i] = u32(sa2[i]);
        p.sb[i] = u32(sb2[i]);
      }
    }
    Emitter::grid(uint64_t(ny), 256, gx, gy);
    e.dispatch(f16 ? Shader::binary_f16 : Shader::binary, {}, {il[0], il[1], ol[0]}, 1, p, gx, gy);
    return;
  }
  if (op == "MatMul") {
    Shape A = *is[0], B = *is[1];
    if (A.size() == 1) A.insert(A.begin(), 1);
    if (B.size() == 1) B.push_back(1);
    int64_t M = A[A.size() - 2], K = A.back(), N = B.back();
    Shape ba(A.begin(), A.end() - 2), bb(B.begin(), B.end() - 2);
    Shape ob = broadcast(ba, bb);
    size_t r = ob.size();
    Shape ap(r, 1), bp(r, 1);
    std::copy(ba.begin(), ba.end(), ap.begin() + long(r - ba.size()));
    std::copy(bb.begin(), bb.end(), bp.begin() + long(r - bb.size()));
    Shape sa = dense_strides(ap), sb = dense_strides(bp);
    for (size_t i = 0; i < r; ++i) {
      sa[i] = ap[i] == 1 ? 0 : sa[i] * M * K;
      sb[i] = bp[i] == 1 ? 0 : sb[i] * K * N;
    }
    Shape d2;
    std::vector<int64_t> sa2, sb2;
    for (size_t i = 0; i < r; ++i) {
      if (ob[i] == 1) continue;
      if (!d2.empty() && sa2.back() == sa[i] * ob[i] && sb2.back() == sb[i] * ob[i]) {
        d2.back() *= ob[i];
        sa2.back() = sa[i];
        sb2.back() = sb[i];
        continue;
      }
      d2.push_back(ob[i]);
      sa2.push_back(sa[i]);
      sb2.push_back(sb[i]);
    }
    if (d2.size() > 2) fail(NXRT_UNSUPPORTED, "MatMul batch broadcast needs {} batch dims (max 2)", d2.size());
    while (d2.size() < 2) {
      d2.insert(d2.begin(), 1);
      sa2.insert(sa2.begin(), 0);
      sb2.insert(sb2.begin(), 0);
    }
    emit_matmul(e, il[0], il[1], Loc{}, ol[0], M, N, K, K, 1, N, 1, d2[0], d2[1], sa2[0], sa2[1], sb2[0], sb2[1], 0, 0, 1.f, 0.f, f16, n);
    return;
  }
  if (op == "Gemm") {
    const Shape& A = *is[0];
    bool ta = attr_i(n, "transA", 0), tb = attr_i(n, "transB", 0);
    int64_t M = y[0], N = y[1], K = ta ? A[0] : A[1];
    int64_t scm = 0, scn = 0;
    Loc bias;
    if (il.size() > 2 && il[2].a) {
      bias = il[2];
      Shape C = *is[2];
      while (C.size() < 2) C.insert(C.begin(), 1);
      scm = C[0] == 1 ? 0 : C[1];
      scn = C[1] == 1 ? 0 : 1;
    }
    emit_matmul(e, il[0], il[1], bias, ol[0], M, N, K, ta ? 1 : K, ta ? M : 1, tb ? 1 : N, tb ? K : 1, 1, 1, 0, 0, 0, 0, scm,
                scn, attr_f(n, "alpha", 1.f), attr_f(n, "beta", 1.f), f16, n);
    return;
  }
  if (op == "Conv") {
    const Shape &X = *is[0], &Wt = *is[1];
    int64_t grp = attr_i(n, "group", 1);
    Geo ge = geometry(n, X, X.size() == 3 ? 1 : Wt[2], Wt.back(), false);
    int64_t Cin = X[1], Cout = Wt[0], cin_g = Cin / grp, cout_g = Cout / grp;
    Loc bias = il.size() > 2 ? il[2] : Loc{};
    int64_t K = cin_g * ge.KH * ge.KW;
    if (cout_g >= 16 && K >= 16) {
      ConvPush p{u32(cout_g), u32(ge.OH * ge.OW), u32(K), u32(Cin), u32(ge.H), u32(ge.W), u32(Cout), u32(ge.OW),
                 u32(ge.KH), u32(ge.KW), u32(ge.sh), u32(ge.sw), int32_t(ge.ph0), int32_t(ge.pw0), u32(ge.dh), u32(ge.dw),
                 u32(grp), bias.a ? 1u : 0u, n.act_a, n.act_b};
      auto spec = tile_spec(cout_g, ge.OH * ge.OW);
      spec.push_back(act_spec(n));
      uint32_t tx = u32((ge.OH * ge.OW + spec[2] - 1) / spec[2]), ty = u32((cout_g + spec[1] - 1) / spec[1]);
      e.dispatch(f16 ? Shader::conv_gemm_f16 : Shader::conv_gemm, spec, {il[1], il[0], bias.a ? bias : il[1], ol[0]}, 1, p, tx,
                 ty, u32(X[0] * grp));
    } else {
      ConvDirectPush p{u32(ny), u32(Cin), u32(ge.H), u32(ge.W), u32(Cout), u32(ge.OH), u32(ge.OW), u32(ge.KH), u32(ge.KW),
                       u32(ge.sh), u32(ge.sw), int32_t(ge.ph0), int32_t(ge.pw0), u32(ge.dh), u32(ge.dw), u32(cin_g),
                       u32(cout_g), bias.a ? 1u : 0u, n.act_a, n.act_b};
      Emitter::grid(uint64_t(ny), 256, gx, gy);
      std::vector<uint32_t> spec;
      if (n.act >= 0) spec.push_back(act_spec(n));
      e.dispatch(f16 ? Shader::conv_direct_f16 : Shader::conv_direct, spec, {il[0], il[1], bias.a ? bias : il[1], ol[0]}, 1, p,
                 gx, gy);
    }
    return;
  }
  if (op == "MaxPool" || op == "AveragePool") {
    auto k = attr_ints(n, "kernel_shape");
    const Shape& X = *is[0];
    Geo ge = geometry(n, X, k.size() == 1 ? 1 : k[0], k.back(), attr_i(n, "ceil_mode", 0) != 0);
    PoolPush p{u32(ny), u32(ge.H), u32(ge.W), u32(ge.OH), u32(ge.OW), u32(ge.KH), u32(ge.KW), u32(ge.sh), u32(ge.sw),
               int32_t(ge.ph0), int32_t(ge.pw0), int32_t(ge.ph1), int32_t(ge.pw1), u32(ge.dh), u32(ge.dw),
               op == "MaxPool" ? 0u : 1u, u32(attr_i(n, "count_include_pad", 0))};
    Emitter::grid(uint64_t(ny), 256, gx, gy);
    e.dispatch(f16 ? Shader::pool_f16 : Shader::pool, {}, {il[0], ol[0]}, 1, p, gx, gy);
    return;
  }
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    const Shape& X = *is[0];
    int64_t sp = numel(X) / std::max<int64_t>(1, X[0] * X[1]);
    ReducePush p{u32(ny), u32(sp), 1, op == "GlobalMaxPool" ? 2u : 1u};
    Emitter::grid(uint64_t(ny), 256, gx, gy);
    e.dispatch(f16 ? Shader::reduce_f16 : Shader::reduce, {}, {il[0], ol[0]}, 1, p, gx, gy);
    return;
  }
  if (auto r = kReduce.find(op); r != kReduce.end()) {
    RedGeo rg = reduce_geo(g, n, *is[0]);
    if (rg.identity) {
      e.copy(il[0], ol[0]);
      return;
    }
    ReducePush p{u32(rg.outer * rg.inner), u32(rg.len), u32(rg.inner), r->second};
    Emitter::grid(uint64_t(p.n), 256, gx, gy);
    e.dispatch(f16 ? Shader::reduce_f16 : Shader::reduce, {}, {il[0], ol[0]}, 1, p, gx, gy);
    return;
  }
  if (op == "BatchNormalization") {
    const Shape& X = *is[0];
    int64_t C = X[1], sp = ny / (X[0] * C);
    for (size_t i = 1; i < 5; ++i)
      if (numel(*is[i]) != C) fail(NXRT_INVALID_ARGUMENT, "BatchNormalization input {} has {} elements, expected {}", i, numel(*is[i]), C);
    BnPush p{u32(ny), u32(C), u32(sp), attr_f(n, "epsilon", 1e-5f)};
    Emitter::grid(uint64_t(ny), 256, gx, gy);
    e.dispatch(f16 ? Shader::batchnorm_f16 : Shader::batchnorm, {}, {il[0], il[1], il[2], il[3], il[4], ol[0]}, 1, p, gx, gy);
    return;
  }
  if (op == "Softmax" || op == "LogSoftmax") {
    const Shape& X = *is[0];
    int64_t r = int64_t(X.size());
    int64_t ax = norm_axis(attr_i(n, "axis", n.opset >= 13 ? -1 : 1), r);
    int64_t outer = 1, len = 1, inner = 1;
    for (int64_t i = 0; i < r; ++i) {
      if (i < ax) outer *= X[size_t(i)];
      else if (i == ax || n.opset < 13) len *= X[size_t(i)];
      else inner *= X[size_t(i)];
    }
    SoftmaxPush p{u32(outer * inner), u32(len), u32(inner), op == "LogSoftmax" ? 1u : 0u};
    Emitter::grid(uint64_t(outer * inner), 1, gx, gy);
    e.dispatch(f16 ? Shader::softmax_f16 : Shader::softmax, {}, {il[0], ol[0]}, 1, p, gx, gy);
    return;
  }
  if (op == "LayerNormalization") {
    const Shape& X = *is[0];
    int64_t r = int64_t(X.size());
    int64_t ax = norm_axis(attr_i(n, "axis", -1), r);
    int64_t rows = 1, len = 1;
    for (int64_t i = 0; i < r; ++i) (i < ax ? rows : len) *= X[size_t(i)];
    if (numel(*is[1]) != len) fail(NXRT_UNSUPPORTED, "LayerNormalization scale of {} elements for rows of {}", numel(*is[1]), len);
    bool has_b = il.size() > 2 && il[2].a;
    if (has_b && numel(*is[2]) != len) fail(NXRT_UNSUPPORTED, "LayerNormalization bias of {} elements for rows of {}", numel(*is[2]), len);
    LnPush p{u32(rows), u32(len), attr_f(n, "epsilon", 1e-5f), has_b ? 1u : 0u};
    Emitter::grid(uint64_t(rows), 1, gx, gy);
    e.dispatch(f16 ? Shader::layernorm_f16 : Shader::layernorm, {}, {il[0], il[1], has_b ? il[2] : il[1], ol[0]}, 1, p, gx, gy);
    return;
  }
  uint32_t ew = words(g.out(n, 0)->dtype);
  if (op == "Transpose") {
    const Shape& X = *is[0];
    auto perm = attr_ints(n, "perm");
    if (perm.empty()) for (int64_t i = int64_t(X.size()) - 1; i >= 0; --i) perm.push_back(i);
    Shape xs = dense_strides(X), ist;
    for (auto p : perm) ist.push_back(xs[size_t(p)]);
    strided_copy(e, il[0], ol[0], y, ist, dense_strides(y), 0, 0, ew, f16);
    return;
  }
  if (op == "Concat") {
    int64_t ax = norm_axis(attr_i(n, "axis", 0), int64_t(y.size()));
    Shape ys = dense_strides(y);
    int64_t off = 0;
    for (size_t i = 0; i < il.size(); ++i) {
      const Shape& X = *is[i];
      strided_copy(e, il[i], ol[0], X, dense_strides(X), ys, 0, off * ys[size_t(ax)], ew, f16);
      off += X[size_t(ax)];
    }
    return;
  }
  if (op == "Slice") {
    const Shape& X = *is[0];
    SliceGeo s = slice_geo(g, n, X);
    Shape xs = dense_strides(X), ist(X.size());
    int64_t base = 0;
    for (size_t i = 0; i < X.size(); ++i) {
      ist[i] = xs[i] * s.step[i];
      base += s.start[i] * xs[i];
    }
    strided_copy(e, il[0], ol[0], y, ist, dense_strides(y), base, 0, ew, f16);
    return;
  }
  if (op == "Expand") {
    const Shape& X = *is[0];
    Shape xp(y.size(), 1);
    std::copy(X.begin(), X.end(), xp.begin() + long(y.size() - X.size()));
    Shape xs = dense_strides(xp);
    for (size_t i = 0; i < y.size(); ++i)
      if (xp[i] == 1) xs[i] = 0;
    strided_copy(e, il[0], ol[0], y, xs, dense_strides(y), 0, 0, ew, f16);
    return;
  }
  if (op == "Gather") {
    const Shape &X = *is[0], &I = *is[1];
    int64_t ax = norm_axis(attr_i(n, "axis", 0), int64_t(X.size()));
    int64_t inner = 1;
    for (size_t i = size_t(ax) + 1; i < X.size(); ++i) inner *= X[i];
    GatherPush p{u32(ny), u32(X[size_t(ax)]), u32(inner), u32(numel(I)), ew, g.in(n, 1)->dtype == NXRT_DTYPE_INT64 ? 1u : 0u};
    if (X[size_t(ax)] == 0) fail(NXRT_INVALID_ARGUMENT, "Gather from an empty axis");
    Emitter::grid(uint64_t(ny), 256, gx, gy);
    e.dispatch(f16 ? Shader::gather_f16 : Shader::gather, {}, {il[0], il[1], ol[0]}, 1, p, gx, gy);
    return;
  }
  if (op == "Cast" || op == "CastLike") {
    auto k = cast_kernel(g.in(n, 0)->dtype, g.out(n, 0)->dtype);
    if (!k) fail(NXRT_INTERNAL, "Cast: no kernel for this pair of types");
    if (k->copy) {
      e.copy(il[0], ol[0]);
      return;
    }
    struct { uint32_t n; } p{u32(ny)};
    Emitter::grid(uint64_t(ny), 256, gx, gy);
    e.dispatch(k->shader, k->shader == Shader::cast ? std::vector<uint32_t>{k->mode} : std::vector<uint32_t>{}, {il[0], ol[0]}, 1, p,
               gx, gy);
    return;
  }
  if (op == "Shape") {
    const Shape& X = *is[0];
    int64_t r = int64_t(X.size());
    int64_t s = std::clamp<int64_t>(norm_axis(attr_i(n, "start", 0), r), 0, r);
    Cmd c;
    c.kind = Cmd::update;
    c.dst = ol[0];
    for (int64_t i = 0; i < y[0]; ++i) {
      int64_t v = X[size_t(s + i)];
      c.data.push_back(uint32_t(uint64_t(v) & 0xffffffffu));
      c.data.push_back(uint32_t(uint64_t(v) >> 32));
    }
    cmds.push_back(std::move(c));
    return;
  }
  if (is_view(n)) {  // a view whose output must be materialised (graph output)
    e.copy(il[0], ol[0]);
    return;
  }
  fail(NXRT_INTERNAL, "no emitter for {}", op);
}

}  // namespace nxrt::vk
