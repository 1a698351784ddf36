// Unary elementwise ops: Relu, Clip, and Erf/Sqrt/Exp/Tanh/Sigmoid/Neg/Abs on
// float32 (the vectorised kernels of elementwise.cpp; Neg/Abs also float64
// and integers); Sign, IsNaN/IsInf; and
// float32/float64 math (Log, Floor, Sin, LeakyRelu, Elu, Gelu, ...) evaluated
// in double and rounded once.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "elementwise.hpp"
#include "ops.hpp"

namespace nxrt::cpu {
namespace {

constexpr nxrt_dtype kReluTypes[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_INT8, NXRT_DTYPE_INT16, NXRT_DTYPE_INT32,
                                     NXRT_DTYPE_INT64};
constexpr nxrt_dtype kClipTypes[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_INT8,   NXRT_DTYPE_UINT8,  NXRT_DTYPE_INT16,
                                     NXRT_DTYPE_UINT16,  NXRT_DTYPE_INT32,  NXRT_DTYPE_UINT32, NXRT_DTYPE_INT64,
                                     NXRT_DTYPE_UINT64};

// ----------------------------------------------------------------- unary

Def unary_def(const char* op, UnaryOp kind, int since) {
  auto create = [kind](const Node&, CpuSession& s) {
    ThreadPool* pool = s.pool();
    return make_kernel([kind, pool](Context& ctx) {
      ConstTensorView x = ctx.input(0);
      TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
      unary(kind, x.data<float>(), y.data<float>(), x.numel(), pool);
    });
  };
  return Def{op, "", since, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kF32); }, create};
}

// Neg and Abs beyond float32: float64 and the integer types (Neg: signed
// ones). Integers wrap like numpy (-(-128) is -128 in int8).
constexpr nxrt_dtype kNegTypes[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT8,
                                    NXRT_DTYPE_INT16,   NXRT_DTYPE_INT32,   NXRT_DTYPE_INT64};

template <typename T>
T negate(T v) {
  if constexpr (std::is_integral_v<T>) return T(std::make_unsigned_t<T>(0) - std::make_unsigned_t<T>(v));
  else return T(-v);
}

Def neg_abs_def(const char* op, UnaryOp kind) {
  auto create = [kind, name = std::string(op)](const Node&, CpuSession& s) {
    ThreadPool* pool = s.pool();
    return make_kernel([kind, name, pool](Context& ctx) {
      ConstTensorView x = ctx.input(0);
      TensorView y = ctx.output(0, x.dtype(), x.dims());
      if (x.dtype() == NXRT_DTYPE_FLOAT32) {
        unary(kind, x.data<float>(), y.data<float>(), x.numel(), pool);
        return;
      }
      dispatch_type(x.dtype(), name.c_str(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, bool>) {
          sdk::fail(NXRT_INVALID_ARGUMENT, "{}: bool", name);
        } else {
          const T* xp = x.data<T>();
          T* yp = y.data<T>();
          for (int64_t i = 0; i < x.numel(); ++i) {
            if (kind == UnaryOp::Neg) yp[i] = negate(xp[i]);
            else if constexpr (std::is_unsigned_v<T>) yp[i] = xp[i];
            else yp[i] = xp[i] < 0 ? negate(xp[i]) : xp[i];
          }
        }
      });
    });
  };
  std::vector<nxrt_dtype> types(kind == UnaryOp::Neg ? std::begin(kNegTypes) : std::begin(kNumeric),
                                kind == UnaryOp::Neg ? std::end(kNegTypes) : std::end(kNumeric));
  auto check = [types](const Node& n) -> Check {
    if (auto r = typed_same(n, types)) return r;
    if (n.output(0).dtype() != n.input(0).dtype()) return sdk::refuse(NXRT_REFUSE_DTYPE, "{}: output dtype differs from input", n.op_type());
    return attrs_in(n, {});
  };
  return Def{op, "", 6, INT_MAX, check, create};
}

template <typename T>
void relu_typed(const ConstTensorView& x, TensorView& y, ThreadPool* pool) {
  relu(x.data<T>(), y.data<T>(), x.numel(), pool);
}

std::unique_ptr<Kernel> relu_create(const Node&, CpuSession& s) {
  ThreadPool* pool = s.pool();
  return make_kernel([pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, x.dtype(), x.dims());
    switch (x.dtype()) {
      case NXRT_DTYPE_FLOAT32: relu_typed<float>(x, y, pool); break;
      case NXRT_DTYPE_INT8: relu_typed<int8_t>(x, y, pool); break;
      case NXRT_DTYPE_INT16: relu_typed<int16_t>(x, y, pool); break;
      case NXRT_DTYPE_INT32: relu_typed<int32_t>(x, y, pool); break;
      case NXRT_DTYPE_INT64: relu_typed<int64_t>(x, y, pool); break;
      default: sdk::fail(NXRT_INVALID_ARGUMENT, "Relu: dtype {} not supported", sdk::dtype_name(x.dtype()));
    }
  });
}

// ------------------------------------------------------------------ Clip

template <typename T>
T scalar_input(Context& ctx, size_t i, T fallback, const char* what) {
  auto t = ctx.optional_input(i);
  if (!t) return fallback;
  if (t->numel() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "Clip: {} must be a scalar, got {}", what, dims_str(t->dims()));
  return t->data<T>()[0];
}

template <typename T>
void clip_typed(Context& ctx, const ConstTensorView& x, ThreadPool* pool) {
  const T lo = scalar_input<T>(ctx, 1, std::numeric_limits<T>::lowest(), "min");
  const T hi = scalar_input<T>(ctx, 2, std::numeric_limits<T>::max(), "max");
  TensorView y = ctx.output(0, x.dtype(), x.dims());
  clip(x.data<T>(), y.data<T>(), x.numel(), lo, hi, pool);
}

std::unique_ptr<Kernel> clip11_create(const Node&, CpuSession& s) {
  ThreadPool* pool = s.pool();
  return make_kernel([pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    switch (x.dtype()) {
      case NXRT_DTYPE_FLOAT32: clip_typed<float>(ctx, x, pool); break;
      case NXRT_DTYPE_INT8: clip_typed<int8_t>(ctx, x, pool); break;
      case NXRT_DTYPE_UINT8: clip_typed<uint8_t>(ctx, x, pool); break;
      case NXRT_DTYPE_INT16: clip_typed<int16_t>(ctx, x, pool); break;
      case NXRT_DTYPE_UINT16: clip_typed<uint16_t>(ctx, x, pool); break;
      case NXRT_DTYPE_INT32: clip_typed<int32_t>(ctx, x, pool); break;
      case NXRT_DTYPE_UINT32: clip_typed<uint32_t>(ctx, x, pool); break;
      case NXRT_DTYPE_INT64: clip_typed<int64_t>(ctx, x, pool); break;
      case NXRT_DTYPE_UINT64: clip_typed<uint64_t>(ctx, x, pool); break;
      default: sdk::fail(NXRT_INVALID_ARGUMENT, "Clip: dtype {} not supported", sdk::dtype_name(x.dtype()));
    }
  });
}

std::unique_ptr<Kernel> clip6_create(const Node& n, CpuSession& s) {
  const float lo = n.attr_float("min", std::numeric_limits<float>::lowest());
  const float hi = n.attr_float("max", std::numeric_limits<float>::max());
  ThreadPool* pool = s.pool();
  return make_kernel([lo, hi, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    clip(x.data<float>(), y.data<float>(), x.numel(), lo, hi, pool);
  });
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

void register_elementwise_unary_ops(Registry& r) {
  r.add(Def{"Relu", "", 6, 13, [](const Node& n) { return sdk::require_dtypes(n, kF32); }, relu_create});
  r.add(Def{"Relu", "", 14, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kReluTypes); }, relu_create});
  r.add(Def{"Clip", "", 6, 10, [](const Node& n) { return sdk::require_dtypes(n, kF32); }, clip6_create});
  r.add(Def{"Clip", "", 11, 11, [](const Node& n) { return sdk::require_dtypes(n, kF32); }, clip11_create});
  r.add(Def{"Clip", "", 12, INT_MAX,
            [](const Node& n) {
              if (auto c = sdk::require_dtypes(n, kClipTypes)) return c;
              return same_dtype(n);
            },
            clip11_create});
  r.add(unary_def("Erf", UnaryOp::Erf, 9));
  r.add(unary_def("Sqrt", UnaryOp::Sqrt, 6));
  r.add(unary_def("Exp", UnaryOp::Exp, 6));
  r.add(unary_def("Tanh", UnaryOp::Tanh, 6));
  r.add(unary_def("Sigmoid", UnaryOp::Sigmoid, 6));
  r.add(neg_abs_def("Neg", UnaryOp::Neg));
  r.add(neg_abs_def("Abs", UnaryOp::Abs));
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
  r.add(unary_def("HardSwish", UnaryOp::HardSwish, 14));
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
  // HardSigmoid: float32 vectorised (MobileNetV3's squeeze-excite gates), float64 in double.
  const Def hard_sigmoid_math = unary_math("HardSigmoid", 6, {"alpha", "beta"}, [](const Node& n) {
    const double a = n.attr_float("alpha", 0.2f), b = n.attr_float("beta", 0.5f);
    return [a, b](double x) { return std::max(0.0, std::min(1.0, a * x + b)); };
  });
  r.add(Def{"HardSigmoid", "", 6, INT_MAX, hard_sigmoid_math.check, [math = hard_sigmoid_math](const Node& n, CpuSession& s) {
              if (n.input(0).dtype() != NXRT_DTYPE_FLOAT32) return math.create(n, s);
              const float a = n.attr_float("alpha", 0.2f), b = n.attr_float("beta", 0.5f);
              ThreadPool* pool = s.pool();
              return make_kernel([a, b, pool](Context& ctx) {
                ConstTensorView x = ctx.input(0);
                TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
                hard_sigmoid(x.data<float>(), y.data<float>(), x.numel(), a, b, pool);
              });
            }});
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
