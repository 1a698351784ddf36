// Indexing and layout ops: GatherElements, ScatterElements (and Scatter 9-10),
// GatherND, ScatterND, Trilu, Dropout (inference), CumSum, OneHot, TopK,
// EyeLike, DepthToSpace, SpaceToDepth, NonZero, Compress, ReverseSequence,
// LRN, MeanVarianceNormalization, Unique.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "ops_more.hpp"

namespace nxrt::cpu {
namespace {

constexpr nxrt_dtype kF32[] = {NXRT_DTYPE_FLOAT32};
constexpr nxrt_dtype kCumTypes[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT32,
                                    NXRT_DTYPE_INT64,   NXRT_DTYPE_UINT32,  NXRT_DTYPE_UINT64};
constexpr nxrt_dtype kTopKTypes[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT32, NXRT_DTYPE_INT64};
constexpr nxrt_dtype kNumBool[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT8,   NXRT_DTYPE_UINT8,
                                   NXRT_DTYPE_INT16,   NXRT_DTYPE_UINT16,  NXRT_DTYPE_INT32,  NXRT_DTYPE_UINT32,
                                   NXRT_DTYPE_INT64,   NXRT_DTYPE_UINT64,  NXRT_DTYPE_BOOL};

// Calls f(U{}) with an unsigned type of the element size.
template <typename F>
void dispatch_size(size_t es, F&& f) {
  switch (es) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: sdk::fail(NXRT_INVALID_ARGUMENT, "element size {} is not supported", es);
  }
}

Check data_types(const Node& n, size_t data_inputs = 1) {
  if (auto r = sdk::require_dtypes(n, kAllFixed, 0, data_inputs)) return r;
  return same_dtype(n, data_inputs);
}

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

// ----------------------------------------------------------------- Dropout

// Inference Dropout: Y = X, mask all true. Refused when it would be random.
Check dropout_check(const Node& n, bool inputs) {
  if (auto r = sdk::require_dtypes(n, kAllFixed, 0, 1)) return r;
  if (auto r = known_attrs(n, {"ratio", "seed"})) return r;
  if (n.has_output(1) && n.output(1).dtype() != NXRT_DTYPE_BOOL)
    return sdk::refuse(NXRT_REFUSE_DTYPE, "Dropout: mask output is {}, only bool is implemented", sdk::dtype_name(n.output(1).dtype()));
  if (inputs && n.has_input(2)) {
    auto tm = n.input(2);
    if (!tm.is_constant() || tm.dtype() != NXRT_DTYPE_BOOL)
      return sdk::refuse(NXRT_REFUSE_OTHER, "Dropout: training_mode must be a constant bool");
    const bool training = *tm.constant().data<bool>();
    if (training) {
      // Training with ratio 0 is still the identity; anything else is random.
      auto ratio = n.input(1);
      if (!ratio.present() || !ratio.is_constant() || ratio.constant().dtype() != NXRT_DTYPE_FLOAT32 ||
          ratio.constant().numel() != 1 || *ratio.constant().data<float>() != 0.f)
        return sdk::refuse(NXRT_REFUSE_OTHER, "Dropout: training_mode=true (random) is not implemented");
    }
  }
  return std::nullopt;
}

std::unique_ptr<Kernel> dropout_create(const Node& n, CpuSession&) {
  const bool mask = n.has_output(1);
  return make_kernel([mask](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, x.dtype(), x.dims());
    if (x.bytes()) std::memcpy(y.raw(), x.raw(), x.bytes());
    if (mask) {
      TensorView m = ctx.output(1, NXRT_DTYPE_BOOL, x.dims());
      bool* mp = m.data<bool>();
      std::fill(mp, mp + m.numel(), true);
    }
  });
}

// ------------------------------------------------------------------ CumSum

std::unique_ptr<Kernel> cumsum_create(const Node& n, CpuSession&) {
  const bool exclusive = n.attr_int("exclusive", 0) != 0, reverse = n.attr_int("reverse", 0) != 0;
  return make_kernel([exclusive, reverse](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const auto av = read_ints(ctx.input(1), "CumSum", "axis");
    if (av.size() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "CumSum: axis must be a scalar");
    const int64_t r = int64_t(x.rank());
    const int64_t a = norm_axis(av[0], r, "CumSum");
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < a; ++i) outer *= x.dim(size_t(i));
    for (int64_t i = a + 1; i < r; ++i) inner *= x.dim(size_t(i));
    const int64_t len = x.dim(size_t(a));
    TensorView y = ctx.output(0, x.dtype(), x.dims());
    dispatch_type(x.dtype(), "CumSum", [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t in = 0; in < inner; ++in) {
          T acc = T(0);
          for (int64_t s = 0; s < len; ++s) {
            const int64_t k = reverse ? len - 1 - s : s;
            const int64_t off = (o * len + k) * inner + in;
            if (exclusive) {
              yp[off] = acc;
              acc = T(acc + xp[off]);
            } else {
              acc = T(acc + xp[off]);
              yp[off] = acc;
            }
          }
        }
    });
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

// -------------------------------------------------------------------- TopK

std::unique_ptr<Kernel> topk_create(const Node& n, CpuSession&, bool k_input) {
  const int64_t axis = n.attr_int("axis", -1);
  const bool largest = n.attr_int("largest", 1) != 0;
  const int64_t k_attr = n.attr_int("k", 0);
  return make_kernel([axis, largest, k_attr, k_input](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    int64_t k = k_attr;
    if (k_input) {
      const auto kv = read_ints(ctx.input(1), "TopK", "K");
      if (kv.size() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "TopK: K must have one element");
      k = kv[0];
    }
    const int64_t r = int64_t(x.rank());
    const int64_t a = norm_axis(axis, r, "TopK");
    const int64_t len = x.dim(size_t(a));
    if (k < 0 || k > len) sdk::fail(NXRT_INVALID_ARGUMENT, "TopK: k {} out of range for axis of {}", k, len);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < a; ++i) outer *= x.dim(size_t(i));
    for (int64_t i = a + 1; i < r; ++i) inner *= x.dim(size_t(i));
    std::vector<int64_t> od = x.dims();
    od[size_t(a)] = k;
    TensorView vals = ctx.output(0, x.dtype(), od);
    TensorView inds = ctx.output(1, NXRT_DTYPE_INT64, od);
    dispatch_type(x.dtype(), "TopK", [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      T* vp = vals.data<T>();
      int64_t* ip = inds.data<int64_t>();
      std::vector<int64_t> order(static_cast<size_t>(len));
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t in = 0; in < inner; ++in) {
          const T* col = xp + o * len * inner + in;
          std::iota(order.begin(), order.end(), int64_t(0));
          auto cmp = [&](int64_t p, int64_t q) {
            const T u = col[p * inner], v = col[q * inner];
            if (u != v) return largest ? u > v : u < v;
            return p < q;
          };
          std::partial_sort(order.begin(), order.begin() + k, order.end(), cmp);
          for (int64_t j = 0; j < k; ++j) {
            const int64_t off = (o * k + j) * inner + in;
            vp[off] = col[order[size_t(j)] * inner];
            ip[off] = order[size_t(j)];
          }
        }
    });
  });
}

Check topk_check(const Node& n, bool k_input) {
  if (auto r = sdk::require_dtypes(n, kTopKTypes, 0, 1)) return r;
  if (n.output(0).dtype() != n.input(0).dtype() || n.output(1).dtype() != NXRT_DTYPE_INT64)
    return sdk::refuse(NXRT_REFUSE_DTYPE, "TopK: output dtypes");
  if (k_input)
    if (auto r = index_dtype(n, 1, "K", false)) return r;
  return known_attrs(n, {"axis", "largest", "sorted", "k"});
}

// ----------------------------------------------------------------- EyeLike

std::unique_ptr<Kernel> eyelike_create(const Node& n, CpuSession&) {
  const int64_t k = n.attr_int("k", 0);
  const nxrt_dtype dt = n.output(0).dtype();
  return make_kernel([k, dt](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    if (x.rank() != 2) sdk::fail(NXRT_INVALID_ARGUMENT, "EyeLike: input must be 2-D");
    TensorView y = ctx.output(0, dt, x.dims());
    if (y.bytes()) std::memset(y.raw(), 0, y.bytes());
    dispatch_type(dt, "EyeLike", [&](auto tag) {
      using T = decltype(tag);
      T* yp = static_cast<T*>(y.raw());
      for (int64_t i = 0; i < x.dim(0); ++i) {
        const int64_t j = i + k;
        if (j >= 0 && j < x.dim(1)) yp[i * x.dim(1) + j] = T(1);
      }
    });
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

// --------------------------------------------------------------------- LRN

std::unique_ptr<Kernel> lrn_create(const Node& n, CpuSession&) {
  const double alpha = n.attr_float("alpha", 1e-4f), beta = n.attr_float("beta", 0.75f), bias = n.attr_float("bias", 1.f);
  const int64_t size = n.attr_int("size", 1);
  return make_kernel([alpha, beta, bias, size](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    if (x.rank() < 3) sdk::fail(NXRT_INVALID_ARGUMENT, "LRN: input must have rank >= 3");
    const int64_t N = x.dim(0), C = x.dim(1), sp = x.numel() / std::max<int64_t>(1, N * C);
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
    for (int64_t nn = 0; nn < N; ++nn)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t s = 0; s < sp; ++s) {
          double sq = 0;
          for (int64_t cc = std::max<int64_t>(0, c - lo); cc <= std::min(C - 1, c + hi); ++cc) {
            const double v = xp[(nn * C + cc) * sp + s];
            sq += v * v;
          }
          const int64_t off = (nn * C + c) * sp + s;
          yp[off] = float(xp[off] / std::pow(bias + alpha / double(size) * sq, beta));
        }
  });
}

// ----------------------------------------------- MeanVarianceNormalization

std::unique_ptr<Kernel> mvn_create(const Node& n, CpuSession& s) {
  const std::vector<int64_t> axes = n.attr_ints("axes", {0, 2, 3});
  ThreadPool* pool = s.pool();
  return make_kernel([axes, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const int64_t r = int64_t(x.rank());
    std::vector<bool> flags(size_t(r), false);
    for (auto a : axes) flags[size_t(norm_axis(a, r, "MeanVarianceNormalization"))] = true;
    std::vector<int64_t> md = x.dims();
    for (size_t d = 0; d < md.size(); ++d)
      if (flags[d]) md[d] = 1;
    const int64_t m = sdk::element_count(md);
    std::vector<float> mean(static_cast<size_t>(m)), meansq(static_cast<size_t>(m));
    std::vector<float> sq(static_cast<size_t>(x.numel()));
    const float* xp = x.data<float>();
    for (size_t i = 0; i < sq.size(); ++i) sq[i] = xp[i] * xp[i];
    reduce<float>(ReduceOp::Mean, xp, x.dims(), flags, mean.data(), pool);
    reduce<float>(ReduceOp::Mean, sq.data(), x.dims(), flags, meansq.data(), pool);
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    float* yp = y.data<float>();
    const std::array<std::vector<int64_t>, 2> st = {contiguous_strides(x.dims()), broadcast_strides(md, x.dims())};
    broadcast_rows<2>(x.dims(), st, pool, [&](int64_t o, int64_t cnt, const int64_t* off, const int64_t* in) {
      for (int64_t i = 0; i < cnt; ++i) {
        const int64_t k = off[1] + i * in[1];
        const double mu = mean[size_t(k)];
        const double sd = std::sqrt(std::max(0.0, double(meansq[size_t(k)]) - mu * mu));
        yp[o + i] = float((double(xp[off[0] + i * in[0]]) - mu) / (sd + 1e-9));
      }
    });
  });
}

// ------------------------------------------------------------------ Unique

std::unique_ptr<Kernel> unique_create(const Node& n, CpuSession&) {
  const bool has_axis = n.has_attr("axis");
  const int64_t axis = n.attr_int("axis", 0);
  const bool sorted = n.attr_int("sorted", 1) != 0;
  const bool want1 = n.has_output(1), want2 = n.has_output(2), want3 = n.has_output(3);
  return make_kernel([has_axis, axis, sorted, want1, want2, want3](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    int64_t outer = 1, len = x.numel(), inner = 1, a = 0;
    if (has_axis) {
      a = norm_axis(axis, int64_t(x.rank()), "Unique");
      len = x.dim(size_t(a));
      for (int64_t i = 0; i < a; ++i) outer *= x.dim(size_t(i));
      for (size_t i = size_t(a) + 1; i < x.rank(); ++i) inner *= x.dim(i);
    }
    dispatch_type(x.dtype(), "Unique", [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      // Slice k = x[o, k, i] for all (o, i), compared in that order.
      auto cmp = [&](int64_t p, int64_t q) {
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i) {
            const T u = xp[(o * len + p) * inner + i], v = xp[(o * len + q) * inner + i];
            if (u < v) return -1;
            if (v < u) return 1;
          }
        return 0;
      };
      std::vector<int64_t> order(static_cast<size_t>(len));
      std::iota(order.begin(), order.end(), int64_t(0));
      std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) { return cmp(p, q) < 0; });
      // Groups of equal slices (first member = first occurrence, thanks to the stable sort).
      std::vector<int64_t> first, count, group_of(static_cast<size_t>(len));
      for (size_t j = 0; j < order.size(); ++j) {
        if (j == 0 || cmp(order[j - 1], order[j]) != 0) {
          first.push_back(order[j]);
          count.push_back(0);
        }
        group_of[size_t(order[j])] = int64_t(first.size()) - 1;
        ++count.back();
      }
      // Output order: sorted (group order) or by first occurrence.
      const int64_t u = int64_t(first.size());
      std::vector<int64_t> rank(static_cast<size_t>(u));
      std::iota(rank.begin(), rank.end(), int64_t(0));
      if (!sorted) std::sort(rank.begin(), rank.end(), [&](int64_t p, int64_t q) { return first[size_t(p)] < first[size_t(q)]; });
      std::vector<int64_t> pos(static_cast<size_t>(u));
      for (int64_t j = 0; j < u; ++j) pos[size_t(rank[size_t(j)])] = j;
      std::vector<int64_t> od = has_axis ? x.dims() : std::vector<int64_t>{u};
      if (has_axis) od[size_t(a)] = u;
      TensorView y = ctx.output(0, x.dtype(), od);
      T* yp = y.data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < u; ++j)
          for (int64_t i = 0; i < inner; ++i) yp[(o * u + j) * inner + i] = xp[(o * len + first[size_t(rank[size_t(j)])]) * inner + i];
      if (want1) {
        TensorView t = ctx.output(1, NXRT_DTYPE_INT64, {u});
        for (int64_t j = 0; j < u; ++j) t.data<int64_t>()[j] = first[size_t(rank[size_t(j)])];
      }
      if (want2) {
        TensorView t = ctx.output(2, NXRT_DTYPE_INT64, {len});
        for (int64_t k = 0; k < len; ++k) t.data<int64_t>()[k] = pos[size_t(group_of[size_t(k)])];
      }
      if (want3) {
        TensorView t = ctx.output(3, NXRT_DTYPE_INT64, {u});
        for (int64_t j = 0; j < u; ++j) t.data<int64_t>()[j] = count[size_t(rank[size_t(j)])];
      }
    });
  });
}

}  // namespace

void register_gather_ops(Registry& r) {
  r.add(Def{"Unique", "", 11, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kNumeric, 0, 1)) return c;
              if (n.output(0).dtype() != n.input(0).dtype()) return sdk::refuse(NXRT_REFUSE_DTYPE, "Unique: output dtype");
              return known_attrs(n, {"axis", "sorted"});
            },
            unique_create});
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
  r.add(Def{"Trilu", "", 14, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = data_types(n, 1)) return c;
              if (auto c = index_dtype(n, 1, "k", false)) return c;
              return known_attrs(n, {"upper"});
            },
            trilu_create});
  r.add(Def{"Dropout", "", 7, 11, [](const Node& n) { return dropout_check(n, false); }, dropout_create});
  r.add(Def{"Dropout", "", 12, INT_MAX, [](const Node& n) { return dropout_check(n, true); }, dropout_create});
  r.add(Def{"CumSum", "", 11, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kCumTypes, 0, 1)) return c;
              if (auto c = index_dtype(n, 1, "axis")) return c;
              return known_attrs(n, {"exclusive", "reverse"});
            },
            cumsum_create});
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
  r.add(Def{"TopK", "", 1, 9, [](const Node& n) { return topk_check(n, false); },
            [](const Node& n, CpuSession& s) { return topk_create(n, s, false); }});
  r.add(Def{"TopK", "", 10, INT_MAX, [](const Node& n) { return topk_check(n, true); },
            [](const Node& n, CpuSession& s) { return topk_create(n, s, true); }});
  r.add(Def{"EyeLike", "", 9, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kNumBool)) return c;
              return known_attrs(n, {"k", "dtype"});
            },
            eyelike_create});
  r.add(Def{"DepthToSpace", "", 1, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = data_types(n)) return c;
              const std::string m = n.attr_string("mode", "DCR");
              if (m != "DCR" && m != "CRD") return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "DepthToSpace: mode '{}'", m);
              return known_attrs(n, {"blocksize", "mode"});
            },
            [](const Node& n, CpuSession& s) { return d2s_create(n, s, true); }});
  r.add(Def{"SpaceToDepth", "", 1, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = data_types(n)) return c;
              return known_attrs(n, {"blocksize"});
            },
            [](const Node& n, CpuSession& s) { return d2s_create(n, s, false); }});
  r.add(Def{"NonZero", "", 9, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kNumBool, 0, 1); }, nonzero_create});
  r.add(Def{"Compress", "", 9, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = data_types(n, 1)) return c;
              if (auto c = input_dtype_is(n, 1, NXRT_DTYPE_BOOL, "condition")) return c;
              return known_attrs(n, {"axis"});
            },
            compress_create});
  r.add(Def{"ReverseSequence", "", 10, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = data_types(n, 1)) return c;
              if (auto c = index_dtype(n, 1, "sequence_lens", false)) return c;
              return known_attrs(n, {"batch_axis", "time_axis"});
            },
            revseq_create});
  r.add(Def{"LRN", "", 1, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kF32)) return c;
              return known_attrs(n, {"alpha", "beta", "bias", "size"});
            },
            lrn_create});
  r.add(Def{"MeanVarianceNormalization", "", 9, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kF32)) return c;
              return known_attrs(n, {"axes"});
            },
            mvn_create});
}

}  // namespace nxrt::cpu
