#include "ops.hpp"

#include <nxrt_sdk/dtype.hpp>
#include <nxrt_sdk/status.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>

namespace nxrt::cuda {

using sdk::fail;
using sdk::refuse;
using sdk::Refusal;
using math::Unary;

// ---------------------------------------------------------------- IrGraph helpers

std::optional<std::vector<int64_t>> IrGraph::const_ints(int id) const {
  if (id < 0) return std::nullopt;
  const IrValue& v = value(id);
  if (!v.has_data) return std::nullopt;
  std::vector<int64_t> out;
  if (v.dtype == NXRT_DTYPE_INT64) {
    out.resize(v.data.size() / 8);
    std::memcpy(out.data(), v.data.data(), out.size() * 8);
  } else if (v.dtype == NXRT_DTYPE_INT32) {
    std::vector<int32_t> t(v.data.size() / 4);
    std::memcpy(t.data(), v.data.data(), t.size() * 4);
    out.assign(t.begin(), t.end());
  } else {
    return std::nullopt;
  }
  return out;
}

namespace {
float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) bits = sign;
    else {  // subnormal: normalise
      int e = -1;
      uint32_t m = man;
      do { ++e; m <<= 1; } while (!(m & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (m & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | man << 13;
  } else {
    bits = sign | (exp + 112) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
}  // namespace

std::optional<float> IrGraph::const_scalar(int id) const {
  if (id < 0) return std::nullopt;
  const IrValue& v = value(id);
  if (!v.has_data) return std::nullopt;
  if (v.dtype == NXRT_DTYPE_FLOAT32 && v.data.size() == 4) {
    float f;
    std::memcpy(&f, v.data.data(), 4);
    return f;
  }
  if (v.dtype == NXRT_DTYPE_FLOAT16 && v.data.size() == 2) {
    uint16_t h;
    std::memcpy(&h, v.data.data(), 2);
    return half_to_float(h);
  }
  return std::nullopt;
}

std::vector<size_t> IrGraph::consumers(int id) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!nodes[i].fused_away && std::find(nodes[i].in.begin(), nodes[i].in.end(), id) != nodes[i].in.end())
      out.push_back(i);
  return out;
}

// ---------------------------------------------------------------- shape helpers

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  Shape out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t da = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    int64_t db = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (da != db && da != 1 && db != 1) fail(NXRT_INVALID_ARGUMENT, "{}: shapes do not broadcast (axis {}: {} vs {})", op, i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t normalize_axis(int64_t axis, int64_t rank, const char* op) {
  if (axis < -rank || axis >= rank) fail(NXRT_INVALID_ARGUMENT, "{}: axis {} is out of range for rank {}", op, axis, rank);
  return axis < 0 ? axis + rank : axis;
}

namespace {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

bool is_float(nxrt_dtype t) { return t == NXRT_DTYPE_FLOAT32 || t == NXRT_DTYPE_FLOAT16; }
bool movable(nxrt_dtype t) {  // data movement: any fixed-size element
  size_t s = sdk::dtype_size(t);
  return t != NXRT_DTYPE_STRING && (s == 1 || s == 2 || s == 4 || s == 8);
}

// Every present float input in [first, end) and every output is float32 (or every one
// float16): the kernels take one element type per node.
std::optional<Refusal> same_float(const IrGraph& g, const IrNode& n, size_t first = 0, size_t end = SIZE_MAX) {
  nxrt_dtype t = NXRT_DTYPE_UNDEFINED;
  auto one = [&](int id, const char* what, size_t i) -> std::optional<Refusal> {
    if (id < 0) return std::nullopt;
    nxrt_dtype d = g.value(id).dtype;
    if (!is_float(d)) return refuse(NXRT_REFUSE_DTYPE, "{} {} {} is {}", n.op, what, i, sdk::dtype_name(d));
    if (t == NXRT_DTYPE_UNDEFINED) t = d;
    else if (d != t) return refuse(NXRT_REFUSE_DTYPE, "{} mixes {} and {}", n.op, sdk::dtype_name(t), sdk::dtype_name(d));
    return std::nullopt;
  };
  for (size_t i = first; i < n.in.size() && i < end; ++i)
    if (auto r = one(n.in[i], "input", i)) return r;
  for (size_t i = 0; i < n.out.size(); ++i)
    if (auto r = one(n.out[i], "output", i)) return r;
  return std::nullopt;
}

std::optional<Refusal> need_rank(const IrGraph& g, const IrNode& n, size_t input, int64_t lo, int64_t hi) {
  int64_t r = g.value(n.in[input]).rank;
  if (r < 0) return refuse(NXRT_REFUSE_SHAPE, "{} input {} has an unknown rank", n.op, input);
  if (r < lo || r > hi) return refuse(NXRT_REFUSE_SHAPE, "{} input {} has rank {} (supported: {}..{})", n.op, input, r, lo, hi);
  return std::nullopt;
}

std::optional<Refusal> need_const(const IrGraph& g, const IrNode& n, size_t input, const char* what) {
  if (!n.has_input(input)) return std::nullopt;
  if (!g.value(n.in[input]).has_data) return refuse(NXRT_REFUSE_OTHER, "{}: {} (input {}) must be a constant", n.op, what, input);
  return std::nullopt;
}

std::optional<Refusal> only_outputs(const IrNode& n, size_t count) {
  for (size_t i = count; i < n.out.size(); ++i)
    if (n.out[i] >= 0) return refuse(NXRT_REFUSE_OTHER, "{}: output {} is not computed", n.op, i);
  return std::nullopt;
}

const std::map<std::string, Unary>& unary_ops() {
  static const std::map<std::string, Unary> m = {
      {"Relu", Unary::Relu},         {"Sigmoid", Unary::Sigmoid}, {"Tanh", Unary::Tanh},     {"Exp", Unary::Exp},
      {"Log", Unary::Log},           {"Sqrt", Unary::Sqrt},       {"Neg", Unary::Neg},       {"Abs", Unary::Abs},
      {"Erf", Unary::Erf},           {"Clip", Unary::Clip},       {"LeakyRelu", Unary::LeakyRelu},
      {"HardSwish", Unary::HardSwish}, {"Gelu", Unary::Gelu},     {"Reciprocal", Unary::Reciprocal}};
  return m;
}
const std::set<std::string>& binary_ops() {
  static const std::set<std::string> s = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"};
  return s;
}
const std::set<std::string>& reduce_ops() {
  static const std::set<std::string> s = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                          "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSumExp"};
  return s;
}

// Clip bounds: attributes before opset 11, optional constant inputs from 11.
std::optional<std::pair<float, float>> clip_bounds(const IrGraph& g, const IrNode& n) {
  if (n.opset < 11) return std::pair{n.attr_float("min", -INFINITY), n.attr_float("max", INFINITY)};
  float lo = -INFINITY, hi = INFINITY;
  if (n.has_input(1)) {
    auto v = g.const_scalar(n.in[1]);
    if (!v) return std::nullopt;
    lo = *v;
  }
  if (n.has_input(2)) {
    auto v = g.const_scalar(n.in[2]);
    if (!v) return std::nullopt;
    hi = *v;
  }
  return std::pair{lo, hi};
}

std::optional<Refusal> check_pool_attrs(const IrNode& n) {
  std::string pad = n.attr_string("auto_pad", "NOTSET");
  if (pad != "NOTSET" && pad != "VALID") return refuse(NXRT_REFUSE_ATTRIBUTE, "{}: auto_pad {} is not implemented", n.op, pad);
  if (auto d = n.attr_ints("dilations"))
    for (auto x : *d)
      if (x < 1 || (n.op != "Conv" && x != 1)) return refuse(NXRT_REFUSE_ATTRIBUTE, "{}: dilations other than 1 are not implemented", n.op);
  if (auto s = n.attr_ints("strides"))
    for (auto x : *s)
      if (x < 1) return refuse(NXRT_REFUSE_ATTRIBUTE, "{}: stride {} is invalid", n.op, x);
  if (auto p = n.attr_ints("pads"))
    for (auto x : *p)
      if (x < 0) return refuse(NXRT_REFUSE_ATTRIBUTE, "{}: negative pads are not implemented", n.op);
  return std::nullopt;
}

}  // namespace

std::optional<Epilogue> activation_of(const IrGraph& g, const IrNode& n) {
  Epilogue e;
  if (n.op == "Relu") e.op = Unary::Relu;
  else if (n.op == "Sigmoid") e.op = Unary::Sigmoid;
  else if (n.op == "Tanh") e.op = Unary::Tanh;
  else if (n.op == "HardSwish") e.op = Unary::HardSwish;
  else if (n.op == "LeakyRelu") {
    e.op = Unary::LeakyRelu;
    e.alpha = n.attr_float("alpha", 0.01f);
  } else if (n.op == "Clip") {
    auto b = clip_bounds(g, n);
    if (!b) return std::nullopt;
    e.op = Unary::Clip;
    e.alpha = b->first;
    e.beta = b->second;
  } else {
    return std::nullopt;
  }
  e.node_index = n.index;
  return e;
}

std::optional<Epilogue> unary_of(const IrGraph& g, const IrNode& n) {
  auto it = unary_ops().find(n.op);
  if (it == unary_ops().end()) return std::nullopt;
  if (n.op == "Clip" || n.op == "LeakyRelu") return activation_of(g, n);
  Epilogue e;
  e.op = it->second;
  e.node_index = n.index;
  return e;
}

std::optional<math::Binary> binary_of(const std::string& op) {
  static const std::map<std::string, math::Binary> m = {{"Add", math::Binary::Add}, {"Sub", math::Binary::Sub},
                                                        {"Mul", math::Binary::Mul}, {"Div", math::Binary::Div},
                                                        {"Pow", math::Binary::Pow}, {"Max", math::Binary::Max},
                                                        {"Min", math::Binary::Min}};
  auto it = m.find(op);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

uint64_t supported_dtypes() {
  uint64_t m = 0;
  for (nxrt_dtype t : {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT16, NXRT_DTYPE_INT32, NXRT_DTYPE_INT64, NXRT_DTYPE_INT8,
                       NXRT_DTYPE_UINT8, NXRT_DTYPE_BOOL})
    m |= uint64_t(1) << t;
  return m;
}

std::vector<int64_t> reduce_axes(const IrGraph& g, const IrNode& n, int64_t rank, bool* noop) {
  *noop = false;
  std::optional<std::vector<int64_t>> axes;
  const bool axes_input = n.op == "ReduceSum" ? n.opset >= 13 : n.opset >= 18;
  if (axes_input) {
    if (n.has_input(1)) axes = g.const_ints(n.in[1]);
  } else {
    axes = n.attr_ints("axes");
  }
  std::vector<int64_t> out;
  if (!axes || axes->empty()) {
    if (axes_input && n.attr_int("noop_with_empty_axes", 0)) {
      *noop = true;
      return out;
    }
    for (int64_t i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (auto a : *axes) out.push_back(normalize_axis(a, rank, n.op.c_str()));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) fail(NXRT_INVALID_ARGUMENT, "{}: repeated axis", n.op);
  return out;
}

SliceAxes slice_params(const IrGraph& g, const IrNode& n, const Shape& dims) {
  const int64_t rank = int64_t(dims.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.opset < 10) {
    starts = n.attr_ints("starts").value_or(std::vector<int64_t>{});
    ends = n.attr_ints("ends").value_or(std::vector<int64_t>{});
    axes = n.attr_ints("axes").value_or(std::vector<int64_t>{});
  } else {
    starts = g.const_ints(n.in.at(1)).value_or(std::vector<int64_t>{});
    ends = g.const_ints(n.in.at(2)).value_or(std::vector<int64_t>{});
    if (n.has_input(3)) axes = *g.const_ints(n.in[3]);
    if (n.has_input(4)) steps = *g.const_ints(n.in[4]);
  }
  if (starts.size() != ends.size()) fail(NXRT_INVALID_ARGUMENT, "Slice: {} starts but {} ends", starts.size(), ends.size());
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    fail(NXRT_INVALID_ARGUMENT, "Slice: starts, ends, axes and steps differ in length");
  SliceAxes s;
  s.start.assign(size_t(rank), 0);
  s.step.assign(size_t(rank), 1);
  s.size.assign(dims.begin(), dims.end());
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t a = normalize_axis(axes[i], rank, "Slice");
    if (seen[size_t(a)]) fail(NXRT_INVALID_ARGUMENT, "Slice: axis {} repeated", a);
    seen[size_t(a)] = true;
    const int64_t d = dims[size_t(a)], step = steps[i];
    if (step == 0) fail(NXRT_INVALID_ARGUMENT, "Slice: step 0 on axis {}", a);
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += d;
    if (e < 0) e += d;
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      s.size[size_t(a)] = e > b ? (e - b + step - 1) / step : 0;
    } else {
      b = std::clamp<int64_t>(b, -1, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      s.size[size_t(a)] = b > e ? (b - e + (-step) - 1) / (-step) : 0;
    }
    s.start[size_t(a)] = b;
    s.step[size_t(a)] = step;
  }
  return s;
}

// ---------------------------------------------------------------- checks

std::optional<Refusal> check_node(const IrGraph& g, const IrNode& n) {
  const std::string& op = n.op;
  if (n.out.empty() || n.out[0] < 0) return refuse(NXRT_REFUSE_OTHER, "{} has no first output", op);
  for (int id : n.in)
    if (id >= 0 && g.value(id).rank > math::kMaxRank)
      return refuse(NXRT_REFUSE_SHAPE, "{}: rank {} is above {}", op, g.value(id).rank, math::kMaxRank);

  if (unary_ops().count(op)) {
    if (n.in.empty() || n.in[0] < 0) return refuse(NXRT_REFUSE_OTHER, "{} has no input", op);
    if (auto r = same_float(g, n, 0, 1)) return r;
    if (op == "Clip" && !clip_bounds(g, n)) return refuse(NXRT_REFUSE_OTHER, "Clip: min/max must be constant scalars");
    if (op == "Gelu" && n.attr_string("approximate", "none") != "none")
      return refuse(NXRT_REFUSE_ATTRIBUTE, "Gelu: approximate={} is not implemented", n.attr_string("approximate", ""));
    return std::nullopt;
  }
  if (binary_ops().count(op)) {
    if (n.in.size() != 2 || n.in[0] < 0 || n.in[1] < 0) return refuse(NXRT_REFUSE_OTHER, "{}: only two inputs are implemented", op);
    if (n.opset < 7) return refuse(NXRT_REFUSE_OPSET, "{}: opset {} broadcast attributes are not implemented", op, n.opset);
    return same_float(g, n);
  }
  if (op == "Identity" || op == "Dropout") {
    if (auto r = only_outputs(n, 1)) return r;
    if (op == "Dropout" && n.has_input(2)) {
      auto t = g.value(n.in[2]);
      if (!t.has_data || (t.data.size() == 1 && t.data[0] != 0)) return refuse(NXRT_REFUSE_OTHER, "Dropout: training_mode must be constant false");
    }
    if (!movable(g.value(n.in[0]).dtype)) return refuse(NXRT_REFUSE_DTYPE, "{}: dtype {}", op, sdk::dtype_name(g.value(n.in[0]).dtype));
    return std::nullopt;
  }
  if (op == "Reshape" || op == "Expand") {
    if (!movable(g.value(n.in[0]).dtype)) return refuse(NXRT_REFUSE_DTYPE, "{}: dtype {}", op, sdk::dtype_name(g.value(n.in[0]).dtype));
    if (op == "Reshape" && n.opset < 5) return refuse(NXRT_REFUSE_OPSET, "Reshape: opset {} shape attribute is not implemented", n.opset);
    if (!n.has_input(1)) return refuse(NXRT_REFUSE_OTHER, "{}: no shape input", op);
    return need_const(g, n, 1, "shape");
  }
  if (op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
    if (!movable(g.value(n.in[0]).dtype)) return refuse(NXRT_REFUSE_DTYPE, "{}: dtype {}", op, sdk::dtype_name(g.value(n.in[0]).dtype));
    if (op != "Flatten" && n.opset >= 13) {
      if (op == "Unsqueeze" && !n.has_input(1)) return refuse(NXRT_REFUSE_OTHER, "Unsqueeze: no axes input");
      return need_const(g, n, 1, "axes");
    }
    return std::nullopt;
  }
  if (op == "Cast") {
    nxrt_dtype from = g.value(n.in[0]).dtype, to = nxrt_dtype(n.attr_int("to", 0));
    if (!(is_float(from) && is_float(to)) && from != to)
      return refuse(NXRT_REFUSE_DTYPE, "Cast {} -> {} is not implemented", sdk::dtype_name(from), sdk::dtype_name(to));
    return std::nullopt;
  }
  if (op == "MatMul") {
    if (auto r = same_float(g, n)) return r;
    if (auto r = need_rank(g, n, 0, 2, math::kMaxRank)) return r;
    return need_rank(g, n, 1, 2, math::kMaxRank);
  }
  if (op == "Gemm") {
    if (auto r = same_float(g, n)) return r;
    if (auto r = need_rank(g, n, 0, 2, 2)) return r;
    if (auto r = need_rank(g, n, 1, 2, 2)) return r;
    if (n.has_input(2) && g.value(n.in[2]).rank > 2) return refuse(NXRT_REFUSE_SHAPE, "Gemm: C of rank {}", g.value(n.in[2]).rank);
    return std::nullopt;
  }
  if (op == "Conv") {
    if (auto r = same_float(g, n)) return r;
    if (auto r = need_rank(g, n, 0, 4, 4)) return r;
    if (auto r = need_rank(g, n, 1, 4, 4)) return r;
    return check_pool_attrs(n);
  }
  if (op == "MaxPool" || op == "AveragePool") {
    if (auto r = same_float(g, n)) return r;
    if (auto r = only_outputs(n, 1)) return r;
    if (auto r = need_rank(g, n, 0, 4, 4)) return r;
    if (n.attr_int("ceil_mode", 0) != 0) return refuse(NXRT_REFUSE_ATTRIBUTE, "{}: ceil_mode=1 is not implemented", op);
    if (n.attr_int("storage_order", 0) != 0) return refuse(NXRT_REFUSE_ATTRIBUTE, "{}: storage_order=1 is not implemented", op);
    auto k = n.attr_ints("kernel_shape");
    if (!k || k->size() != 2) return refuse(NXRT_REFUSE_ATTRIBUTE, "{}: kernel_shape must have 2 entries", op);
    return check_pool_attrs(n);
  }
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    if (auto r = same_float(g, n)) return r;
    return need_rank(g, n, 0, 3, math::kMaxRank);
  }
  if (op == "BatchNormalization") {
    if (auto r = same_float(g, n)) return r;
    if (auto r = only_outputs(n, 1)) return r;
    if (n.attr_int("training_mode", 0) != 0) return refuse(NXRT_REFUSE_ATTRIBUTE, "BatchNormalization: training_mode=1");
    if (n.opset < 9) return refuse(NXRT_REFUSE_OPSET, "BatchNormalization: opset {} (spatial attribute) is not implemented", n.opset);
    return need_rank(g, n, 0, 2, math::kMaxRank);
  }
  if (op == "Softmax" || op == "LogSoftmax") {
    if (auto r = same_float(g, n)) return r;
    if (auto r = need_rank(g, n, 0, 1, math::kMaxRank)) return r;
    if (n.opset >= 13) {
      const int64_t rank = g.value(n.in[0]).rank, axis = n.attr_int("axis", -1);
      if (axis != -1 && axis != rank - 1) return refuse(NXRT_REFUSE_ATTRIBUTE, "{}: only the last axis is implemented (axis {})", op, axis);
    }
    return std::nullopt;
  }
  if (op == "LayerNormalization") {
    if (auto r = same_float(g, n)) return r;
    if (auto r = only_outputs(n, 1)) return r;
    return need_rank(g, n, 0, 1, math::kMaxRank);
  }
  if (reduce_ops().count(op)) {
    if (auto r = same_float(g, n, 0, 1)) return r;
    const bool axes_input = op == "ReduceSum" ? n.opset >= 13 : n.opset >= 18;
    if (axes_input) return need_const(g, n, 1, "axes");
    return std::nullopt;
  }
  if (op == "Transpose" || op == "Slice" || op == "Concat" || op == "Gather") {
    if (!movable(g.value(n.in[0]).dtype)) return refuse(NXRT_REFUSE_DTYPE, "{}: dtype {}", op, sdk::dtype_name(g.value(n.in[0]).dtype));
    if (op == "Slice" && n.opset >= 10)
      for (size_t i = 1; i < n.in.size(); ++i)
        if (auto r = need_const(g, n, i, "starts/ends/axes/steps")) return r;
    if (op == "Gather") {
      nxrt_dtype it = g.value(n.in[1]).dtype;
      if (it != NXRT_DTYPE_INT64 && it != NXRT_DTYPE_INT32) return refuse(NXRT_REFUSE_DTYPE, "Gather: indices are {}", sdk::dtype_name(it));
    }
    if (op == "Concat")
      for (int id : n.in)
        if (id >= 0 && g.value(id).dtype != g.value(n.in[0]).dtype) return refuse(NXRT_REFUSE_DTYPE, "Concat mixes element types");
    return std::nullopt;
  }
  return refuse(NXRT_REFUSE_OP, "no CUDA kernel for {}", op);
}

// ---------------------------------------------------------------- shapes

std::vector<Shape> infer_shapes(const IrGraph& g, const IrNode& n, const std::vector<Shape>& in) {
  const std::string& op = n.op;
  const char* name = op.c_str();
  auto in0 = [&]() -> const Shape& { return in.at(0); };
  if (unary_ops().count(op) || op == "Identity" || op == "Dropout" || op == "Cast" || op == kChainOp) return {in0()};
  if (binary_ops().count(op)) return {broadcast_shapes(in.at(0), in.at(1), name)};
  if (op == "Reshape") {
    auto shape = *g.const_ints(n.in[1]);
    const bool allowzero = n.attr_int("allowzero", 0) != 0;
    Shape out(shape.size());
    int64_t known = 1, infer = -1;
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t d = shape[i];
      if (d == 0 && !allowzero) {
        if (i >= in0().size()) fail(NXRT_INVALID_ARGUMENT, "Reshape: 0 at axis {} beyond the input's rank", i);
        d = in0()[i];
      }
      if (d == -1) {
        if (infer >= 0) fail(NXRT_INVALID_ARGUMENT, "Reshape: more than one -1");
        infer = int64_t(i);
        continue;
      }
      if (d < 0) fail(NXRT_INVALID_ARGUMENT, "Reshape: dimension {}", d);
      out[i] = d;
      known *= d;
    }
    const int64_t total = numel(in0());
    if (infer >= 0) {
      if (known == 0 || total % known) fail(NXRT_INVALID_ARGUMENT, "Reshape: cannot infer -1 for {} elements", total);
      out[size_t(infer)] = total / known;
    } else if (known != total) {
      fail(NXRT_INVALID_ARGUMENT, "Reshape: {} elements into a shape of {}", total, known);
    }
    return {out};
  }
  if (op == "Flatten") {
    const int64_t r = int64_t(in0().size());
    int64_t axis = n.attr_int("axis", 1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis > r) fail(NXRT_INVALID_ARGUMENT, "Flatten: axis {} for rank {}", n.attr_int("axis", 1), r);
    int64_t a = 1, b = 1;
    for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) *= in0()[size_t(i)];
    return {{a, b}};
  }
  if (op == "Squeeze" || op == "Unsqueeze") {
    std::vector<int64_t> axes;
    if (n.opset >= 13) {
      if (n.has_input(1)) axes = *g.const_ints(n.in[1]);
    } else {
      axes = n.attr_ints("axes").value_or(std::vector<int64_t>{});
    }
    if (op == "Squeeze") {
      const int64_t r = int64_t(in0().size());
      std::vector<bool> drop(size_t(r), false);
      if (axes.empty())
        for (int64_t i = 0; i < r; ++i) drop[size_t(i)] = in0()[size_t(i)] == 1;
      for (auto a : axes) {
        a = normalize_axis(a, r, name);
        if (in0()[size_t(a)] != 1) fail(NXRT_INVALID_ARGUMENT, "Squeeze: axis {} has size {}", a, in0()[size_t(a)]);
        drop[size_t(a)] = true;
      }
      Shape out;
      for (int64_t i = 0; i < r; ++i)
        if (!drop[size_t(i)]) out.push_back(in0()[size_t(i)]);
      return {out};
    }
    const int64_t r = int64_t(in0().size() + axes.size());
    std::vector<bool> ins(size_t(r), false);
    for (auto a : axes) {
      a = normalize_axis(a, r, name);
      if (ins[size_t(a)]) fail(NXRT_INVALID_ARGUMENT, "Unsqueeze: axis {} repeated", a);
      ins[size_t(a)] = true;
    }
    Shape out;
    size_t j = 0;
    for (int64_t i = 0; i < r; ++i) out.push_back(ins[size_t(i)] ? 1 : in0()[j++]);
    return {out};
  }
  if (op == "Expand") {
    auto shape = *g.const_ints(n.in[1]);
    return {broadcast_shapes(in0(), Shape(shape.begin(), shape.end()), name)};
  }
  if (op == "MatMul") {
    const Shape &a = in.at(0), &b = in.at(1);
    if (a.size() < 2 || b.size() < 2) fail(NXRT_INVALID_ARGUMENT, "MatMul: ranks {} and {}", a.size(), b.size());
    const int64_t m = a[a.size() - 2], k = a.back(), k2 = b[b.size() - 2], nn = b.back();
    if (k != k2) fail(NXRT_INVALID_ARGUMENT, "MatMul: inner dimensions {} and {} differ", k, k2);
    Shape out = broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), name);
    out.push_back(m);
    out.push_back(nn);
    return {out};
  }
  if (op == "Gemm") {
    const Shape &a = in.at(0), &b = in.at(1);
    const bool ta = n.attr_int("transA", 0), tb = n.attr_int("transB", 0);
    const int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1], k2 = tb ? b[1] : b[0], nn = tb ? b[0] : b[1];
    if (k != k2) fail(NXRT_INVALID_ARGUMENT, "Gemm: inner dimensions {} and {} differ", k, k2);
    if (n.has_input(2)) {
      Shape c = broadcast_shapes(in.at(2), {m, nn}, name);
      if (c != Shape{m, nn}) fail(NXRT_INVALID_ARGUMENT, "Gemm: C does not broadcast to [{}, {}]", m, nn);
    }
    return {{m, nn}};
  }
  if (op == "Conv" || op == "MaxPool" || op == "AveragePool") {
    const Shape& x = in0();
    const bool conv = op == "Conv";
    std::vector<int64_t> k;
    if (conv) {
      const Shape& w = in.at(1);
      k = {w[2], w[3]};
      const int64_t group = n.attr_int("group", 1);
      if (group < 1 || x[1] % group || w[0] % group || w[1] * group != x[1])
        fail(NXRT_INVALID_ARGUMENT, "Conv: {} input channels, weight {}x{}, group {}", x[1], w[0], w[1], group);
      if (n.has_input(2) && (in.at(2).size() != 1 || in.at(2)[0] != w[0])) fail(NXRT_INVALID_ARGUMENT, "Conv: bias is not [{}]", w[0]);
      if (auto ks = n.attr_ints("kernel_shape"); ks && *ks != k) fail(NXRT_INVALID_ARGUMENT, "Conv: kernel_shape differs from the weight");
    } else {
      k = *n.attr_ints("kernel_shape");
    }
    auto strides = n.attr_ints("strides").value_or(std::vector<int64_t>{1, 1});
    auto dil = n.attr_ints("dilations").value_or(std::vector<int64_t>{1, 1});
    auto pads = n.attr_ints("pads").value_or(std::vector<int64_t>{0, 0, 0, 0});
    if (n.attr_string("auto_pad", "NOTSET") == "VALID") pads = {0, 0, 0, 0};
    if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4) fail(NXRT_INVALID_ARGUMENT, "{}: strides/dilations/pads sizes", name);
    Shape out = {x[0], conv ? in.at(1)[0] : x[1], 0, 0};
    for (int i = 0; i < 2; ++i) {
      out[size_t(2 + i)] = math::conv_out_size(x[size_t(2 + i)], k[size_t(i)], strides[size_t(i)], pads[size_t(i)], pads[size_t(i + 2)], dil[size_t(i)]);
      if (out[size_t(2 + i)] < 1) fail(NXRT_INVALID_ARGUMENT, "{}: empty output on spatial axis {}", name, i);
    }
    return {out};
  }
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    Shape out = in0();
    for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
    return {out};
  }
  if (op == "BatchNormalization") {
    for (size_t i = 1; i < 5; ++i)
      if (in.at(i).size() != 1 || in.at(i)[0] != in0()[1]) fail(NXRT_INVALID_ARGUMENT, "BatchNormalization: input {} is not [{}]", i, in0()[1]);
    return {in0()};
  }
  if (op == "Softmax" || op == "LogSoftmax") return {in0()};
  if (op == "LayerNormalization") {
    const int64_t axis = normalize_axis(n.attr_int("axis", -1), int64_t(in0().size()), name);
    int64_t inner = 1;
    for (size_t i = size_t(axis); i < in0().size(); ++i) inner *= in0()[i];
    if (numel(in.at(1)) != inner || (n.has_input(2) && numel(in.at(2)) != inner))
      fail(NXRT_INVALID_ARGUMENT, "LayerNormalization: scale/bias must have {} elements", inner);
    return {in0()};
  }
  if (reduce_ops().count(op)) {
    bool noop = false;
    auto axes = reduce_axes(g, n, int64_t(in0().size()), &noop);
    if (noop) return {in0()};
    const bool keep = n.attr_int("keepdims", 1) != 0;
    Shape out;
    for (size_t i = 0; i < in0().size(); ++i) {
      bool red = std::find(axes.begin(), axes.end(), int64_t(i)) != axes.end();
      if (!red) out.push_back(in0()[i]);
      else if (keep) out.push_back(1);
    }
    return {out};
  }
  if (op == "Transpose") {
    const size_t r = in0().size();
    auto perm = n.attr_ints("perm").value_or(std::vector<int64_t>{});
    if (perm.empty())
      for (size_t i = 0; i < r; ++i) perm.push_back(int64_t(r - 1 - i));
    if (perm.size() != r) fail(NXRT_INVALID_ARGUMENT, "Transpose: perm has {} entries for rank {}", perm.size(), r);
    std::vector<bool> seen(r);
    Shape out;
    for (auto p : perm) {
      if (p < 0 || size_t(p) >= r || seen[size_t(p)]) fail(NXRT_INVALID_ARGUMENT, "Transpose: perm is not a permutation");
      seen[size_t(p)] = true;
      out.push_back(in0()[size_t(p)]);
    }
    return {out};
  }
  if (op == "Concat") {
    const int64_t axis = normalize_axis(n.attr_int("axis", 0), int64_t(in0().size()), name);
    Shape out = in0();
    out[size_t(axis)] = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      if (!n.has_input(i)) continue;
      const Shape& s = in[i];
      if (s.size() != out.size()) fail(NXRT_INVALID_ARGUMENT, "Concat: input {} has rank {}", i, s.size());
      for (size_t d = 0; d < s.size(); ++d)
        if (int64_t(d) != axis && s[d] != out[d]) fail(NXRT_INVALID_ARGUMENT, "Concat: input {} differs on axis {}", i, d);
      out[size_t(axis)] += s[size_t(axis)];
    }
    return {out};
  }
  if (op == "Gather") {
    const int64_t axis = normalize_axis(n.attr_int("axis", 0), int64_t(in0().size()), name);
    Shape out(in0().begin(), in0().begin() + axis);
    out.insert(out.end(), in.at(1).begin(), in.at(1).end());
    out.insert(out.end(), in0().begin() + axis + 1, in0().end());
    return {out};
  }
  if (op == "Slice") return {slice_params(g, n, in0()).size};
  fail(NXRT_UNSUPPORTED, "no shape function for {}", op);
}

// ---------------------------------------------------------------- copy views

CopyView slice_view(const Shape& x, const SliceAxes& s) {
  CopyView v;
  const math::Strides in = math::dense(x.data(), int(x.size()));
  v.dst = math::dense(s.size.data(), int(s.size.size()));
  v.src = v.dst;
  v.count = 1;
  for (int i = 0; i < in.rank; ++i) {
    v.src.strides[i] = in.strides[i] * s.step[size_t(i)];
    v.src_base += s.start[size_t(i)] * in.strides[i];
    v.count *= s.size[size_t(i)];
  }
  return v;
}

std::vector<CopyView> concat_views(const std::vector<Shape>& inputs, const std::vector<bool>& present, int64_t axis,
                                   const Shape& y) {
  std::vector<CopyView> out;
  const math::Strides ys = math::dense(y.data(), int(y.size()));
  int64_t at = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!present[i]) continue;
    const Shape& s = inputs[i];
    CopyView v;
    v.src = math::dense(s.data(), int(s.size()));
    v.dst = ys;
    for (size_t d = 0; d < s.size(); ++d) v.dst.dims[d] = s[d];
    v.dst_base = at * ys.strides[axis];
    v.count = numel(s);
    out.push_back(v);
    at += s[size_t(axis)];
  }
  return out;
}

ReduceView reduce_view(const Shape& x, const std::vector<int64_t>& axes) {
  ReduceView r;
  const math::Strides in = math::dense(x.data(), int(x.size()));
  for (int i = 0; i < in.rank; ++i) {
    const bool red = std::find(axes.begin(), axes.end(), int64_t(i)) != axes.end();
    math::Strides& s = red ? r.inner : r.outer;
    s.dims[s.rank] = in.dims[i];
    s.strides[s.rank] = in.strides[i];
    ++s.rank;
    if (red) r.n_inner *= in.dims[i];
  }
  return r;
}

MatmulPlan matmul_plan(const Shape& a, const Shape& b) {
  MatmulPlan p;
  p.m = a[a.size() - 2], p.k = a.back(), p.n = b.back();
  const Shape ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  const Shape yb = broadcast_shapes(ab, bb, "MatMul");
  p.batch = numel(yb);
  const int64_t na = numel(ab), nb = numel(bb);
  p.stride_c = p.m * p.n;
  // A side with as many matrices as the output has exactly the output's batch dims.
  if ((na == p.batch || na == 1) && (nb == p.batch || nb == 1)) {
    p.stride_a = na == 1 ? 0 : p.m * p.k;
    p.stride_b = nb == 1 ? 0 : p.k * p.n;
    return p;
  }
  p.strided = false;
  const math::Strides sa = math::broadcast_strides(ab.data(), int(ab.size()), yb.data(), int(yb.size()));
  const math::Strides sb = math::broadcast_strides(bb.data(), int(bb.size()), yb.data(), int(yb.size()));
  for (int64_t i = 0; i < p.batch; ++i)
    p.offsets.emplace_back(math::offset_of(i, sa) * p.m * p.k, math::offset_of(i, sb) * p.k * p.n);
  return p;
}

math::Conv2d conv_geometry(const IrNode& n, const Shape& x, const Shape& y, int64_t kh, int64_t kw) {
  math::Conv2d c;
  c.n = x[0], c.c = x[1], c.h = x[2], c.w = x[3];
  c.k = y[1], c.oh = y[2], c.ow = y[3];
  c.kh = kh, c.kw = kw;
  auto strides = n.attr_ints("strides").value_or(std::vector<int64_t>{1, 1});
  auto dil = n.attr_ints("dilations").value_or(std::vector<int64_t>{1, 1});
  auto pads = n.attr_ints("pads").value_or(std::vector<int64_t>{0, 0, 0, 0});
  if (n.attr_string("auto_pad", "NOTSET") == "VALID") pads = {0, 0, 0, 0};
  c.sh = strides[0], c.sw = strides[1], c.dh = dil[0], c.dw = dil[1];
  c.ph = pads[0], c.pw = pads[1], c.peh = pads[2], c.pew = pads[3];
  c.group = n.attr_int("group", 1);
  return c;
}

// ---------------------------------------------------------------- fusion

size_t fuse_epilogues(IrGraph& g) {
  size_t folded = 0;
  for (auto& n : g.nodes) {
    if (n.fused_away) continue;
    const bool producer = n.op == "Conv" || n.op == "Gemm" || n.op == "MatMul" || n.op == "BatchNormalization" ||
                          binary_ops().count(n.op);
    if (!producer || n.epilogue.op != Unary::Identity || n.out.empty()) continue;
    const int v = n.out[0];
    if (g.value(v).group_output >= 0) continue;  // someone outside reads the pre-activation value
    auto users = g.consumers(v);
    if (users.size() != 1) continue;
    IrNode& act = g.nodes[users[0]];
    if (act.in.empty() || act.in[0] != v) continue;
    auto e = activation_of(g, act);
    if (!e || g.value(act.out[0]).dtype != g.value(v).dtype) continue;
    n.epilogue = *e;
    n.out[0] = act.out[0];
    act.fused_away = true;
    ++folded;
  }
  return folded;
}

}  // namespace nxrt::cuda
