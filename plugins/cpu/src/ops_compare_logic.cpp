// Comparisons (bool output), logical Not/And/Or/Xor, BitShift and Bitwise*, and
// Where (select by a bool condition); numpy broadcasting.
#include <string>
#include <type_traits>

#include "ops.hpp"

namespace nxrt::cpu {
namespace {

constexpr nxrt_dtype kUnsigned[] = {NXRT_DTYPE_UINT8, NXRT_DTYPE_UINT16, NXRT_DTYPE_UINT32, NXRT_DTYPE_UINT64};
constexpr nxrt_dtype kInts[] = {NXRT_DTYPE_INT8, NXRT_DTYPE_UINT8, NXRT_DTYPE_INT16, NXRT_DTYPE_UINT16,
                                NXRT_DTYPE_INT32, NXRT_DTYPE_UINT32, NXRT_DTYPE_INT64, NXRT_DTYPE_UINT64};
constexpr nxrt_dtype kEqualTypes[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT8,   NXRT_DTYPE_UINT8,
                                      NXRT_DTYPE_INT16,   NXRT_DTYPE_UINT16,  NXRT_DTYPE_INT32,  NXRT_DTYPE_UINT32,
                                      NXRT_DTYPE_INT64,   NXRT_DTYPE_UINT64,  NXRT_DTYPE_BOOL};
constexpr nxrt_dtype kBool[] = {NXRT_DTYPE_BOOL};

// ------------------------------------------------------------ comparisons

enum class Cmp { Eq, Lt, Gt, Le, Ge };

Def compare_def(const char* op, Cmp c, int since, bool with_bool) {
  auto check = [with_bool](const Node& n) -> Check {
    if (auto r = with_bool ? typed_same(n, kEqualTypes) : typed_same(n, kNumeric)) return r;
    if (n.output(0).dtype() != NXRT_DTYPE_BOOL) return sdk::refuse(NXRT_REFUSE_DTYPE, "{}: output is not bool", n.op_type());
    return attrs_in(n, {});
  };
  auto create = [c, name = std::string(op)](const Node&, CpuSession& s) {
    ThreadPool* pool = s.pool();
    return make_kernel([c, name, pool](Context& ctx) {
      ConstTensorView a = ctx.input(0), b = ctx.input(1);
      const auto od = out_shape2(a, b, name);
      TensorView y = ctx.output(0, NXRT_DTYPE_BOOL, od);
      if (y.numel() == 0) return;
      bool* yp = y.data<bool>();
      dispatch_type(a.dtype(), name.c_str(), [&](auto tag) {
        using T = decltype(tag);
        const T* ap = a.data<T>();
        const T* bp = b.data<T>();
        switch (c) {
          case Cmp::Eq: broadcast_binary(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return u == v; }); break;
          case Cmp::Lt: broadcast_binary(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return u < v; }); break;
          case Cmp::Gt: broadcast_binary(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return u > v; }); break;
          case Cmp::Le: broadcast_binary(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return u <= v; }); break;
          case Cmp::Ge: broadcast_binary(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return u >= v; }); break;
        }
      });
    });
  };
  return Def{op, "", since, INT_MAX, check, create};
}

// --------------------------------------------------------- logic, bitwise

enum class Logic { And, Or, Xor };

Def logic_def(const char* op, Logic l) {
  auto create = [l, name = std::string(op)](const Node&, CpuSession& s) {
    ThreadPool* pool = s.pool();
    return make_kernel([l, name, pool](Context& ctx) {
      ConstTensorView a = ctx.input(0), b = ctx.input(1);
      const auto od = out_shape2(a, b, name);
      TensorView y = ctx.output(0, NXRT_DTYPE_BOOL, od);
      if (y.numel() == 0) return;
      const bool* ap = a.data<bool>();
      const bool* bp = b.data<bool>();
      bool* yp = y.data<bool>();
      switch (l) {
        case Logic::And: broadcast_binary(ap, a.dims(), bp, b.dims(), yp, od, pool, [](bool u, bool v) { return u && v; }); break;
        case Logic::Or: broadcast_binary(ap, a.dims(), bp, b.dims(), yp, od, pool, [](bool u, bool v) { return u || v; }); break;
        case Logic::Xor: broadcast_binary(ap, a.dims(), bp, b.dims(), yp, od, pool, [](bool u, bool v) { return u != v; }); break;
      }
    });
  };
  return Def{op, "", 7, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kBool); }, create};
}

std::unique_ptr<Kernel> not_create(const Node&, CpuSession&) {
  return make_kernel([](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, NXRT_DTYPE_BOOL, x.dims());
    const bool* xp = x.data<bool>();
    bool* yp = y.data<bool>();
    for (int64_t i = 0; i < x.numel(); ++i) yp[i] = !xp[i];
  });
}

enum class Bits { And, Or, Xor, Left, Right };

Def bitwise_def(const char* op, Bits kind, int since) {
  auto check = [kind](const Node& n) -> Check {
    if (kind == Bits::Left || kind == Bits::Right) {
      if (auto r = typed_same(n, kUnsigned)) return r;
      return attrs_in(n, {"direction"});
    }
    if (auto r = typed_same(n, kInts)) return r;
    return attrs_in(n, {});
  };
  auto create = [kind, name = std::string(op)](const Node& n, CpuSession& s) {
    Bits k = kind;
    if (k == Bits::Left || k == Bits::Right) {
      const std::string dir = n.attr_string("direction", "");
      if (dir == "LEFT") k = Bits::Left;
      else if (dir == "RIGHT") k = Bits::Right;
      else sdk::fail(NXRT_INVALID_ARGUMENT, "BitShift: direction '{}' must be LEFT or RIGHT", dir);
    }
    ThreadPool* pool = s.pool();
    return make_kernel([k, name, pool](Context& ctx) {
      ConstTensorView a = ctx.input(0), b = ctx.input(1);
      const auto od = out_shape2(a, b, name);
      TensorView y = ctx.output(0, a.dtype(), od);
      if (y.numel() == 0) return;
      dispatch_type(a.dtype(), name.c_str(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          const T* ap = a.data<T>();
          const T* bp = b.data<T>();
          T* yp = y.data<T>();
          constexpr T bits = T(sizeof(T) * 8);
          switch (k) {
            case Bits::And: broadcast_binary(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return T(u & v); }); break;
            case Bits::Or: broadcast_binary(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return T(u | v); }); break;
            case Bits::Xor: broadcast_binary(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return T(u ^ v); }); break;
            case Bits::Left:
              broadcast_binary(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return v >= bits ? T(0) : T(u << v); });
              break;
            case Bits::Right:
              broadcast_binary(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return v >= bits ? T(0) : T(u >> v); });
              break;
          }
        } else {
          sdk::fail(NXRT_INVALID_ARGUMENT, "{}: dtype {} is not supported", name, sdk::dtype_name(a.dtype()));
        }
      });
    });
  };
  return Def{op, "", since, INT_MAX, check, create};
}

std::unique_ptr<Kernel> bitwise_not_create(const Node&, CpuSession&) {
  return make_kernel([](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, x.dtype(), x.dims());
    dispatch_type(x.dtype(), "BitwiseNot", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        const T* xp = x.data<T>();
        T* yp = y.data<T>();
        for (int64_t i = 0; i < x.numel(); ++i) yp[i] = T(~xp[i]);
      }
    });
  });
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

void register_compare_logic_ops(Registry& r) {
  r.add(compare_def("Equal", Cmp::Eq, 7, true));
  r.add(compare_def("Less", Cmp::Lt, 7, false));
  r.add(compare_def("Greater", Cmp::Gt, 7, false));
  r.add(compare_def("LessOrEqual", Cmp::Le, 12, false));
  r.add(compare_def("GreaterOrEqual", Cmp::Ge, 12, false));
  r.add(logic_def("And", Logic::And));
  r.add(logic_def("Or", Logic::Or));
  r.add(logic_def("Xor", Logic::Xor));
  r.add(Def{"Not", "", 1, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kBool); }, not_create});
  r.add(bitwise_def("BitShift", Bits::Left, 11));
  r.add(bitwise_def("BitwiseAnd", Bits::And, 18));
  r.add(bitwise_def("BitwiseOr", Bits::Or, 18));
  r.add(bitwise_def("BitwiseXor", Bits::Xor, 18));
  r.add(Def{"BitwiseNot", "", 18, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kInts); }, bitwise_not_create});

  r.add(Def{"Where", "", 9, INT_MAX, where_check, where_create});
}

}  // namespace nxrt::cpu
