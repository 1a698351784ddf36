// More elementwise ops: comparisons (bool output), Not/And/Or/Xor, variadic
// Max/Min/Sum/Mean, PRelu, Mod, BitShift, Bitwise*, Sign, IsNaN/IsInf and
// unary float math (Log, Floor, Sin, LeakyRelu, Elu, Gelu, ...). Numpy
// broadcasting; float math is evaluated in double and rounded once.
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "ops_more.hpp"

namespace nxrt::cpu {
namespace {

constexpr nxrt_dtype kFloat[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64};
constexpr nxrt_dtype kUnsigned[] = {NXRT_DTYPE_UINT8, NXRT_DTYPE_UINT16, NXRT_DTYPE_UINT32, NXRT_DTYPE_UINT64};
constexpr nxrt_dtype kInts[] = {NXRT_DTYPE_INT8, NXRT_DTYPE_UINT8, NXRT_DTYPE_INT16, NXRT_DTYPE_UINT16,
                                NXRT_DTYPE_INT32, NXRT_DTYPE_UINT32, NXRT_DTYPE_INT64, NXRT_DTYPE_UINT64};
constexpr nxrt_dtype kEqualTypes[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT8,   NXRT_DTYPE_UINT8,
                                      NXRT_DTYPE_INT16,   NXRT_DTYPE_UINT16,  NXRT_DTYPE_INT32,  NXRT_DTYPE_UINT32,
                                      NXRT_DTYPE_INT64,   NXRT_DTYPE_UINT64,  NXRT_DTYPE_BOOL};
constexpr nxrt_dtype kBool[] = {NXRT_DTYPE_BOOL};

// y = f(a, b) with broadcasting (y contiguous over od).
template <typename T, typename R, typename F>
void bin_bcast(const T* a, std::span<const int64_t> ad, const T* b, std::span<const int64_t> bd, R* y,
               std::span<const int64_t> od, ThreadPool* pool, F f) {
  const std::array<std::vector<int64_t>, 2> st = {broadcast_strides(ad, od), broadcast_strides(bd, od)};
  broadcast_rows<2>(od, st, pool, [&](int64_t o, int64_t n, const int64_t* off, const int64_t* in) {
    const T* ap = a + off[0];
    const T* bp = b + off[1];
    R* yp = y + o;
    if (in[0] == 1 && in[1] == 1) {
      for (int64_t i = 0; i < n; ++i) yp[i] = f(ap[i], bp[i]);
    } else if (in[0] == 1 && in[1] == 0) {
      const T bv = bp[0];
      for (int64_t i = 0; i < n; ++i) yp[i] = f(ap[i], bv);
    } else if (in[0] == 0 && in[1] == 1) {
      const T av = ap[0];
      for (int64_t i = 0; i < n; ++i) yp[i] = f(av, bp[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) yp[i] = f(ap[i * in[0]], bp[i * in[1]]);
    }
  });
}

std::vector<int64_t> out_shape2(const ConstTensorView& a, const ConstTensorView& b, std::string_view op) {
  std::vector<std::vector<int64_t>> shapes = {a.dims(), b.dims()};
  std::vector<int64_t> od;
  if (!broadcast_shapes(shapes, od))
    sdk::fail(NXRT_INVALID_ARGUMENT, "{}: shapes {} and {} do not broadcast", op, dims_str(a.dims()), dims_str(b.dims()));
  if (a.dtype() != b.dtype())
    sdk::fail(NXRT_INVALID_ARGUMENT, "{}: inputs are {} and {}", op, sdk::dtype_name(a.dtype()), sdk::dtype_name(b.dtype()));
  return od;
}

Check typed_same(const Node& n, std::span<const nxrt_dtype> allowed, size_t input_end = SIZE_MAX) {
  for (size_t i = 0; i < n.input_count() && i < input_end; ++i) {
    auto v = n.input(i);
    bool ok = false;
    for (auto t : allowed) ok = ok || t == v.dtype();
    if (v.present() && !ok) return sdk::refuse(NXRT_REFUSE_DTYPE, "{} input {} is {}", n.op_type(), i, sdk::dtype_name(v.dtype()));
  }
  return same_dtype(n, input_end);
}

Check attrs_in(const Node& n, const std::vector<std::string>& known) {
  for (size_t i = 0; i < n.attribute_count(); ++i) {
    const std::string name(n.attribute_at(i).name());
    bool ok = false;
    for (auto& k : known) ok = ok || name == k;
    if (!ok) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: attribute '{}' is not implemented", n.op_type(), name);
  }
  return std::nullopt;
}

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
          case Cmp::Eq: bin_bcast(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return u == v; }); break;
          case Cmp::Lt: bin_bcast(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return u < v; }); break;
          case Cmp::Gt: bin_bcast(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return u > v; }); break;
          case Cmp::Le: bin_bcast(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return u <= v; }); break;
          case Cmp::Ge: bin_bcast(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return u >= v; }); break;
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
        case Logic::And: bin_bcast(ap, a.dims(), bp, b.dims(), yp, od, pool, [](bool u, bool v) { return u && v; }); break;
        case Logic::Or: bin_bcast(ap, a.dims(), bp, b.dims(), yp, od, pool, [](bool u, bool v) { return u || v; }); break;
        case Logic::Xor: bin_bcast(ap, a.dims(), bp, b.dims(), yp, od, pool, [](bool u, bool v) { return u != v; }); break;
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
            case Bits::And: bin_bcast(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return T(u & v); }); break;
            case Bits::Or: bin_bcast(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return T(u | v); }); break;
            case Bits::Xor: bin_bcast(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return T(u ^ v); }); break;
            case Bits::Left:
              bin_bcast(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return v >= bits ? T(0) : T(u << v); });
              break;
            case Bits::Right:
              bin_bcast(ap, a.dims(), bp, b.dims(), yp, od, pool, [](T u, T v) { return v >= bits ? T(0) : T(u >> v); });
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
      dispatch_type(in[0].dtype(), name.c_str(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, bool>) {
          sdk::fail(NXRT_INVALID_ARGUMENT, "{}: bool", name);
        } else {
          T* yp = y.data<T>();
          const T* a0 = in[0].data<T>();
          bin_bcast(a0, in[0].dims(), a0, in[0].dims(), yp, od, pool, [](T a, T) { return a; });
          const Var op = v == Var::Mean ? Var::Sum : v;
          for (size_t i = 1; i < k; ++i)
            bin_bcast(static_cast<const T*>(yp), od, in[i].data<T>(), in[i].dims(), yp, od, pool,
                      [op](T a, T b) { return var_apply(op, a, b); });
          if (v == Var::Mean) {
            if constexpr (std::is_floating_point_v<T>)
              for (int64_t i = 0; i < y.numel(); ++i) yp[i] = T(yp[i] / T(k));
          }
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
        bin_bcast(x.data<T>(), x.dims(), sl.data<T>(), sl.dims(), y.data<T>(), od, pool, [](T a, T b) { return a < 0 ? T(a * b) : a; });
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
    dispatch_type(a.dtype(), "Mod", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>) {
        bin_bcast(a.data<T>(), a.dims(), b.data<T>(), b.dims(), y.data<T>(), od, pool, [](T u, T v) { return T(std::fmod(u, v)); });
      } else if constexpr (!std::is_same_v<T, bool>) {
        bin_bcast(a.data<T>(), a.dims(), b.data<T>(), b.dims(), y.data<T>(), od, pool, [fmod](T u, T v) { return mod_int(u, v, fmod); });
      }
    });
  });
}

Check mod_check(const Node& n) {
  if (auto r = typed_same(n, kNumeric)) return r;
  if (auto r = attrs_in(n, {"fmod"})) return r;
  const auto t = n.input(0).dtype();
  if ((t == NXRT_DTYPE_FLOAT32 || t == NXRT_DTYPE_FLOAT64) && n.attr_int("fmod", 0) == 0)
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "Mod: float inputs need fmod=1");
  return std::nullopt;
}

// ------------------------------------------------------------- Sign, IsNaN

std::unique_ptr<Kernel> sign_create(const Node&, CpuSession&) {
  return make_kernel([](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, x.dtype(), x.dims());
    dispatch_type(x.dtype(), "Sign", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        const T* xp = x.data<T>();
        T* yp = y.data<T>();
        for (int64_t i = 0; i < x.numel(); ++i) {
          const T v = xp[i];
          if constexpr (std::is_floating_point_v<T>) yp[i] = std::isnan(v) ? v : T(v > 0 ? 1 : v < 0 ? -1 : 0);
          else if constexpr (std::is_signed_v<T>) yp[i] = T(v > 0 ? 1 : v < 0 ? -1 : 0);
          else yp[i] = T(v > 0 ? 1 : 0);
        }
      }
    });
  });
}

std::unique_ptr<Kernel> isnan_create(const Node& n, CpuSession&, bool inf) {
  const bool neg = n.attr_int("detect_negative", 1) != 0, pos = n.attr_int("detect_positive", 1) != 0;
  return make_kernel([inf, neg, pos](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, NXRT_DTYPE_BOOL, x.dims());
    bool* yp = y.data<bool>();
    dispatch_type(x.dtype(), "IsNaN", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>) {
        const T* xp = x.data<T>();
        for (int64_t i = 0; i < x.numel(); ++i) {
          const T v = xp[i];
          yp[i] = inf ? (std::isinf(v) && ((v > 0 && pos) || (v < 0 && neg))) : std::isnan(v);
        }
      }
    });
  });
}

// ------------------------------------------------------------ unary float math

template <typename T, typename F>
void apply_unary(const T* x, T* y, int64_t n, ThreadPool* pool, const F& f) {
  const int parts = threads_for(pool, double(n) * 8, 65536.0);
  auto run = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = T(f(double(x[i])));
  };
  parallel_ranges(pool, n, parts, run);
}

// make(node) returns the element function double -> double.
template <typename Make>
Def unary_math(const char* op, int since, std::vector<std::string> attrs, Make make) {
  auto check = [attrs](const Node& n) -> Check {
    if (auto r = sdk::require_dtypes(n, kFloat)) return r;
    const std::string ap = n.attr_string("approximate", "none");
    if (ap != "none" && ap != "tanh") return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: approximate '{}'", n.op_type(), ap);
    return attrs_in(n, attrs);
  };
  auto create = [make](const Node& n, CpuSession& s) {
    auto f = make(n);
    ThreadPool* pool = s.pool();
    return make_kernel([f, pool](Context& ctx) {
      ConstTensorView x = ctx.input(0);
      TensorView y = ctx.output(0, x.dtype(), x.dims());
      if (x.dtype() == NXRT_DTYPE_FLOAT32) apply_unary(x.data<float>(), y.data<float>(), x.numel(), pool, f);
      else apply_unary(x.data<double>(), y.data<double>(), x.numel(), pool, f);
    });
  };
  return Def{op, "", since, INT_MAX, check, create};
}

template <typename F>
Def unary_simple(const char* op, int since, F f) {
  return unary_math(op, since, {}, [f](const Node&) { return f; });
}

double softplus(double x) { return x > 30 ? x : std::log1p(std::exp(x)); }

}  // namespace

void register_math_ops(Registry& r) {
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

  r.add(variadic_def("Max", Var::Max, 8, 11, kFloat));
  r.add(variadic_def("Max", Var::Max, 12, INT_MAX, kNumeric));
  r.add(variadic_def("Min", Var::Min, 8, 11, kFloat));
  r.add(variadic_def("Min", Var::Min, 12, INT_MAX, kNumeric));
  r.add(variadic_def("Sum", Var::Sum, 8, INT_MAX, kFloat));
  r.add(variadic_def("Mean", Var::Mean, 8, INT_MAX, kFloat));

  r.add(Def{"PRelu", "", 7, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = typed_same(n, kFloat)) return c;
              return attrs_in(n, {});
            },
            prelu_create});
  r.add(Def{"Mod", "", 10, INT_MAX, mod_check, mod_create});
  r.add(Def{"Sign", "", 9, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kNumeric); }, sign_create});
  r.add(Def{"IsNaN", "", 9, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = typed_same(n, kFloat)) return c;
              return attrs_in(n, {});
            },
            [](const Node& n, CpuSession& s) { return isnan_create(n, s, false); }});
  r.add(Def{"IsInf", "", 10, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = typed_same(n, kFloat)) return c;
              return attrs_in(n, {"detect_negative", "detect_positive"});
            },
            [](const Node& n, CpuSession& s) { return isnan_create(n, s, true); }});

  r.add(unary_simple("Log", 6, [](double x) { return std::log(x); }));
  r.add(unary_simple("Reciprocal", 6, [](double x) { return 1.0 / x; }));
  r.add(unary_simple("Floor", 6, [](double x) { return std::floor(x); }));
  r.add(unary_simple("Ceil", 6, [](double x) { return std::ceil(x); }));
  r.add(unary_simple("Round", 11, [](double x) { return std::nearbyint(x); }));
  r.add(unary_simple("Sin", 7, [](double x) { return std::sin(x); }));
  r.add(unary_simple("Cos", 7, [](double x) { return std::cos(x); }));
  r.add(unary_simple("Tan", 7, [](double x) { return std::tan(x); }));
  r.add(unary_simple("Asin", 7, [](double x) { return std::asin(x); }));
  r.add(unary_simple("Acos", 7, [](double x) { return std::acos(x); }));
  r.add(unary_simple("Atan", 7, [](double x) { return std::atan(x); }));
  r.add(unary_simple("Sinh", 9, [](double x) { return std::sinh(x); }));
  r.add(unary_simple("Cosh", 9, [](double x) { return std::cosh(x); }));
  r.add(unary_simple("Asinh", 9, [](double x) { return std::asinh(x); }));
  r.add(unary_simple("Acosh", 9, [](double x) { return std::acosh(x); }));
  r.add(unary_simple("Atanh", 9, [](double x) { return std::atanh(x); }));
  r.add(unary_simple("Softplus", 1, [](double x) { return softplus(x); }));
  r.add(unary_simple("Softsign", 1, [](double x) { return x / (1.0 + std::fabs(x)); }));
  r.add(unary_simple("HardSwish", 14, [](double x) { return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5)); }));
  r.add(unary_simple("Mish", 18, [](double x) { return x * std::tanh(softplus(x)); }));
  r.add(unary_math("LeakyRelu", 6, {"alpha"}, [](const Node& n) {
    const double a = n.attr_float("alpha", 0.01f);
    return [a](double x) { return x < 0 ? a * x : x; };
  }));
  r.add(unary_math("Elu", 6, {"alpha"}, [](const Node& n) {
    const double a = n.attr_float("alpha", 1.f);
    return [a](double x) { return x < 0 ? a * std::expm1(x) : x; };
  }));
  r.add(unary_math("Celu", 12, {"alpha"}, [](const Node& n) {
    const double a = n.attr_float("alpha", 1.f);
    return [a](double x) { return std::max(0.0, x) + std::min(0.0, a * std::expm1(x / a)); };
  }));
  r.add(unary_math("Selu", 6, {"alpha", "gamma"}, [](const Node& n) {
    const double a = n.attr_float("alpha", 1.67326319217681884765625f), g = n.attr_float("gamma", 1.05070102214813232421875f);
    return [a, g](double x) { return x <= 0 ? g * a * std::expm1(x) : g * x; };
  }));
  r.add(unary_math("HardSigmoid", 6, {"alpha", "beta"}, [](const Node& n) {
    const double a = n.attr_float("alpha", 0.2f), b = n.attr_float("beta", 0.5f);
    return [a, b](double x) { return std::max(0.0, std::min(1.0, a * x + b)); };
  }));
  r.add(unary_math("ThresholdedRelu", 10, {"alpha"}, [](const Node& n) {
    const double a = n.attr_float("alpha", 1.f);
    return [a](double x) { return x > a ? x : 0.0; };
  }));
  r.add(unary_math("Shrink", 9, {"bias", "lambd"}, [](const Node& n) {
    const double b = n.attr_float("bias", 0.f), l = n.attr_float("lambd", 0.5f);
    return [b, l](double x) { return x < -l ? x + b : x > l ? x - b : 0.0; };
  }));
  r.add(unary_math("Gelu", 20, {"approximate"}, [](const Node& n) {
    const std::string ap = n.attr_string("approximate", "none");
    if (ap != "none" && ap != "tanh") sdk::fail(NXRT_INVALID_ARGUMENT, "Gelu: approximate '{}'", ap);
    const bool tanh_form = ap == "tanh";
    return [tanh_form](double x) {
      if (tanh_form) return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    };
  }));
}

}  // namespace nxrt::cpu
