// Indexed reads and writes: Gather, GatherElements, GatherND,
// ScatterElements (and Scatter 9-10), ScatterND (reductions add/mul/max/min),
// Compress, NonZero, OneHot. Any fixed-size element type; int32/int64
// indices, negative ones counted from the end.
#include <algorithm>
#include <cstring>
#include <string>

#include "ops.hpp"

namespace nxrt::cpu {
namespace {

int64_t norm_index(int64_t v, int64_t d, const char* op) {
  if (v < -d || v >= d) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: index {} out of range for a dim of {}", op, v, d);
  return v < 0 ? v + d : v;
}

// Offset in a tensor of `dims` for the element of `idx_dims` at flat position
// i, with the coordinate on `axis` replaced by `at`.
inline int64_t elem_offset(int64_t i, std::span<const int64_t> idx_dims, std::span<const int64_t> strides, size_t axis,
                           int64_t at) {
  int64_t off = 0;
  for (size_t d = idx_dims.size(); d-- > 0;) {
    const int64_t c = i % idx_dims[d];
    i /= idx_dims[d];
    off += (d == axis ? at : c) * strides[d];
  }
  return off;
}

enum class Red { None, Add, Mul, Max, Min };

std::optional<Red> reduction_of(const std::string& s) {
  if (s == "none") return Red::None;
  if (s == "add") return Red::Add;
  if (s == "mul") return Red::Mul;
  if (s == "max") return Red::Max;
  if (s == "min") return Red::Min;
  return std::nullopt;
}

template <typename T>
inline void apply_red(Red r, T& dst, T v) {
  switch (r) {
    case Red::None: dst = v; break;
    case Red::Add: dst = T(dst + v); break;
    case Red::Mul: dst = T(dst * v); break;
    case Red::Max: dst = v > dst ? v : dst; break;
    case Red::Min: dst = v < dst ? v : dst; break;
  }
}

// Runs f(T{}) for the data dtype: any size when r == None, numeric otherwise.
template <typename F>
void dispatch_red(Red r, nxrt_dtype t, const char* op, F&& f) {
  if (r == Red::None) {
    dispatch_size(sdk::dtype_size(t), f);
    return;
  }
  dispatch_type(t, op, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: reduction on bool", op);
    else f(tag);
  });
}

Check reduction_check(const Node& n) {
  const std::string red = n.attr_string("reduction", "none");
  if (!reduction_of(red)) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: reduction '{}' is not implemented", n.op_type(), red);
  if (red != "none") {
    const auto t = n.input(0).dtype();
    bool ok = false;
    for (auto k : kNumeric) ok = ok || k == t;
    if (!ok) return sdk::refuse(NXRT_REFUSE_DTYPE, "{}: reduction on {}", n.op_type(), sdk::dtype_name(t));
  }
  return std::nullopt;
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

// --------------------------------------------- GatherElements, ScatterElements

std::unique_ptr<Kernel> gather_elements_create(const Node& n, CpuSession&) {
  const int64_t axis = n.attr_int("axis", 0);
  return make_kernel([axis](Context& ctx) {
    ConstTensorView x = ctx.input(0), ind = ctx.input(1);
    const size_t r = x.rank();
    if (ind.rank() != r) sdk::fail(NXRT_INVALID_ARGUMENT, "GatherElements: indices rank {} != data rank {}", ind.rank(), r);
    const size_t a = size_t(norm_axis(axis, int64_t(r), "GatherElements"));
    const auto idx = read_ints(ind, "GatherElements", "indices");
    const auto xs = contiguous_strides(x.dims());
    TensorView y = ctx.output(0, x.dtype(), ind.dims());
    dispatch_size(sdk::dtype_size(x.dtype()), [&](auto tag) {
      using U = decltype(tag);
      const U* xp = static_cast<const U*>(x.raw());
      U* yp = static_cast<U*>(y.raw());
      for (int64_t i = 0; i < int64_t(idx.size()); ++i)
        yp[i] = xp[elem_offset(i, ind.dims(), xs, a, norm_index(idx[size_t(i)], x.dim(a), "GatherElements"))];
    });
  });
}

std::unique_ptr<Kernel> scatter_elements_create(const Node& n, CpuSession&) {
  const int64_t axis = n.attr_int("axis", 0);
  const Red red = *reduction_of(n.attr_string("reduction", "none"));
  return make_kernel([axis, red](Context& ctx) {
    ConstTensorView x = ctx.input(0), ind = ctx.input(1), upd = ctx.input(2);
    const size_t r = x.rank();
    if (ind.rank() != r || upd.dims() != ind.dims())
      sdk::fail(NXRT_INVALID_ARGUMENT, "ScatterElements: indices {} and updates {} must match in shape and rank {}", dims_str(ind.dims()),
                dims_str(upd.dims()), r);
    const size_t a = size_t(norm_axis(axis, int64_t(r), "ScatterElements"));
    const auto idx = read_ints(ind, "ScatterElements", "indices");
    const auto xs = contiguous_strides(x.dims());
    TensorView y = ctx.output(0, x.dtype(), x.dims());
    if (x.bytes()) std::memcpy(y.raw(), x.raw(), x.bytes());
    dispatch_red(red, x.dtype(), "ScatterElements", [&](auto tag) {
      using T = decltype(tag);
      const T* up = static_cast<const T*>(upd.raw());
      T* yp = static_cast<T*>(y.raw());
      for (int64_t i = 0; i < int64_t(idx.size()); ++i)
        apply_red(red, yp[elem_offset(i, ind.dims(), xs, a, norm_index(idx[size_t(i)], x.dim(a), "ScatterElements"))], up[i]);
    });
  });
}

Check scatter_elements_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kAllFixed, 0, 1)) return r;
  if (auto r = index_dtype(n, 1, "indices")) return r;
  if (n.input(2).dtype() != n.input(0).dtype()) return sdk::refuse(NXRT_REFUSE_DTYPE, "{}: updates dtype differs", n.op_type());
  if (auto r = known_attrs(n, {"axis", "reduction"})) return r;
  return reduction_check(n);
}

// ---------------------------------------------------- GatherND, ScatterND

struct NdGeometry {
  int64_t batch = 1, tuples = 0, k = 0, slice = 1, batch_stride = 0;
  std::vector<int64_t> dim_strides;  // strides of data dims [b, b+k)
};

NdGeometry nd_geometry(const ConstTensorView& x, const ConstTensorView& ind, int64_t b, const char* op) {
  NdGeometry g;
  const int64_t r = int64_t(x.rank()), q = int64_t(ind.rank());
  if (q < 1) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: indices must have rank >= 1", op);
  g.k = ind.dim(size_t(q - 1));
  if (b < 0 || b >= q || b + g.k > r) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: batch_dims {} / index depth {} do not fit data rank {}", op, b, g.k, r);
  for (int64_t i = 0; i < b; ++i) {
    if (x.dim(size_t(i)) != ind.dim(size_t(i))) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: batch dims differ", op);
    g.batch *= x.dim(size_t(i));
  }
  g.tuples = 1;
  for (int64_t i = b; i < q - 1; ++i) g.tuples *= ind.dim(size_t(i));
  for (int64_t i = b + g.k; i < r; ++i) g.slice *= x.dim(size_t(i));
  g.dim_strides.resize(size_t(g.k));
  int64_t m = g.slice;
  for (int64_t j = g.k; j-- > 0;) {
    g.dim_strides[size_t(j)] = m;
    m *= x.dim(size_t(b + j));
  }
  g.batch_stride = m;
  return g;
}

std::unique_ptr<Kernel> gather_nd_create(const Node& n, CpuSession&) {
  const int64_t bd = n.attr_int("batch_dims", 0);
  return make_kernel([bd](Context& ctx) {
    ConstTensorView x = ctx.input(0), ind = ctx.input(1);
    const NdGeometry g = nd_geometry(x, ind, bd, "GatherND");
    const auto idx = read_ints(ind, "GatherND", "indices");
    std::vector<int64_t> od(ind.dims().begin(), ind.dims().end() - 1);
    od.insert(od.end(), x.dims().begin() + bd + g.k, x.dims().end());
    TensorView y = ctx.output(0, x.dtype(), od);
    const size_t es = sdk::dtype_size(x.dtype());
    const char* xp = static_cast<const char*>(x.raw());
    char* yp = static_cast<char*>(y.raw());
    for (int64_t bb = 0; bb < g.batch; ++bb)
      for (int64_t t = 0; t < g.tuples; ++t) {
        const int64_t* tp = idx.data() + (bb * g.tuples + t) * g.k;
        int64_t off = bb * g.batch_stride;
        for (int64_t j = 0; j < g.k; ++j) off += norm_index(tp[j], x.dim(size_t(bd + j)), "GatherND") * g.dim_strides[size_t(j)];
        std::memcpy(yp + size_t((bb * g.tuples + t) * g.slice) * es, xp + size_t(off) * es, size_t(g.slice) * es);
      }
  });
}

std::unique_ptr<Kernel> scatter_nd_create(const Node& n, CpuSession&) {
  const Red red = *reduction_of(n.attr_string("reduction", "none"));
  return make_kernel([red](Context& ctx) {
    ConstTensorView x = ctx.input(0), ind = ctx.input(1), upd = ctx.input(2);
    const NdGeometry g = nd_geometry(x, ind, 0, "ScatterND");
    if (upd.numel() != g.tuples * g.slice) sdk::fail(NXRT_INVALID_ARGUMENT, "ScatterND: updates {} do not match", dims_str(upd.dims()));
    const auto idx = read_ints(ind, "ScatterND", "indices");
    TensorView y = ctx.output(0, x.dtype(), x.dims());
    if (x.bytes()) std::memcpy(y.raw(), x.raw(), x.bytes());
    dispatch_red(red, x.dtype(), "ScatterND", [&](auto tag) {
      using T = decltype(tag);
      const T* up = static_cast<const T*>(upd.raw());
      T* yp = static_cast<T*>(y.raw());
      for (int64_t t = 0; t < g.tuples; ++t) {
        int64_t off = 0;
        for (int64_t j = 0; j < g.k; ++j) off += norm_index(idx[size_t(t * g.k + j)], x.dim(size_t(j)), "ScatterND") * g.dim_strides[size_t(j)];
        for (int64_t i = 0; i < g.slice; ++i) apply_red(red, yp[off + i], up[t * g.slice + i]);
      }
    });
  });
}

// ---------------------------------------------------------------- Compress

std::unique_ptr<Kernel> compress_create(const Node& n, CpuSession&) {
  const bool has_axis = n.has_attr("axis");
  const int64_t axis = n.attr_int("axis", 0);
  return make_kernel([has_axis, axis](Context& ctx) {
    ConstTensorView x = ctx.input(0), cond = ctx.input(1);
    if (cond.rank() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "Compress: condition must be 1-D");
    const bool* cp = cond.data<bool>();
    const size_t es = sdk::dtype_size(x.dtype());
    int64_t outer = 1, len = x.numel(), inner = 1;
    std::vector<int64_t> od;
    if (has_axis) {
      const int64_t r = int64_t(x.rank());
      const int64_t a = norm_axis(axis, r, "Compress");
      len = x.dim(size_t(a));
      for (int64_t i = 0; i < a; ++i) outer *= x.dim(size_t(i));
      for (int64_t i = a + 1; i < r; ++i) inner *= x.dim(size_t(i));
      od = x.dims();
    }
    if (cond.dim(0) > len) sdk::fail(NXRT_INVALID_ARGUMENT, "Compress: condition longer than the axis");
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < cond.dim(0); ++i)
      if (cp[i]) keep.push_back(i);
    if (has_axis) od[size_t(norm_axis(axis, int64_t(x.rank()), "Compress"))] = int64_t(keep.size());
    else od = {int64_t(keep.size())};
    TensorView y = ctx.output(0, x.dtype(), od);
    const char* xp = static_cast<const char*>(x.raw());
    char* yp = static_cast<char*>(y.raw());
    const size_t row = size_t(inner) * es;
    for (int64_t o = 0; o < outer; ++o)
      for (size_t j = 0; j < keep.size(); ++j)
        std::memcpy(yp + (size_t(o) * keep.size() + j) * row, xp + size_t(o * len + keep[j]) * row, row);
  });
}

// ----------------------------------------------------------------- NonZero

std::unique_ptr<Kernel> nonzero_create(const Node&, CpuSession&) {
  return make_kernel([](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const int64_t r = int64_t(x.rank());
    std::vector<int64_t> hits;
    dispatch_type(x.dtype(), "NonZero", [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i)
        if (xp[i] != T(0)) hits.push_back(i);
    });
    const int64_t nnz = int64_t(hits.size());
    TensorView y = ctx.output(0, NXRT_DTYPE_INT64, {r, nnz});
    int64_t* yp = y.data<int64_t>();
    for (int64_t j = 0; j < nnz; ++j) {
      int64_t rem = hits[size_t(j)];
      for (int64_t d = r; d-- > 0;) {
        yp[d * nnz + j] = rem % x.dim(size_t(d));
        rem /= x.dim(size_t(d));
      }
    }
  });
}

// ------------------------------------------------------------------ OneHot

std::vector<int64_t> read_as_int64(const ConstTensorView& t, const char* op) {
  std::vector<int64_t> v(size_t(t.numel()));
  dispatch_type(t.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t(p[i]);
  });
  return v;
}

std::unique_ptr<Kernel> onehot_create(const Node& n, CpuSession&) {
  const int64_t axis = n.attr_int("axis", -1);
  return make_kernel([axis](Context& ctx) {
    ConstTensorView ind = ctx.input(0), dep = ctx.input(1), val = ctx.input(2);
    const auto idx = read_as_int64(ind, "OneHot");
    const auto dv = read_as_int64(dep, "OneHot");
    if (dv.size() != 1 || dv[0] < 1) sdk::fail(NXRT_INVALID_ARGUMENT, "OneHot: depth must be a positive scalar");
    if (val.numel() != 2) sdk::fail(NXRT_INVALID_ARGUMENT, "OneHot: values must have 2 elements");
    const int64_t depth = dv[0], r = int64_t(ind.rank());
    const int64_t a = norm_axis(axis, r + 1, "OneHot");
    std::vector<int64_t> od = ind.dims();
    od.insert(od.begin() + a, depth);
    TensorView y = ctx.output(0, val.dtype(), od);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < a; ++i) outer *= ind.dim(size_t(i));
    for (int64_t i = a; i < r; ++i) inner *= ind.dim(size_t(i));
    dispatch_size(sdk::dtype_size(val.dtype()), [&](auto tag) {
      using U = decltype(tag);
      const U off = static_cast<const U*>(val.raw())[0], on = static_cast<const U*>(val.raw())[1];
      U* yp = static_cast<U*>(y.raw());
      std::fill(yp, yp + y.numel(), off);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t in = 0; in < inner; ++in) {
          int64_t v = idx[size_t(o * inner + in)];
          if (v < 0) v += depth;
          if (v >= 0 && v < depth) yp[(o * depth + v) * inner + in] = on;
        }
    });
  });
}

}  // namespace

void register_gather_scatter_ops(Registry& r) {
  r.add(Def{"Gather", "", 1, INT_MAX,
            [](const Node& n) {
              if (auto c = data_types(n, 1)) return c;
              if (auto c = index_dtype(n, 1, "indices")) return c;
              return known_attrs(n, {"axis"});
            },
            gather_create});
  r.add(Def{"GatherElements", "", 11, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = data_types(n, 1)) return c;
              if (auto c = index_dtype(n, 1, "indices")) return c;
              return known_attrs(n, {"axis"});
            },
            gather_elements_create});
  r.add(Def{"ScatterElements", "", 11, INT_MAX, scatter_elements_check, scatter_elements_create});
  r.add(Def{"Scatter", "", 9, 10, scatter_elements_check, scatter_elements_create});
  r.add(Def{"GatherND", "", 11, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = data_types(n, 1)) return c;
              if (auto c = index_dtype(n, 1, "indices", false)) return c;
              return known_attrs(n, {"batch_dims"});
            },
            gather_nd_create});
  r.add(Def{"ScatterND", "", 11, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kAllFixed, 0, 1)) return c;
              if (auto c = index_dtype(n, 1, "indices", false)) return c;
              if (n.input(2).dtype() != n.input(0).dtype()) return sdk::refuse(NXRT_REFUSE_DTYPE, "ScatterND: updates dtype differs");
              if (auto c = known_attrs(n, {"reduction"})) return c;
              return reduction_check(n);
            },
            scatter_nd_create});
  r.add(Def{"Compress", "", 9, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = data_types(n, 1)) return c;
              if (auto c = input_dtype_is(n, 1, NXRT_DTYPE_BOOL, "condition")) return c;
              return known_attrs(n, {"axis"});
            },
            compress_create});
  r.add(Def{"NonZero", "", 9, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kNumBool, 0, 1); }, nonzero_create});
  r.add(Def{"OneHot", "", 9, INT_MAX,
            [](const Node& n) -> Check {
              for (size_t i = 0; i < 2; ++i) {
                bool ok = false;
                for (auto t : kNumeric) ok = ok || t == n.input(i).dtype();
                if (!ok) return sdk::refuse(NXRT_REFUSE_DTYPE, "OneHot input {} is {}", i, sdk::dtype_name(n.input(i).dtype()));
              }
              if (auto c = sdk::require_dtypes(n, kAllFixed, 2)) return c;
              return known_attrs(n, {"axis"});
            },
            onehot_create});
}

}  // namespace nxrt::cpu
