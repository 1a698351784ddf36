// Reductions and scans: ReduceSum/Mean/Max/Min/Prod/SumSquare/L1/L2/LogSum/
// LogSumExp (axes as an attribute before opset 18 (ReduceSum: 13), as an
// input after; keepdims, noop_with_empty_axes), ArgMax/ArgMin, CumSum.
#include <cstring>
#include <string>

#include "ops.hpp"

namespace nxrt::cpu {
namespace {

constexpr nxrt_dtype kSumTypes[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT32, NXRT_DTYPE_INT64};
constexpr nxrt_dtype kMaxTypes[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT32,
                                    NXRT_DTYPE_INT64,   NXRT_DTYPE_UINT8,   NXRT_DTYPE_INT8};

template <typename F>
void dispatch_reduce_type(nxrt_dtype t, const char* op, F&& f) {
  switch (t) {
    case NXRT_DTYPE_FLOAT32: f(float{}); break;
    case NXRT_DTYPE_FLOAT64: f(double{}); break;
    case NXRT_DTYPE_INT32: f(int32_t{}); break;
    case NXRT_DTYPE_INT64: f(int64_t{}); break;
    case NXRT_DTYPE_UINT8: f(uint8_t{}); break;
    case NXRT_DTYPE_INT8: f(int8_t{}); break;
    default: sdk::fail(NXRT_INVALID_ARGUMENT, "{}: dtype {} is not supported", op, sdk::dtype_name(t));
  }
}

Def reduce_def(const char* op, ReduceOp kind, int since, int until, bool axes_input, std::span<const nxrt_dtype> types) {
  std::vector<nxrt_dtype> tv(types.begin(), types.end());
  auto check = [tv, axes_input](const Node& n) -> Check {
    if (auto r = sdk::require_dtypes(n, tv, 0, 1)) return r;
    if (axes_input)
      if (auto r = index_dtype(n, 1, "axes", false)) return r;
    return known_attrs(n, {"axes", "keepdims", "noop_with_empty_axes"});
  };
  auto create = [kind, axes_input, name = std::string(op)](const Node& n, CpuSession& s) {
    const std::vector<int64_t> attr_axes = n.attr_ints("axes");
    const bool keep = n.attr_int("keepdims", 1) != 0;
    const bool noop = n.attr_int("noop_with_empty_axes", 0) != 0;
    ThreadPool* pool = s.pool();
    return make_kernel([kind, axes_input, name, attr_axes, keep, noop, pool](Context& ctx) {
      ConstTensorView x = ctx.input(0);
      std::vector<int64_t> axes = attr_axes;
      if (axes_input)
        if (auto t = ctx.optional_input(1)) axes = read_ints(*t, name.c_str(), "axes");
      const int64_t r = int64_t(x.rank());
      if (axes.empty() && noop) {
        TensorView y = ctx.output(0, x.dtype(), x.dims());
        if (x.bytes()) std::memcpy(y.raw(), x.raw(), x.bytes());
        return;
      }
      std::vector<bool> flags(size_t(r), axes.empty());
      for (auto a : axes) flags[size_t(norm_axis(a, r, name.c_str()))] = true;
      std::vector<int64_t> od;
      for (int64_t d = 0; d < r; ++d) {
        if (!flags[size_t(d)]) od.push_back(x.dim(size_t(d)));
        else if (keep) od.push_back(1);
      }
      TensorView y = ctx.output(0, x.dtype(), od);
      dispatch_reduce_type(x.dtype(), name.c_str(), [&](auto tag) {
        using T = decltype(tag);
        reduce<T>(kind, x.data<T>(), x.dims(), flags, y.data<T>(), pool);
      });
    });
  };
  return Def{op, "", since, until, check, create};
}

void add_reduce(Registry& r, const char* op, ReduceOp kind, int split_opset, std::span<const nxrt_dtype> types) {
  r.add(reduce_def(op, kind, 1, split_opset - 1, false, types));
  r.add(reduce_def(op, kind, split_opset, INT_MAX, true, types));
}

Def arg_def(const char* op, bool is_max) {
  auto check = [](const Node& n) -> Check {
    if (auto r = sdk::require_dtypes(n, kMaxTypes, 0, 1)) return r;
    if (n.output(0).dtype() != NXRT_DTYPE_INT64) return sdk::refuse(NXRT_REFUSE_DTYPE, "{}: output must be int64", n.op_type());
    return known_attrs(n, {"axis", "keepdims", "select_last_index"});
  };
  auto create = [is_max, name = std::string(op)](const Node& n, CpuSession&) {
    const int64_t axis = n.attr_int("axis", 0);
    const bool keep = n.attr_int("keepdims", 1) != 0;
    const bool last = n.attr_int("select_last_index", 0) != 0;
    return make_kernel([is_max, name, axis, keep, last](Context& ctx) {
      ConstTensorView x = ctx.input(0);
      const int64_t r = int64_t(x.rank());
      const int64_t a = norm_axis(axis, r, name.c_str());
      if (x.dim(size_t(a)) == 0) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: axis {} is empty", name, a);
      std::vector<int64_t> od;
      for (int64_t d = 0; d < r; ++d) {
        if (d != a) od.push_back(x.dim(size_t(d)));
        else if (keep) od.push_back(1);
      }
      TensorView y = ctx.output(0, NXRT_DTYPE_INT64, od);
      if (y.numel() == 0) return;
      dispatch_reduce_type(x.dtype(), name.c_str(), [&](auto tag) {
        using T = decltype(tag);
        arg_reduce<T>(is_max, last, x.data<T>(), x.dims(), a, y.data<int64_t>());
      });
    });
  };
  return Def{op, "", 1, INT_MAX, check, create};
}
constexpr nxrt_dtype kCumTypes[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT32,
                                    NXRT_DTYPE_INT64,   NXRT_DTYPE_UINT32,  NXRT_DTYPE_UINT64};

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

}  // namespace

void register_reduce_ops(Registry& r) {
  add_reduce(r, "ReduceSum", ReduceOp::Sum, 13, kSumTypes);
  add_reduce(r, "ReduceMean", ReduceOp::Mean, 18, kFloat);
  add_reduce(r, "ReduceMax", ReduceOp::Max, 18, kMaxTypes);
  add_reduce(r, "ReduceMin", ReduceOp::Min, 18, kMaxTypes);
  add_reduce(r, "ReduceProd", ReduceOp::Prod, 18, kSumTypes);
  add_reduce(r, "ReduceSumSquare", ReduceOp::SumSquare, 18, kFloat);
  add_reduce(r, "ReduceL1", ReduceOp::L1, 18, kFloat);
  add_reduce(r, "ReduceL2", ReduceOp::L2, 18, kFloat);
  add_reduce(r, "ReduceLogSum", ReduceOp::LogSum, 18, kFloat);
  add_reduce(r, "ReduceLogSumExp", ReduceOp::LogSumExp, 18, kFloat);
  r.add(arg_def("ArgMax", true));
  r.add(arg_def("ArgMin", false));
  r.add(Def{"CumSum", "", 11, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kCumTypes, 0, 1)) return c;
              if (auto c = index_dtype(n, 1, "axis")) return c;
              return known_attrs(n, {"exclusive", "reverse"});
            },
            cumsum_create});
}

}  // namespace nxrt::cpu
