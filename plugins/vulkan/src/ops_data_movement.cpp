// Data movement, rank <= 6: Transpose, Concat, Slice and Expand as strided
// copies (copy.comp), Gather (gather.comp). Elements move as raw units, so
// float32/int32/int64 share the kernels and float16 uses the 16-bit variants.
#include "op_kernel.hpp"
#include "shape_math.hpp"

#include <fmt/format.h>

namespace nxrt::vk {

using sdk::fail;
using sdk::refuse;

namespace {

// Copy units per element: 32-bit words (2 for int64); a float16 element is one 16-bit unit of copy_f16.
uint32_t words(nxrt_dtype t) { return t == NXRT_DTYPE_INT64 ? 2 : 1; }
uint32_t words(const EmitArgs& a) { return words(a.g.out(a.n, 0)->dtype); }

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

// ------------------------------------------------------------ Transpose

R check_transpose(const IrGraph& g, const IrNode& n) {
  auto x = g.in(n, 0);
  if (x->rank < 0 || x->rank > 6) return refuse(NXRT_REFUSE_SHAPE, "Transpose needs a known rank <= 6");
  return std::nullopt;
}

// The perm attribute, reversed dims by default.
std::vector<int64_t> transpose_perm(const IrNode& n, const Shape& x) {
  auto perm = attr_ints(n, "perm");
  if (perm.empty()) for (int64_t i = int64_t(x.size()) - 1; i >= 0; --i) perm.push_back(i);
  return perm;
}

void infer_transpose(const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  const Shape& x = *in[0];
  out[0].clear();
  for (auto p : transpose_perm(n, x)) out[0].push_back(x[size_t(p)]);
}

void emit_transpose(Emitter& e, const EmitArgs& a) {
  const Shape& X = *a.is[0];
  const Shape& y = a.os[0];
  Shape xs = dense_strides(X), ist;
  for (auto p : transpose_perm(a.n, X)) ist.push_back(xs[size_t(p)]);
  strided_copy(e, a.il[0], a.ol[0], y, ist, dense_strides(y), 0, 0, words(a), a.f16);
}

// ------------------------------------------------------------ Concat

R check_concat(const IrGraph& g, const IrNode& n) {
  auto x = g.in(n, 0);
  if (x->rank < 0 || x->rank > 6) return refuse(NXRT_REFUSE_SHAPE, "Concat needs a known rank <= 6");
  for (size_t i = 0; i < n.in.size(); ++i)
    if (g.in(n, i)->dtype != x->dtype) return refuse(NXRT_REFUSE_DTYPE, "Concat inputs of mixed types");
  return std::nullopt;
}

void infer_concat(const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  Shape o = *in[0];
  int64_t ax = norm_axis(attr_i(n, "axis", 0), int64_t(o.size()));
  o[size_t(ax)] = 0;
  for (auto s : in) o[size_t(ax)] += (*s)[size_t(ax)];
  out[0] = o;
}

// One strided copy per input, at its offset along the axis.
void emit_concat(Emitter& e, const EmitArgs& a) {
  const Shape& y = a.os[0];
  int64_t ax = norm_axis(attr_i(a.n, "axis", 0), int64_t(y.size()));
  Shape ys = dense_strides(y);
  int64_t off = 0;
  for (size_t i = 0; i < a.il.size(); ++i) {
    const Shape& X = *a.is[i];
    strided_copy(e, a.il[i], a.ol[0], X, dense_strides(X), ys, 0, off * ys[size_t(ax)], words(a), a.f16);
    off += X[size_t(ax)];
  }
}

// ------------------------------------------------------------ Gather

struct GatherPush { uint32_t n, axis, inner, ni, ew, idx64; };

R check_gather(const IrGraph& g, const IrNode& n) {
  auto i = g.in(n, 1);
  if (i->dtype != NXRT_DTYPE_INT64 && i->dtype != NXRT_DTYPE_INT32) return refuse(NXRT_REFUSE_DTYPE, "Gather indices of type {}", int(i->dtype));
  if (g.in(n, 0)->rank < 1) return refuse(NXRT_REFUSE_SHAPE, "Gather needs a known data rank >= 1");
  return std::nullopt;
}

void infer_gather(const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  const Shape &x = *in[0], &i = *in[1];
  int64_t ax = norm_axis(attr_i(n, "axis", 0), int64_t(x.size()));
  Shape o(x.begin(), x.begin() + ax);
  o.insert(o.end(), i.begin(), i.end());
  o.insert(o.end(), x.begin() + ax + 1, x.end());
  out[0] = o;
}

void emit_gather(Emitter& e, const EmitArgs& a) {
  const Shape &X = *a.is[0], &I = *a.is[1];
  int64_t ax = norm_axis(attr_i(a.n, "axis", 0), int64_t(X.size()));
  int64_t inner = 1;
  for (size_t i = size_t(ax) + 1; i < X.size(); ++i) inner *= X[i];
  GatherPush p{u32(a.ny), u32(X[size_t(ax)]), u32(inner), u32(numel(I)), words(a),
               a.g.in(a.n, 1)->dtype == NXRT_DTYPE_INT64 ? 1u : 0u};
  if (X[size_t(ax)] == 0) fail(NXRT_INVALID_ARGUMENT, "Gather from an empty axis");
  uint32_t gx, gy;
  Emitter::grid(uint64_t(a.ny), 256, gx, gy);
  e.dispatch(a.f16 ? Shader::gather_f16 : Shader::gather, {}, {a.il[0], a.il[1], a.ol[0]}, 1, p, gx, gy);
}

// ------------------------------------------------------------ Slice

R check_slice(const IrGraph& g, const IrNode& n) {
  if (g.in(n, 0)->rank < 0 || g.in(n, 0)->rank > 6) return refuse(NXRT_REFUSE_SHAPE, "Slice needs a known rank <= 6");
  if (n.opset >= 10)
    for (size_t i = 1; i < 5; ++i)
      if (n.in.size() > i && n.in[i] >= 0 && !const_ints(g.in(n, i))) return refuse(NXRT_REFUSE_ATTRIBUTE, "Slice input {} must be a constant", i);
  return std::nullopt;
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

void infer_slice(const IrGraph& g, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  out[0] = slice_geo(g, n, *in[0]).out;
}

void emit_slice(Emitter& e, const EmitArgs& a) {
  const Shape& X = *a.is[0];
  SliceGeo s = slice_geo(a.g, a.n, X);
  Shape xs = dense_strides(X), ist(X.size());
  int64_t base = 0;
  for (size_t i = 0; i < X.size(); ++i) {
    ist[i] = xs[i] * s.step[i];
    base += s.start[i] * xs[i];
  }
  strided_copy(e, a.il[0], a.ol[0], a.os[0], ist, dense_strides(a.os[0]), base, 0, words(a), a.f16);
}

// ------------------------------------------------------------ Expand

R check_expand(const IrGraph& g, const IrNode& n) {
  if (!const_ints(g.in(n, 1))) return refuse(NXRT_REFUSE_ATTRIBUTE, "Expand shape must be a constant");
  return std::nullopt;
}

void infer_expand(const IrGraph& g, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  out[0] = broadcast(*in[0], *const_ints(g.in(n, 1)));
  if (out[0].size() > 6) fail(NXRT_UNSUPPORTED, "Expand to rank > 6");
}

// Broadcast dims read with stride 0.
void emit_expand(Emitter& e, const EmitArgs& a) {
  const Shape& X = *a.is[0];
  const Shape& y = a.os[0];
  Shape xp(y.size(), 1);
  std::copy(X.begin(), X.end(), xp.begin() + long(y.size() - X.size()));
  Shape xs = dense_strides(xp);
  for (size_t i = 0; i < y.size(); ++i)
    if (xp[i] == 1) xs[i] = 0;
  strided_copy(e, a.il[0], a.ol[0], y, xs, dense_strides(y), 0, 0, words(a), a.f16);
}

}  // namespace

std::vector<OpKernel> data_movement_ops() {
  return {
      {.names = {"Transpose"},
       .types = kMoveTypes,
       .attrs = {"perm"},
       .check = check_transpose,
       .infer = infer_transpose,
       .emit = emit_transpose},
      {.names = {"Concat"}, .types = kMoveTypes, .attrs = {"axis"}, .check = check_concat, .infer = infer_concat, .emit = emit_concat},
      {.names = {"Gather"},
       .types = kMoveTypes,
       .meta_inputs = {1},  // indices
       .attrs = {"axis"},
       .check = check_gather,
       .infer = infer_gather,
       .emit = emit_gather},
      // starts/ends/axes: attributes before opset 10; constant inputs 1-4 (with steps) after.
      {.names = {"Slice"},
       .types = kMoveTypes,
       .meta_inputs = {1, 2, 3, 4},
       .attrs = {"starts", "ends", "axes"},
       .check = check_slice,
       .infer = infer_slice,
       .emit = emit_slice},
      {.names = {"Expand"},
       .types = kMoveTypes,
       .meta_inputs = {1},  // shape, a constant
       .check = check_expand,
       .infer = infer_expand,
       .emit = emit_expand},
  };
}

}  // namespace nxrt::vk
