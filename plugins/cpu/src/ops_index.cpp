// Shape plumbing: Shape, Size, Gather, Slice, Expand, Tile, Pad, Split,
// ConstantOfShape, Range, Cast, CastLike, Where. Data movement is expressed as
// an index-map copy (tensor_ops.hpp), any fixed-size element type.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ops_more.hpp"

namespace nxrt::cpu {
namespace {

Check data_types(const Node& n, size_t data_inputs = 1) {
  if (auto r = sdk::require_dtypes(n, kAllFixed, 0, data_inputs)) return r;
  return same_dtype(n, data_inputs);
}

// -------------------------------------------------------------- Shape, Size

std::unique_ptr<Kernel> shape_create(const Node& n, CpuSession&) {
  const int64_t start = n.attr_int("start", 0);
  const bool has_end = n.has_attr("end");
  const int64_t end = n.attr_int("end", 0);
  return make_kernel([start, has_end, end](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const int64_t r = int64_t(x.rank());
    auto clampi = [r](int64_t v) { return std::clamp(v < 0 ? v + r : v, int64_t(0), r); };
    const int64_t s = clampi(start), e = has_end ? clampi(end) : r;
    const int64_t cnt = std::max<int64_t>(0, e - s);
    TensorView y = ctx.output(0, NXRT_DTYPE_INT64, {cnt});
    for (int64_t i = 0; i < cnt; ++i) y.data<int64_t>()[i] = x.dim(size_t(s + i));
  });
}

std::unique_ptr<Kernel> size_create(const Node&, CpuSession&) {
  return make_kernel([](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, NXRT_DTYPE_INT64, std::span<const int64_t>());
    y.data<int64_t>()[0] = x.numel();
  });
}

Check shape_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kAllFixed)) return r;
  return known_attrs(n, {"start", "end"});
}

// ------------------------------------------------------------------ Gather

std::unique_ptr<Kernel> gather_create(const Node& n, CpuSession& s) {
  const int64_t axis = n.attr_int("axis", 0);
  ThreadPool* pool = s.pool();
  return make_kernel([axis, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0), ind = ctx.input(1);
    const int64_t r = int64_t(x.rank());
    if (r == 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Gather: data must have rank >= 1");
    const int64_t a = norm_axis(axis, r, "Gather");
    const std::vector<int64_t> idx = read_ints(ind, "Gather", "indices");
    std::vector<int64_t> od(x.dims().begin(), x.dims().begin() + a);
    od.insert(od.end(), ind.dims().begin(), ind.dims().end());
    od.insert(od.end(), x.dims().begin() + a + 1, x.dims().end());
    const int64_t d = x.dim(size_t(a));
    for (auto v : idx)
      if (v < -d || v >= d) sdk::fail(NXRT_INVALID_ARGUMENT, "Gather: index {} out of range for axis {} of size {}", v, a, d);
    TensorView y = ctx.output(0, x.dtype(), od);
    if (y.numel() == 0) return;
    gather(x.raw(), y.raw(), sdk::dtype_size(x.dtype()), x.dims(), a, idx, pool);
  });
}

// ------------------------------------------------------------------- Slice

struct SliceArgs {
  std::vector<int64_t> starts, ends, axes, steps;
};

void slice_run(Context& ctx, const SliceArgs& s, ThreadPool* pool) {
  ConstTensorView x = ctx.input(0);
  const int64_t r = int64_t(x.rank());
  const size_t k = s.starts.size();
  if (s.ends.size() != k || (!s.axes.empty() && s.axes.size() != k) || (!s.steps.empty() && s.steps.size() != k))
    sdk::fail(NXRT_INVALID_ARGUMENT, "Slice: starts, ends, axes and steps differ in length");
  std::vector<int64_t> start(size_t(r), 0), step(size_t(r), 1), od = x.dims();
  std::vector<bool> seen(size_t(r), false);
  for (size_t i = 0; i < k; ++i) {
    const int64_t a = norm_axis(s.axes.empty() ? int64_t(i) : s.axes[i], r, "Slice");
    if (seen[size_t(a)]) sdk::fail(NXRT_INVALID_ARGUMENT, "Slice: axis {} repeated", a);
    seen[size_t(a)] = true;
    const int64_t d = x.dim(size_t(a));
    const int64_t st = s.steps.empty() ? 1 : s.steps[i];
    if (st == 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Slice: step 0");
    int64_t b = s.starts[i];
    const int64_t cnt = slice_bounds(b, s.ends[i], st, d);
    start[size_t(a)] = b;
    step[size_t(a)] = st;
    od[size_t(a)] = cnt;
  }
  TensorView y = ctx.output(0, x.dtype(), od);
  if (y.numel() == 0) return;
  strided_slice(x.raw(), y.raw(), sdk::dtype_size(x.dtype()), x.dims(), start, step, od, pool);
}

std::unique_ptr<Kernel> slice1_create(const Node& n, CpuSession& s) {
  SliceArgs a{n.attr_ints("starts"), n.attr_ints("ends"), n.attr_ints("axes"), {}};
  ThreadPool* pool = s.pool();
  return make_kernel([a, pool](Context& ctx) { slice_run(ctx, a, pool); });
}

std::unique_ptr<Kernel> slice10_create(const Node&, CpuSession& s) {
  ThreadPool* pool = s.pool();
  return make_kernel([pool](Context& ctx) {
    SliceArgs a;
    a.starts = read_ints(ctx.input(1), "Slice", "starts");
    a.ends = read_ints(ctx.input(2), "Slice", "ends");
    if (auto t = ctx.optional_input(3)) a.axes = read_ints(*t, "Slice", "axes");
    if (auto t = ctx.optional_input(4)) a.steps = read_ints(*t, "Slice", "steps");
    slice_run(ctx, a, pool);
  });
}

Check slice10_check(const Node& n) {
  if (auto r = data_types(n, 1)) return r;
  for (size_t i = 1; i < 5; ++i)
    if (auto r = index_dtype(n, i, "starts/ends/axes/steps")) return r;
  return std::nullopt;
}

// ------------------------------------------------------------ Expand, Tile

std::unique_ptr<Kernel> expand_create(const Node&, CpuSession& s) {
  ThreadPool* pool = s.pool();
  return make_kernel([pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const std::vector<int64_t> shape = read_ints(ctx.input(1), "Expand", "shape");
    std::vector<std::vector<int64_t>> shapes = {x.dims(), shape};
    std::vector<int64_t> od;
    if (!broadcast_shapes(shapes, od))
      sdk::fail(NXRT_INVALID_ARGUMENT, "Expand: {} does not broadcast to {}", dims_str(x.dims()), dims_str(shape));
    TensorView y = ctx.output(0, x.dtype(), od);
    if (y.numel() == 0) return;
    const auto st = broadcast_strides(x.dims(), od);
    std::vector<std::vector<int64_t>> maps(od.size());
    for (size_t d = 0; d < od.size(); ++d) {
      maps[d].resize(size_t(od[d]));
      for (int64_t i = 0; i < od[d]; ++i) maps[d][size_t(i)] = i * st[d];
    }
    map_copy(x.raw(), y.raw(), sdk::dtype_size(x.dtype()), od, maps, nullptr, pool);
  });
}

std::unique_ptr<Kernel> tile_create(const Node&, CpuSession& s) {
  ThreadPool* pool = s.pool();
  return make_kernel([pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const std::vector<int64_t> rep = read_ints(ctx.input(1), "Tile", "repeats");
    const size_t r = x.rank();
    if (rep.size() != r) sdk::fail(NXRT_INVALID_ARGUMENT, "Tile: {} repeats for rank {}", rep.size(), r);
    std::vector<int64_t> od(r);
    for (size_t d = 0; d < r; ++d) {
      if (rep[d] < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Tile: negative repeat {}", rep[d]);
      od[d] = x.dim(d) * rep[d];
    }
    TensorView y = ctx.output(0, x.dtype(), od);
    if (y.numel() == 0) return;
    const auto xs = contiguous_strides(x.dims());
    std::vector<std::vector<int64_t>> maps(r);
    for (size_t d = 0; d < r; ++d) {
      maps[d].resize(size_t(od[d]));
      for (int64_t i = 0; i < od[d]; ++i) maps[d][size_t(i)] = (i % x.dim(d)) * xs[d];
    }
    map_copy(x.raw(), y.raw(), sdk::dtype_size(x.dtype()), od, maps, nullptr, pool);
  });
}

// --------------------------------------------------------------------- Pad

enum class PadMode { Constant, Reflect, Edge, Wrap };

std::optional<PadMode> pad_mode(const std::string& m) {
  if (m == "constant") return PadMode::Constant;
  if (m == "reflect") return PadMode::Reflect;
  if (m == "edge") return PadMode::Edge;
  if (m == "wrap") return PadMode::Wrap;
  return std::nullopt;
}

// pads: begin values then end values for the axes listed (all axes when empty).
void pad_run(Context& ctx, PadMode mode, const std::vector<int64_t>& pads_in, const std::vector<int64_t>& axes_in,
             const void* fill, ThreadPool* pool) {
  ConstTensorView x = ctx.input(0);
  const int64_t r = int64_t(x.rank());
  std::vector<int64_t> axes = axes_in;
  if (axes.empty())
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  if (pads_in.size() != 2 * axes.size())
    sdk::fail(NXRT_INVALID_ARGUMENT, "Pad: {} pads for {} axes", pads_in.size(), axes.size());
  std::vector<int64_t> pb(size_t(r), 0), pe(size_t(r), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = norm_axis(axes[i], r, "Pad");
    pb[size_t(a)] = pads_in[i];
    pe[size_t(a)] = pads_in[i + axes.size()];
  }
  std::vector<int64_t> od(static_cast<size_t>(r));
  for (size_t d = 0; d < size_t(r); ++d) {
    od[d] = x.dim(d) + pb[d] + pe[d];
    if (od[d] < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Pad: pads {} crop axis {} below 0", dims_str(pads_in), d);
    if (mode != PadMode::Constant && x.dim(d) == 0 && od[d] > 0)
      sdk::fail(NXRT_INVALID_ARGUMENT, "Pad: cannot pad an empty axis in this mode");
  }
  TensorView y = ctx.output(0, x.dtype(), od);
  if (y.numel() == 0) return;
  const auto xs = contiguous_strides(x.dims());
  std::vector<std::vector<int64_t>> maps(static_cast<size_t>(r));
  for (size_t d = 0; d < size_t(r); ++d) {
    const int64_t n = x.dim(d);
    maps[d].resize(size_t(od[d]));
    for (int64_t o = 0; o < od[d]; ++o) {
      int64_t i = o - pb[d];
      if (i < 0 || i >= n) {
        switch (mode) {
          case PadMode::Constant: i = -1; break;
          case PadMode::Edge: i = std::clamp(i, int64_t(0), n - 1); break;
          case PadMode::Wrap: i = ((i % n) + n) % n; break;
          case PadMode::Reflect:
            if (n == 1) i = 0;
            else {
              const int64_t period = 2 * (n - 1);
              i = ((i % period) + period) % period;
              if (i >= n) i = period - i;
            }
            break;
        }
      }
      maps[d][size_t(o)] = i < 0 ? kFill : i * xs[d];
    }
  }
  map_copy(x.raw(), y.raw(), sdk::dtype_size(x.dtype()), od, maps, fill, pool);
}

std::unique_ptr<Kernel> pad2_create(const Node& n, CpuSession& s) {
  const PadMode mode = *pad_mode(n.attr_string("mode", "constant"));
  const std::vector<int64_t> pads = n.attr_ints("pads");
  const float value = n.attr_float("value", 0.f);
  ThreadPool* pool = s.pool();
  return make_kernel([mode, pads, value, pool](Context& ctx) { pad_run(ctx, mode, pads, {}, &value, pool); });
}

std::unique_ptr<Kernel> pad11_create(const Node& n, CpuSession& s) {
  const PadMode mode = *pad_mode(n.attr_string("mode", "constant"));
  ThreadPool* pool = s.pool();
  return make_kernel([mode, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const std::vector<int64_t> pads = read_ints(ctx.input(1), "Pad", "pads");
    uint64_t fill = 0;
    if (auto v = ctx.optional_input(2)) {
      if (v->dtype() != x.dtype()) sdk::fail(NXRT_INVALID_ARGUMENT, "Pad: constant_value dtype differs from data");
      if (v->numel() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "Pad: constant_value must have one element");
      std::memcpy(&fill, v->raw(), sdk::dtype_size(v->dtype()));
    }
    std::vector<int64_t> axes;
    if (auto a = ctx.optional_input(3)) axes = read_ints(*a, "Pad", "axes");
    pad_run(ctx, mode, pads, axes, &fill, pool);
  });
}

Check pad_check(const Node& n, int since) {
  const std::string m = n.attr_string("mode", "constant");
  auto mode = pad_mode(m);
  if (!mode || (*mode == PadMode::Wrap && since < 19))
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "Pad: mode '{}' is not implemented", m);
  if (auto r = known_attrs(n, {"mode", "pads", "value"})) return r;
  if (since < 11) return sdk::require_dtypes(n, {NXRT_DTYPE_FLOAT32});
  if (auto r = data_types(n, 1)) return r;
  if (auto r = index_dtype(n, 1, "pads", false)) return r;
  if (n.has_input(2) && n.input(2).dtype() != n.input(0).dtype())
    return sdk::refuse(NXRT_REFUSE_DTYPE, "Pad: constant_value dtype differs from data");
  return index_dtype(n, 3, "axes");
}

// ------------------------------------------------------------------- Split

std::unique_ptr<Kernel> split_create(const Node& n, CpuSession&, bool split_input) {
  const int64_t axis = n.attr_int("axis", 0);
  const std::vector<int64_t> split_attr = n.attr_ints("split");
  const int64_t num_outputs = n.attr_int("num_outputs", 0);
  return make_kernel([axis, split_attr, num_outputs, split_input](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const int64_t r = int64_t(x.rank());
    const int64_t a = norm_axis(axis, r, "Split");
    const int64_t d = x.dim(size_t(a));
    const size_t k = ctx.output_count();
    std::vector<int64_t> split = split_attr;
    if (split_input)
      if (auto t = ctx.optional_input(1)) split = read_ints(*t, "Split", "split");
    if (split.empty()) {
      if (num_outputs > 0) {
        const int64_t chunk = (d + num_outputs - 1) / num_outputs;
        for (int64_t i = 0; i < num_outputs; ++i) split.push_back(std::clamp(d - i * chunk, int64_t(0), chunk));
      } else {
        if (k == 0 || d % int64_t(k) != 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Split: axis size {} does not split into {} equal parts", d, k);
        split.assign(k, d / int64_t(k));
      }
    }
    if (split.size() != k) sdk::fail(NXRT_INVALID_ARGUMENT, "Split: {} sizes for {} outputs", split.size(), k);
    int64_t total = 0;
    for (auto v : split) {
      if (v < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Split: negative size {}", v);
      total += v;
    }
    if (total != d) sdk::fail(NXRT_INVALID_ARGUMENT, "Split: sizes {} do not add up to {}", dims_str(split), d);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < a; ++i) outer *= x.dim(size_t(i));
    for (int64_t i = a + 1; i < r; ++i) inner *= x.dim(size_t(i));
    const size_t es = sdk::dtype_size(x.dtype());
    int64_t off = 0;
    for (size_t j = 0; j < k; ++j) {
      std::vector<int64_t> od = x.dims();
      od[size_t(a)] = split[j];
      TensorView y = ctx.output(j, x.dtype(), od);
      const size_t row = size_t(split[j] * inner) * es;
      if (row)
        for (int64_t o = 0; o < outer; ++o)
          std::memcpy(static_cast<char*>(y.raw()) + size_t(o) * row,
                      static_cast<const char*>(x.raw()) + (size_t(o * d + off) * size_t(inner)) * es, row);
      off += split[j];
    }
  });
}

Check split_check(const Node& n, bool split_input) {
  if (auto r = data_types(n, 1)) return r;
  if (split_input)
    if (auto r = index_dtype(n, 1, "split", false)) return r;
  return known_attrs(n, {"axis", "split", "num_outputs"});
}

// --------------------------------------------------------- ConstantOfShape

std::unique_ptr<Kernel> cos_create(const Node& n, CpuSession&) {
  nxrt_dtype dt = NXRT_DTYPE_FLOAT32;
  uint64_t value = 0;
  if (auto a = n.attr("value")) {
    ConstTensorView t = a->tensor();
    if (t.numel() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "ConstantOfShape: value must have one element");
    dt = t.dtype();
    std::memcpy(&value, t.raw(), sdk::dtype_size(dt));
  }
  return make_kernel([dt, value](Context& ctx) {
    const std::vector<int64_t> shape = read_ints(ctx.input(0), "ConstantOfShape", "shape");
    for (auto v : shape)
      if (v < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "ConstantOfShape: negative dim in {}", dims_str(shape));
    TensorView y = ctx.output(0, dt, shape);
    const int64_t cnt = y.numel();
    const size_t es = sdk::dtype_size(dt);
    char* p = static_cast<char*>(y.raw());
    if (value == 0) {
      std::memset(p, 0, size_t(cnt) * es);
      return;
    }
    for (int64_t i = 0; i < cnt; ++i) std::memcpy(p + size_t(i) * es, &value, es);
  });
}

Check cos_check(const Node& n) {
  if (auto r = index_dtype(n, 0, "shape", false)) return r;
  auto o = n.output(0);
  bool ok = false;
  for (auto t : kAllFixed) ok = ok || t == o.dtype();
  if (!ok) return sdk::refuse(NXRT_REFUSE_DTYPE, "ConstantOfShape output is {}", sdk::dtype_name(o.dtype()));
  return known_attrs(n, {"value"});
}

// ------------------------------------------------------------------- Range

std::unique_ptr<Kernel> range_create(const Node&, CpuSession&) {
  return make_kernel([](Context& ctx) {
    ConstTensorView s = ctx.input(0), l = ctx.input(1), dl = ctx.input(2);
    if (s.numel() != 1 || l.numel() != 1 || dl.numel() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "Range: inputs must be scalars");
    dispatch_type(s.dtype(), "Range", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        sdk::fail(NXRT_INVALID_ARGUMENT, "Range: bool");
      } else {
        const T start = s.data<T>()[0], limit = l.data<T>()[0], delta = dl.data<T>()[0];
        if (delta == T(0)) sdk::fail(NXRT_INVALID_ARGUMENT, "Range: delta is 0");
        int64_t cnt = 0;
        if constexpr (std::is_floating_point_v<T>)
          cnt = int64_t(std::max(0.0, std::ceil((double(limit) - double(start)) / double(delta))));
        else {
          const int64_t span = int64_t(limit) - int64_t(start), dd = int64_t(delta);
          if ((span > 0 && dd > 0) || (span < 0 && dd < 0)) cnt = (span + dd - (dd > 0 ? 1 : -1)) / dd;
        }
        TensorView y = ctx.output(0, s.dtype(), {cnt});
        T* p = y.data<T>();
        for (int64_t i = 0; i < cnt; ++i) p[i] = T(start + T(i) * delta);
      }
    });
  });
}

// -------------------------------------------------------------------- Cast

bool cast_supported(nxrt_dtype t) {
  if (t == NXRT_DTYPE_BFLOAT16) return false;  // bf16 casts are not certified (the host loads no bf16 test data)
  return elem_of(t).has_value();
}

std::unique_ptr<Kernel> cast_create(const Node& n, CpuSession&, bool like) {
  const nxrt_dtype to = like ? n.input(1).dtype() : nxrt_dtype(n.attr_int("to", 0));
  return make_kernel([to](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, to, x.dims());
    if (x.numel() == 0) return;
    if (x.dtype() == to) {
      std::memcpy(y.raw(), x.raw(), x.bytes());
      return;
    }
    auto se = elem_of(x.dtype()), de = elem_of(to);
    if (!se || !de) sdk::fail(NXRT_INVALID_ARGUMENT, "Cast: {} -> {} is not supported", sdk::dtype_name(x.dtype()), sdk::dtype_name(to));
    cast(x.raw(), *se, y.raw(), *de, x.numel());
  });
}

Check cast_check(const Node& n, bool like) {
  const nxrt_dtype from = n.input(0).dtype();
  const nxrt_dtype to = like ? n.input(1).dtype() : nxrt_dtype(n.attr_int("to", 0));
  if (!cast_supported(from) || !cast_supported(to))
    return sdk::refuse(NXRT_REFUSE_DTYPE, "{}: {} -> {} is not implemented", n.op_type(), sdk::dtype_name(from), sdk::dtype_name(to));
  if (n.output(0).dtype() != to) return sdk::refuse(NXRT_REFUSE_DTYPE, "{}: output dtype differs from target", n.op_type());
  return known_attrs(n, {"to", "saturate"});
}

// ------------------------------------------------------------------- Where

std::unique_ptr<Kernel> where_create(const Node&, CpuSession& s) {
  ThreadPool* pool = s.pool();
  return make_kernel([pool](Context& ctx) {
    ConstTensorView c = ctx.input(0), a = ctx.input(1), b = ctx.input(2);
    if (a.dtype() != b.dtype()) sdk::fail(NXRT_INVALID_ARGUMENT, "Where: X and Y differ in dtype");
    std::vector<std::vector<int64_t>> shapes = {c.dims(), a.dims(), b.dims()};
    std::vector<int64_t> od;
    if (!broadcast_shapes(shapes, od)) sdk::fail(NXRT_INVALID_ARGUMENT, "Where: shapes do not broadcast");
    TensorView y = ctx.output(0, a.dtype(), od);
    if (y.numel() == 0) return;
    const size_t es = sdk::dtype_size(a.dtype());
    if (es != 1 && es != 2 && es != 4 && es != 8) sdk::fail(NXRT_INVALID_ARGUMENT, "Where: dtype {} not supported", sdk::dtype_name(a.dtype()));
    where(c.data<bool>(), c.dims(), a.raw(), a.dims(), b.raw(), b.dims(), y.raw(), es, od, pool);
  });
}

Check where_check(const Node& n) {
  if (auto r = input_dtype_is(n, 0, NXRT_DTYPE_BOOL, "condition")) return r;
  if (auto r = sdk::require_dtypes(n, kAllFixed, 1)) return r;
  if (n.input(1).dtype() != n.input(2).dtype()) return sdk::refuse(NXRT_REFUSE_DTYPE, "Where: X and Y differ in dtype");
  return std::nullopt;
}

}  // namespace

void register_index_ops(Registry& r) {
  r.add(Def{"Shape", "", 1, INT_MAX, shape_check, shape_create});
  r.add(Def{"Size", "", 1, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kAllFixed); }, size_create});
  r.add(Def{"Gather", "", 1, INT_MAX,
            [](const Node& n) {
              if (auto c = data_types(n, 1)) return c;
              if (auto c = index_dtype(n, 1, "indices")) return c;
              return known_attrs(n, {"axis"});
            },
            gather_create});
  r.add(Def{"Slice", "", 1, 9,
            [](const Node& n) {
              if (auto c = data_types(n, 1)) return c;
              return known_attrs(n, {"starts", "ends", "axes"});
            },
            slice1_create});
  r.add(Def{"Slice", "", 10, INT_MAX, slice10_check, slice10_create});
  r.add(Def{"Expand", "", 8, INT_MAX,
            [](const Node& n) {
              if (auto c = data_types(n, 1)) return c;
              return index_dtype(n, 1, "shape", false);
            },
            expand_create});
  r.add(Def{"Tile", "", 6, INT_MAX,
            [](const Node& n) {
              if (auto c = data_types(n, 1)) return c;
              return index_dtype(n, 1, "repeats", false);
            },
            tile_create});
  r.add(Def{"Pad", "", 2, 10, [](const Node& n) { return pad_check(n, 2); }, pad2_create});
  r.add(Def{"Pad", "", 11, 18, [](const Node& n) { return pad_check(n, 11); }, pad11_create});
  r.add(Def{"Pad", "", 19, INT_MAX, [](const Node& n) { return pad_check(n, 19); }, pad11_create});
  r.add(Def{"Split", "", 2, 12, [](const Node& n) { return split_check(n, false); },
            [](const Node& n, CpuSession& s) { return split_create(n, s, false); }});
  r.add(Def{"Split", "", 13, INT_MAX, [](const Node& n) { return split_check(n, true); },
            [](const Node& n, CpuSession& s) { return split_create(n, s, true); }});
  r.add(Def{"ConstantOfShape", "", 9, INT_MAX, cos_check, cos_create});
  r.add(Def{"Range", "", 11, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT16, NXRT_DTYPE_INT32,
                                                   NXRT_DTYPE_INT64}))
                return c;
              return same_dtype(n);
            },
            range_create});
  r.add(Def{"Cast", "", 6, INT_MAX, [](const Node& n) { return cast_check(n, false); },
            [](const Node& n, CpuSession& s) { return cast_create(n, s, false); }});
  r.add(Def{"CastLike", "", 15, INT_MAX, [](const Node& n) { return cast_check(n, true); },
            [](const Node& n, CpuSession& s) { return cast_create(n, s, true); }});
  r.add(Def{"Where", "", 9, INT_MAX, where_check, where_create});
  register_math_ops(r);
  register_reduce_ops(r);
  register_pool_more_ops(r);
  register_gather_ops(r);
  register_loss_ops(r);
  register_resize_ops(r);
  register_deconv_ops(r);
  register_linalg_ops(r);
  register_rnn_ops(r);
}

}  // namespace nxrt::cpu
