// Ops that run no kernel. Views (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, inference Dropout) alias their input: the program gives the
// output the input's buffer, and a view whose output is a group output is
// materialised by a buffer copy. Shape writes the input's dims with a buffer
// update. None needs a device feature, so float16 is accepted everywhere.
#include "op_kernel.hpp"
#include "shape_math.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace nxrt::vk {

using sdk::fail;
using sdk::refuse;

namespace {

void emit_view_copy(Emitter& e, const EmitArgs& a) { e.copy(a.il[0], a.ol[0]); }

// ------------------------------------------------------------ Reshape

R check_reshape(const IrGraph& g, const IrNode& n) {
  if (!const_ints(g.in(n, 1))) return refuse(NXRT_REFUSE_ATTRIBUTE, "Reshape shape must be a constant");
  return std::nullopt;
}

void infer_reshape(const IrGraph& g, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  const Shape& x = *in[0];
  auto tgt = *const_ints(g.in(n, 1));
  bool allowzero = attr_i(n, "allowzero", 0) != 0;
  Shape o(tgt.size());
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
    o[i] = d;
  }
  if (infer >= 0) o[size_t(infer)] = known ? numel(x) / known : 0;
  if (numel(o) != numel(x)) fail(NXRT_INVALID_ARGUMENT, "Reshape from {} to {} elements", numel(x), numel(o));
  out[0] = o;
}

// ------------------------------------------------------------ Flatten

void infer_flatten(const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  const Shape& x = *in[0];
  int64_t ax = norm_axis(attr_i(n, "axis", 1), int64_t(x.size()));
  int64_t a = 1, b = 1;
  for (size_t i = 0; i < x.size(); ++i) (int64_t(i) < ax ? a : b) *= x[i];
  out[0] = {a, b};
}

// ------------------------------------------------------------ Squeeze, Unsqueeze

// Axes: an attribute before opset 13, constant input 1 from 13.
std::vector<int64_t> squeeze_axes(const IrGraph& g, const IrNode& n) { return *axes_of(g, n, n.opset >= 13); }

R check_squeeze(const IrGraph& g, const IrNode& n) {
  if (!axes_of(g, n, n.opset >= 13)) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} axes must be a constant", n.op);
  if (n.op == "Squeeze" && axes_of(g, n, n.opset >= 13)->empty() && g.in(n, 0)->rank < 0)
    return refuse(NXRT_REFUSE_SHAPE, "Squeeze without axes needs a known rank");
  return std::nullopt;
}

// No axes: every dim of size 1.
void infer_squeeze(const IrGraph& g, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  const Shape& x = *in[0];
  auto axes = squeeze_axes(g, n);
  Shape o;
  for (auto& a : axes) a = norm_axis(a, int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    bool sq = axes.empty() ? x[i] == 1 : std::count(axes.begin(), axes.end(), int64_t(i)) > 0;
    if (sq && x[i] != 1) fail(NXRT_INVALID_ARGUMENT, "Squeeze of a dimension of size {}", x[i]);
    if (!sq) o.push_back(x[i]);
  }
  out[0] = o;
}

void infer_unsqueeze(const IrGraph& g, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  const Shape& x = *in[0];
  auto axes = squeeze_axes(g, n);
  Shape o;
  int64_t r = int64_t(x.size() + axes.size());
  for (auto& a : axes) a = norm_axis(a, r);
  size_t j = 0;
  for (int64_t i = 0; i < r; ++i) {
    if (std::count(axes.begin(), axes.end(), i)) o.push_back(1);
    else o.push_back(x[j++]);
  }
  out[0] = o;
}

// ------------------------------------------------------------ Dropout (inference)

R check_dropout(const IrGraph& g, const IrNode& n) {
  if (n.out.size() > 1 && n.out[1] >= 0) return refuse(NXRT_REFUSE_OTHER, "Dropout mask output is not implemented");
  if (auto tm = g.in(n, 2)) {
    if (!tm->has_data || tm->data.bytes.empty() || tm->data.bytes[0] != 0)
      return refuse(NXRT_REFUSE_ATTRIBUTE, "Dropout training_mode must be a constant false");
  }
  return std::nullopt;
}

// ------------------------------------------------------------ Shape

R check_shape(const IrGraph& g, const IrNode& n) {
  if (g.in(n, 0)->rank > 6 || g.in(n, 0)->rank < 0) return refuse(NXRT_REFUSE_SHAPE, "Shape needs a known rank <= 6 here");
  return std::nullopt;
}

void infer_shape(const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  int64_t r = int64_t(in[0]->size());
  int64_t s = std::clamp<int64_t>(norm_axis(attr_i(n, "start", 0), r), 0, r);
  int64_t e = std::clamp<int64_t>(norm_axis(attr_i(n, "end", r), r), 0, r);
  out[0] = {std::max<int64_t>(0, e - s)};
}

// The dims [start, end) as int64, written by a buffer update.
void emit_shape(Emitter& e, const EmitArgs& a) {
  const Shape& X = *a.is[0];
  int64_t r = int64_t(X.size());
  int64_t s = std::clamp<int64_t>(norm_axis(attr_i(a.n, "start", 0), r), 0, r);
  Cmd c;
  c.kind = Cmd::update;
  c.dst = a.ol[0];
  for (int64_t i = 0; i < a.os[0][0]; ++i) {
    int64_t v = X[size_t(s + i)];
    c.data.push_back(uint32_t(uint64_t(v) & 0xffffffffu));
    c.data.push_back(uint32_t(uint64_t(v) >> 32));
  }
  e.cmds.push_back(std::move(c));
}

}  // namespace

std::vector<OpKernel> view_ops() {
  return {
      {.names = {"Reshape"},
       .types = kViewTypes,
       .meta_inputs = {1},  // shape, a constant
       .attrs = {"allowzero"},
       .check = check_reshape,
       .infer = infer_reshape,
       .emit = emit_view_copy,
       .view = true},
      {.names = {"Flatten"}, .types = kViewTypes, .attrs = {"axis"}, .infer = infer_flatten, .emit = emit_view_copy, .view = true},
      {.names = {"Squeeze"},
       .types = kViewTypes,
       .meta_inputs = {1},
       .attrs = {"axes"},
       .check = check_squeeze,
       .infer = infer_squeeze,
       .emit = emit_view_copy,
       .view = true},
      {.names = {"Unsqueeze"},
       .types = kViewTypes,
       .meta_inputs = {1},
       .attrs = {"axes"},
       .check = check_squeeze,
       .infer = infer_unsqueeze,
       .emit = emit_view_copy,
       .view = true},
      {.names = {"Identity"}, .types = kViewTypes, .infer = same_shape, .emit = emit_view_copy, .view = true},
      {.names = {"Dropout"},
       .opset = {7, "{} before opset 7"},
       .types = kViewTypes,
       .meta_inputs = {1, 2},  // ratio, training_mode
       .attrs = {"seed", "ratio", "is_test"},
       .check = check_dropout,
       .infer = same_shape,
       .emit = emit_view_copy,
       .view = true},
      // Reads only the input's shape: float16 needs no device feature.
      {.names = {"Shape"},
       .types = kViewTypes,
       .meta_outputs = {0},
       .attrs = {"start", "end"},
       .check = check_shape,
       .infer = infer_shape,
       .emit = emit_shape},
  };
}

}  // namespace nxrt::vk
