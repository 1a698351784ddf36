// Ops that copy elements to new positions without arithmetic: Transpose,
// Concat, Split, Slice, Pad, Expand, Tile, DepthToSpace, SpaceToDepth,
// ReverseSequence, Trilu. Any fixed-size element type; most are an index-map
// or strided copy (tensor_ops.hpp, transpose.hpp).
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "ops.hpp"
#include "transpose.hpp"

namespace nxrt::cpu {
namespace {

// ------------------------------------------------------------ Transpose

std::unique_ptr<Kernel> transpose_create(const Node& n, CpuSession& s) {
  const bool has_perm = n.has_attr("perm");
  const std::vector<int64_t> perm = n.attr_ints("perm");
  ThreadPool* pool = s.pool();
  return make_kernel([has_perm, perm, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const size_t r = x.rank();
    std::vector<int64_t> p = perm;
    if (!has_perm) {
      p.resize(r);
      for (size_t i = 0; i < r; ++i) p[i] = int64_t(r - 1 - i);
    }
    if (p.size() != r) sdk::fail(NXRT_INVALID_ARGUMENT, "Transpose: perm has {} entries for rank {}", p.size(), r);
    std::vector<bool> seen(r, false);
    std::vector<int64_t> od(r);
    for (size_t i = 0; i < r; ++i) {
      int64_t a = p[i] < 0 ? p[i] + int64_t(r) : p[i];
      if (a < 0 || a >= int64_t(r) || seen[size_t(a)]) sdk::fail(NXRT_INVALID_ARGUMENT, "Transpose: perm {} is not a permutation", dims_str(p));
      seen[size_t(a)] = true;
      p[i] = a;
      od[i] = x.dim(size_t(a));
    }
    TensorView y = ctx.output(0, x.dtype(), od);
    if (y.numel() == 0) return;
    transpose(x.raw(), y.raw(), sdk::dtype_size(x.dtype()), x.dims(), p, pool);
  });
}

// --------------------------------------------------------------- Concat

std::unique_ptr<Kernel> concat_create(const Node& n, CpuSession&) {
  const int64_t axis = n.attr_int("axis", 0);
  return make_kernel([axis](Context& ctx) {
    const size_t k = ctx.input_count();
    if (k == 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Concat: no inputs");
    std::vector<ConstTensorView> in;
    for (size_t i = 0; i < k; ++i) in.push_back(ctx.input(i));
    const int64_t r = int64_t(in[0].rank());
    const int64_t a = norm_axis(axis, r, "Concat");
    std::vector<int64_t> od = in[0].dims();
    od[size_t(a)] = 0;
    for (auto& t : in) {
      if (int64_t(t.rank()) != r || t.dtype() != in[0].dtype()) sdk::fail(NXRT_INVALID_ARGUMENT, "Concat: inputs differ in rank or dtype");
      for (int64_t i = 0; i < r; ++i)
        if (i != a && t.dim(size_t(i)) != in[0].dim(size_t(i)))
          sdk::fail(NXRT_INVALID_ARGUMENT, "Concat: {} and {} differ outside axis {}", dims_str(in[0].dims()), dims_str(t.dims()), a);
      od[size_t(a)] += t.dim(size_t(a));
    }
    TensorView y = ctx.output(0, in[0].dtype(), od);
    const size_t es = sdk::dtype_size(in[0].dtype());
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < a; ++i) outer *= od[size_t(i)];
    for (int64_t i = a + 1; i < r; ++i) inner *= od[size_t(i)];
    const size_t out_row = size_t(od[size_t(a)] * inner) * es;
    size_t col = 0;
    for (auto& t : in) {
      const size_t row = size_t(t.dim(size_t(a)) * inner) * es;
      if (row == 0) continue;  // an empty input has no data pointer: memcpy(_, nullptr, 0) is undefined
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(static_cast<char*>(y.raw()) + size_t(o) * out_row + col, static_cast<const char*>(t.raw()) + size_t(o) * row, row);
      col += row;
    }
  });
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
      if (__builtin_mul_overflow(x.dim(d), rep[d], &od[d]))
        sdk::fail(NXRT_INVALID_ARGUMENT, "Tile: dimension {} ({}) times repeat {} overflows int64", d, x.dim(d), rep[d]);
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

// ------------------------------------------------- DepthToSpace, SpaceToDepth

std::unique_ptr<Kernel> d2s_create(const Node& n, CpuSession&, bool to_space) {
  const int64_t b = n.attr_int("blocksize", 0);
  const bool crd = n.attr_string("mode", "DCR") == "CRD";
  return make_kernel([b, crd, to_space](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    if (x.rank() != 4 || b < 1) sdk::fail(NXRT_INVALID_ARGUMENT, "DepthToSpace/SpaceToDepth: 4-D input and blocksize >= 1");
    const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
    std::vector<int64_t> od;
    if (to_space) {
      if (C % (b * b)) sdk::fail(NXRT_INVALID_ARGUMENT, "DepthToSpace: channels {} not divisible by {}", C, b * b);
      od = {N, C / (b * b), H * b, W * b};
    } else {
      if (H % b || W % b) sdk::fail(NXRT_INVALID_ARGUMENT, "SpaceToDepth: {}x{} not divisible by {}", H, W, b);
      od = {N, C * b * b, H / b, W / b};
    }
    TensorView y = ctx.output(0, x.dtype(), od);
    dispatch_size(sdk::dtype_size(x.dtype()), [&](auto tag) {
      using U = decltype(tag);
      const U* xp = static_cast<const U*>(x.raw());
      U* yp = static_cast<U*>(y.raw());
      // Small C' x b x b x H' x W' walk over the "space" side tensor.
      const int64_t Cs = to_space ? od[1] : C, Hs = to_space ? H : od[2], Ws = to_space ? W : od[3];
      for (int64_t nn = 0; nn < N; ++nn)
        for (int64_t c = 0; c < Cs; ++c)
          for (int64_t i = 0; i < b; ++i)
            for (int64_t j = 0; j < b; ++j) {
              const int64_t dc = crd ? (c * b + i) * b + j : (i * b + j) * Cs + c;  // depth-side channel
              for (int64_t h = 0; h < Hs; ++h)
                for (int64_t w = 0; w < Ws; ++w) {
                  const int64_t depth_off = ((nn * Cs * b * b + dc) * Hs + h) * Ws + w;
                  const int64_t space_off = ((nn * Cs + c) * Hs * b + h * b + i) * Ws * b + w * b + j;
                  if (to_space) yp[space_off] = xp[depth_off];
                  else yp[depth_off] = xp[space_off];
                }
            }
    });
  });
}

// --------------------------------------------------------- ReverseSequence

std::unique_ptr<Kernel> revseq_create(const Node& n, CpuSession&) {
  const int64_t batch_axis = n.attr_int("batch_axis", 1), time_axis = n.attr_int("time_axis", 0);
  return make_kernel([batch_axis, time_axis](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const auto lens = read_ints(ctx.input(1), "ReverseSequence", "sequence_lens");
    if (x.rank() < 2) sdk::fail(NXRT_INVALID_ARGUMENT, "ReverseSequence: rank must be >= 2");
    const int64_t ba = norm_axis(batch_axis, int64_t(x.rank()), "ReverseSequence");
    const int64_t ta = norm_axis(time_axis, int64_t(x.rank()), "ReverseSequence");
    if (ba == ta || (ba > 1 || ta > 1)) sdk::fail(NXRT_INVALID_ARGUMENT, "ReverseSequence: batch/time axes must be 0 and 1");
    const int64_t B = x.dim(size_t(ba)), T = x.dim(size_t(ta));
    if (int64_t(lens.size()) != B) sdk::fail(NXRT_INVALID_ARGUMENT, "ReverseSequence: {} lengths for batch {}", lens.size(), B);
    const int64_t inner = x.numel() / std::max<int64_t>(1, B * T);
    TensorView y = ctx.output(0, x.dtype(), x.dims());
    const size_t es = sdk::dtype_size(x.dtype()), row = size_t(inner) * es;
    const char* xp = static_cast<const char*>(x.raw());
    char* yp = static_cast<char*>(y.raw());
    for (int64_t b = 0; b < B; ++b) {
      const int64_t l = std::clamp(lens[size_t(b)], int64_t(0), T);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t src = t < l ? l - 1 - t : t;
        auto off = [&](int64_t tt) { return size_t(ta == 0 ? tt * B + b : b * T + tt) * row; };
        std::memcpy(yp + off(t), xp + off(src), row);
      }
    }
  });
}

// ------------------------------------------------------------------- Trilu

std::unique_ptr<Kernel> trilu_create(const Node& n, CpuSession&) {
  const bool upper = n.attr_int("upper", 1) != 0;
  return make_kernel([upper](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    if (x.rank() < 2) sdk::fail(NXRT_INVALID_ARGUMENT, "Trilu: input must have rank >= 2");
    int64_t k = 0;
    if (auto t = ctx.optional_input(1)) {
      const auto v = read_ints(*t, "Trilu", "k");
      if (v.size() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "Trilu: k must be a scalar");
      k = v[0];
    }
    TensorView y = ctx.output(0, x.dtype(), x.dims());
    if (x.numel() == 0) return;
    std::memcpy(y.raw(), x.raw(), x.bytes());
    const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1), mats = x.numel() / (rows * cols);
    const size_t es = sdk::dtype_size(x.dtype());
    char* yp = static_cast<char*>(y.raw());
    for (int64_t m = 0; m < mats; ++m)
      for (int64_t i = 0; i < rows; ++i) {
        char* row = yp + size_t((m * rows + i) * cols) * es;
        // upper keeps j >= i + k; lower keeps j <= i + k.
        const int64_t lim = std::clamp(i + k + (upper ? 0 : 1), int64_t(0), cols);
        if (upper) std::memset(row, 0, size_t(lim) * es);
        else std::memset(row + size_t(lim) * es, 0, size_t(cols - lim) * es);
      }
  });
}

}  // namespace

void register_data_movement_ops(Registry& r) {
  r.add(Def{"Transpose", "", 1, INT_MAX, [](const Node& n) { return data_types(n, SIZE_MAX); }, transpose_create});
  r.add(Def{"Concat", "", 4, INT_MAX, [](const Node& n) { return movable_types(n, SIZE_MAX); }, concat_create});
  r.add(Def{"Split", "", 2, 12, [](const Node& n) { return split_check(n, false); },
            [](const Node& n, CpuSession& s) { return split_create(n, s, false); }});
  r.add(Def{"Split", "", 13, INT_MAX, [](const Node& n) { return split_check(n, true); },
            [](const Node& n, CpuSession& s) { return split_create(n, s, true); }});
  r.add(Def{"Slice", "", 1, 9,
            [](const Node& n) {
              if (auto c = data_types(n, 1)) return c;
              return known_attrs(n, {"starts", "ends", "axes"});
            },
            slice1_create});
  r.add(Def{"Slice", "", 10, INT_MAX, slice10_check, slice10_create});
  r.add(Def{"Pad", "", 2, 10, [](const Node& n) { return pad_check(n, 2); }, pad2_create});
  r.add(Def{"Pad", "", 11, 18, [](const Node& n) { return pad_check(n, 11); }, pad11_create});
  r.add(Def{"Pad", "", 19, INT_MAX, [](const Node& n) { return pad_check(n, 19); }, pad11_create});
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
  r.add(Def{"DepthToSpace", "", 1, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = data_types(n, SIZE_MAX)) return c;
              const std::string m = n.attr_string("mode", "DCR");
              if (m != "DCR" && m != "CRD") return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "DepthToSpace: mode '{}'", m);
              return known_attrs(n, {"blocksize", "mode"});
            },
            [](const Node& n, CpuSession& s) { return d2s_create(n, s, true); }});
  r.add(Def{"SpaceToDepth", "", 1, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = data_types(n, SIZE_MAX)) return c;
              return known_attrs(n, {"blocksize"});
            },
            [](const Node& n, CpuSession& s) { return d2s_create(n, s, false); }});
  r.add(Def{"ReverseSequence", "", 10, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = data_types(n, 1)) return c;
              if (auto c = index_dtype(n, 1, "sequence_lens", false)) return c;
              return known_attrs(n, {"batch_axis", "time_axis"});
            },
            revseq_create});
  r.add(Def{"Trilu", "", 14, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = data_types(n, 1)) return c;
              if (auto c = index_dtype(n, 1, "k", false)) return c;
              return known_attrs(n, {"upper"});
            },
            trilu_create});
}

}  // namespace nxrt::cpu
