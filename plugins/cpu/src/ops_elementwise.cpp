// Add/Sub/Mul/Div/Pow (numpy broadcasting), Relu, Clip, and unary float math.
#include <algorithm>
#include <limits>

#include "elementwise.hpp"
#include "ops.hpp"

namespace nxrt::cpu {
namespace {

constexpr nxrt_dtype kF32[] = {NXRT_DTYPE_FLOAT32};
constexpr nxrt_dtype kArith[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_INT32, NXRT_DTYPE_INT64, NXRT_DTYPE_UINT8,
                                 NXRT_DTYPE_INT8};
constexpr nxrt_dtype kReluTypes[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_INT8, NXRT_DTYPE_INT16, NXRT_DTYPE_INT32,
                                     NXRT_DTYPE_INT64};
constexpr nxrt_dtype kClipTypes[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_INT8,   NXRT_DTYPE_UINT8,  NXRT_DTYPE_INT16,
                                     NXRT_DTYPE_UINT16,  NXRT_DTYPE_INT32,  NXRT_DTYPE_UINT32, NXRT_DTYPE_INT64,
                                     NXRT_DTYPE_UINT64};

// --------------------------------------------------------------- binary

Def binary_def(const char* op, BinaryOp kind) {
  auto check = [kind](const Node& n) -> Check {
    if (kind == BinaryOp::Pow) return sdk::require_dtypes(n, kF32);
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
  return Def{op, "", 7, INT_MAX, check, create};
}

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

}  // namespace

void register_elementwise_ops(Registry& r) {
  r.add(binary_def("Add", BinaryOp::Add));
  r.add(binary_def("Sub", BinaryOp::Sub));
  r.add(binary_def("Mul", BinaryOp::Mul));
  r.add(binary_def("Div", BinaryOp::Div));
  r.add(binary_def("Pow", BinaryOp::Pow));
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
  r.add(unary_def("Neg", UnaryOp::Neg, 6));
  r.add(unary_def("Abs", UnaryOp::Abs, 6));
}

}  // namespace nxrt::cpu
