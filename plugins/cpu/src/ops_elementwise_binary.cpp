// Binary (and variadic) elementwise arithmetic with numpy broadcasting:
// Add/Sub/Mul/Div/Pow (float32 and a few integer types, the vectorised
// kernels of elementwise.cpp; Pow 12+ also with mixed base and exponent
// types), variadic Max/Min/Sum/Mean (Max/Min also float16), PRelu, Mod
// (also float16).
#include <cmath>
#include <string>
#include <type_traits>

#include "elementwise.hpp"
#include "ops.hpp"

namespace nxrt::cpu {
namespace {

constexpr nxrt_dtype kArith[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_INT32, NXRT_DTYPE_INT64, NXRT_DTYPE_UINT8,
                                 NXRT_DTYPE_INT8};
// Every numeric type plus float16 (Max/Min 12+, Mod).
constexpr nxrt_dtype kNumericHalf[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_FLOAT16, NXRT_DTYPE_INT8,
                                       NXRT_DTYPE_UINT8,   NXRT_DTYPE_INT16,   NXRT_DTYPE_UINT16,  NXRT_DTYPE_INT32,
                                       NXRT_DTYPE_UINT32,  NXRT_DTYPE_INT64,   NXRT_DTYPE_UINT64};
// Max/Min 8-11: float types.
constexpr nxrt_dtype kFloatHalf[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_FLOAT16};

// --------------------------------------------------------------- binary

Def binary_def(const char* op, BinaryOp kind) {
  auto check = [kind](const Node& n) -> Check {
    if (kind == BinaryOp::Pow) return sdk::require_dtypes(n, kF32);  // float32 ^ float32 (mixed types: pow_def)
    if (auto r = sdk::require_dtypes(n, kArith)) return r;
    return same_dtype(n);
  };
  auto create = [kind, op = std::string(op)](const Node&, CpuSession& s) {
    ThreadPool* pool = s.pool();
    return make_kernel([kind, op, pool](Context& ctx) {
      ConstTensorView a = ctx.input(0), b = ctx.input(1);
      if (a.dtype() != b.dtype())
        sdk::fail(NXRT_INVALID_ARGUMENT, "{}: inputs are {} and {}", op, sdk::dtype_name(a.dtype()), sdk::dtype_name(b.dtype()));
      std::vector<int64_t> od;
      if (!broadcast_shape(a.dims(), b.dims(), od))
        sdk::fail(NXRT_INVALID_ARGUMENT, "{}: shapes {} and {} do not broadcast", op, dims_str(a.dims()), dims_str(b.dims()));
      TensorView y = ctx.output(0, a.dtype(), od);
      if (y.numel() == 0) return;
      switch (a.dtype()) {
        case NXRT_DTYPE_FLOAT32: binary(kind, a.data<float>(), a.dims(), b.data<float>(), b.dims(), y.data<float>(), od, pool); break;
        case NXRT_DTYPE_INT32: binary(kind, a.data<int32_t>(), a.dims(), b.data<int32_t>(), b.dims(), y.data<int32_t>(), od, pool); break;
        case NXRT_DTYPE_INT64: binary(kind, a.data<int64_t>(), a.dims(), b.data<int64_t>(), b.dims(), y.data<int64_t>(), od, pool); break;
        case NXRT_DTYPE_UINT8: binary(kind, a.data<uint8_t>(), a.dims(), b.data<uint8_t>(), b.dims(), y.data<uint8_t>(), od, pool); break;
        case NXRT_DTYPE_INT8: binary(kind, a.data<int8_t>(), a.dims(), b.data<int8_t>(), b.dims(), y.data<int8_t>(), od, pool); break;
        default: sdk::fail(NXRT_INVALID_ARGUMENT, "{}: dtype {} not supported", op, sdk::dtype_name(a.dtype()));
      }
    });
  };
  return Def{op, "", 7, kind == BinaryOp::Pow ? 11 : INT_MAX, check, create};
}

// ------------------------------------------------------------------ Pow

// Pow 12+ takes the exponent in its own type: base float32/float64/int32/int64,
// exponent float32/float64 or any integer type; the result has the base's type.
// float32 ^ float32 runs the vectorised binary(); the rest pow_mixed().
constexpr nxrt_dtype kPowBase[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT32, NXRT_DTYPE_INT64};
constexpr nxrt_dtype kPowExp[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT8,  NXRT_DTYPE_UINT8,
                                  NXRT_DTYPE_INT16,   NXRT_DTYPE_UINT16,  NXRT_DTYPE_INT32, NXRT_DTYPE_UINT32,
                                  NXRT_DTYPE_INT64,   NXRT_DTYPE_UINT64};

Check pow_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kPowBase, 0, 1)) return r;  // X and Z
  if (auto r = sdk::require_dtypes(n, kPowExp, 1, 2)) return r;
  if (n.output(0).dtype() != n.input(0).dtype()) return sdk::refuse(NXRT_REFUSE_DTYPE, "Pow: output dtype differs from the base's");
  return attrs_in(n, {});
}

std::unique_ptr<Kernel> pow_create(const Node&, CpuSession& s) {
  ThreadPool* pool = s.pool();
  return make_kernel([pool](Context& ctx) {
    ConstTensorView a = ctx.input(0), b = ctx.input(1);
    std::vector<int64_t> od;
    if (!broadcast_shape(a.dims(), b.dims(), od))
      sdk::fail(NXRT_INVALID_ARGUMENT, "Pow: shapes {} and {} do not broadcast", dims_str(a.dims()), dims_str(b.dims()));
    TensorView y = ctx.output(0, a.dtype(), od);
    if (y.numel() == 0) return;
    if (a.dtype() == NXRT_DTYPE_FLOAT32 && b.dtype() == NXRT_DTYPE_FLOAT32) {
      binary(BinaryOp::Pow, a.data<float>(), a.dims(), b.data<float>(), b.dims(), y.data<float>(), od, pool);
      return;
    }
    dispatch_type(a.dtype(), "Pow", [&](auto base_tag) {
      using B = decltype(base_tag);
      dispatch_type(b.dtype(), "Pow", [&](auto exp_tag) {
        using E = decltype(exp_tag);
        if constexpr (std::is_same_v<B, bool> || std::is_same_v<E, bool>) {
          sdk::fail(NXRT_INVALID_ARGUMENT, "Pow: bool operands");
        } else {
          broadcast_binary(a.data<B>(), a.dims(), b.data<E>(), b.dims(), y.data<B>(), od, pool,
                           [](B u, E v) { return pow_mixed(u, v); });
        }
      });
    });
  });
}

// float16 math in float32: each input widened once, the result rounded once
// to nearest even (exact for Max/Min and fmod, whose float results are halves).
std::vector<float> widen_half(const ConstTensorView& t) {
  std::vector<float> v(size_t(t.numel()));
  const uint16_t* p = static_cast<const uint16_t*>(t.raw());
  for (size_t i = 0; i < v.size(); ++i) v[i] = half_to_float(p[i]);
  return v;
}
void narrow_half(const std::vector<float>& v, TensorView& y) {
  uint16_t* p = static_cast<uint16_t*>(y.raw());
  for (size_t i = 0; i < v.size(); ++i) p[i] = float_to_half(v[i]);
}

// --------------------------------------------------- variadic Max/Min/Sum/Mean

enum class Var { Max, Min, Sum, Mean };

template <typename T>
T var_apply(Var v, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (v == Var::Max) return (std::isnan(a) || a >= b) ? a : b;
    if (v == Var::Min) return (std::isnan(a) || a <= b) ? a : b;
  } else {
    if (v == Var::Max) return a >= b ? a : b;
    if (v == Var::Min) return a <= b ? a : b;
  }
  return T(a + b);
}

Def variadic_def(const char* op, Var v, int since, int until, std::span<const nxrt_dtype> types) {
  std::vector<nxrt_dtype> tv(types.begin(), types.end());
  auto check = [tv](const Node& n) -> Check {
    if (auto r = typed_same(n, tv)) return r;
    return attrs_in(n, {});
  };
  auto create = [v, name = std::string(op)](const Node&, CpuSession& s) {
    ThreadPool* pool = s.pool();
    return make_kernel([v, name, pool](Context& ctx) {
      const size_t k = ctx.input_count();
      if (k == 0) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: no inputs", name);
      std::vector<ConstTensorView> in;
      std::vector<std::vector<int64_t>> shapes;
      for (size_t i = 0; i < k; ++i) {
        in.push_back(ctx.input(i));
        shapes.push_back(in.back().dims());
        if (in.back().dtype() != in[0].dtype()) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: mixed input dtypes", name);
      }
      std::vector<int64_t> od;
      if (!broadcast_shapes(shapes, od)) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: input shapes do not broadcast", name);
      TensorView y = ctx.output(0, in[0].dtype(), od);
      if (y.numel() == 0) return;
      // Folds every input into yp (element type T), reading input i through at(i).
      auto fold = [&](auto* yp, auto at) {
        using T = std::remove_pointer_t<decltype(yp)>;
        const T* a0 = at(0);
        broadcast_binary(a0, in[0].dims(), a0, in[0].dims(), yp, od, pool, [](T a, T) { return a; });
        const Var op = v == Var::Mean ? Var::Sum : v;
        for (size_t i = 1; i < k; ++i)
          broadcast_binary(static_cast<const T*>(yp), od, at(i), in[i].dims(), yp, od, pool,
                           [op](T a, T b) { return var_apply(op, a, b); });
        if (v == Var::Mean) {
          if constexpr (std::is_floating_point_v<T>)
            for (int64_t i = 0; i < y.numel(); ++i) yp[i] = T(yp[i] / T(k));
        }
      };
      if (in[0].dtype() == NXRT_DTYPE_FLOAT16) {
        std::vector<std::vector<float>> wide;
        for (auto& t : in) wide.push_back(widen_half(t));
        std::vector<float> acc(size_t(y.numel()));
        fold(acc.data(), [&](size_t i) { return static_cast<const float*>(wide[i].data()); });
        narrow_half(acc, y);
        return;
      }
      dispatch_type(in[0].dtype(), name.c_str(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, bool>) {
          sdk::fail(NXRT_INVALID_ARGUMENT, "{}: bool", name);
        } else {
          fold(y.data<T>(), [&](size_t i) { return in[i].data<T>(); });
        }
      });
    });
  };
  return Def{op, "", since, until, check, create};
}

// ------------------------------------------------------------- PRelu, Mod

std::unique_ptr<Kernel> prelu_create(const Node&, CpuSession& s) {
  ThreadPool* pool = s.pool();
  return make_kernel([pool](Context& ctx) {
    ConstTensorView x = ctx.input(0), sl = ctx.input(1);
    const auto od = out_shape2(x, sl, "PRelu");
    TensorView y = ctx.output(0, x.dtype(), od);
    if (y.numel() == 0) return;
    dispatch_type(x.dtype(), "PRelu", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>)
        broadcast_binary(x.data<T>(), x.dims(), sl.data<T>(), sl.dims(), y.data<T>(), od, pool, [](T a, T b) { return a < 0 ? T(a * b) : a; });
    });
  });
}

template <typename T>
T mod_int(T a, T b, bool fmod) {
  if (b == 0) return T(0);
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return T(0);
    T r = T(a % b);
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = T(r + b);
    return r;
  } else {
    return T(a % b);
  }
}

std::unique_ptr<Kernel> mod_create(const Node& n, CpuSession& s) {
  const bool fmod = n.attr_int("fmod", 0) != 0;
  ThreadPool* pool = s.pool();
  return make_kernel([fmod, pool](Context& ctx) {
    ConstTensorView a = ctx.input(0), b = ctx.input(1);
    const auto od = out_shape2(a, b, "Mod");
    TensorView y = ctx.output(0, a.dtype(), od);
    if (y.numel() == 0) return;
    if (a.dtype() == NXRT_DTYPE_FLOAT16) {  // fmod of two halves is a half: exact through float32
      const std::vector<float> u = widen_half(a), w = widen_half(b);
      std::vector<float> r(size_t(y.numel()));
      broadcast_binary(u.data(), a.dims(), w.data(), b.dims(), r.data(), od, pool, [](float p, float q) { return std::fmod(p, q); });
      narrow_half(r, y);
      return;
    }
    dispatch_type(a.dtype(), "Mod", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>) {
        broadcast_binary(a.data<T>(), a.dims(), b.data<T>(), b.dims(), y.data<T>(), od, pool, [](T u, T v) { return T(std::fmod(u, v)); });
      } else if constexpr (!std::is_same_v<T, bool>) {
        broadcast_binary(a.data<T>(), a.dims(), b.data<T>(), b.dims(), y.data<T>(), od, pool, [fmod](T u, T v) { return mod_int(u, v, fmod); });
      }
    });
  });
}

Check mod_check(const Node& n) {
  if (auto r = typed_same(n, kNumericHalf)) return r;
  if (auto r = attrs_in(n, {"fmod"})) return r;
  const auto t = n.input(0).dtype();
  if ((t == NXRT_DTYPE_FLOAT32 || t == NXRT_DTYPE_FLOAT64 || t == NXRT_DTYPE_FLOAT16) && n.attr_int("fmod", 0) == 0)
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "Mod: float inputs need fmod=1");
  return std::nullopt;
}

}  // namespace

void register_elementwise_binary_ops(Registry& r) {
  r.add(binary_def("Add", BinaryOp::Add));
  r.add(binary_def("Sub", BinaryOp::Sub));
  r.add(binary_def("Mul", BinaryOp::Mul));
  r.add(binary_def("Div", BinaryOp::Div));
  r.add(binary_def("Pow", BinaryOp::Pow));  // 7-11: one type for base and exponent
  r.add(Def{"Pow", "", 12, INT_MAX, pow_check, pow_create});
  r.add(variadic_def("Max", Var::Max, 8, 11, kFloatHalf));
  r.add(variadic_def("Max", Var::Max, 12, INT_MAX, kNumericHalf));
  r.add(variadic_def("Min", Var::Min, 8, 11, kFloatHalf));
  r.add(variadic_def("Min", Var::Min, 12, INT_MAX, kNumericHalf));
  r.add(variadic_def("Sum", Var::Sum, 8, INT_MAX, kFloat));
  r.add(variadic_def("Mean", Var::Mean, 8, INT_MAX, kFloat));

  r.add(Def{"PRelu", "", 7, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = typed_same(n, kFloat)) return c;
              return attrs_in(n, {});
            },
            prelu_create});
  r.add(Def{"Mod", "", 10, INT_MAX, mod_check, mod_create});
}

}  // namespace nxrt::cpu
