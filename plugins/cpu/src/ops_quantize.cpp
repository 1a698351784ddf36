// Linear quantization: QuantizeLinear, DequantizeLinear (per-tensor or
// per-axis scale and zero point) and DynamicQuantizeLinear (uint8); the math
// is in quantize.cpp.
#include <type_traits>

#include "ops.hpp"
#include "quantize.hpp"

namespace nxrt::cpu {
namespace {

// Per-tensor (scale has 1 element) or per-axis parameters.
QuantAxis q_geometry(const ConstTensorView& x, const ConstTensorView& scale, int64_t axis, const char* op) {
  QuantAxis g;
  if (scale.numel() == 1 && scale.rank() <= 1) return g;
  if (scale.rank() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: scale must be a scalar or 1-D", op);
  const int64_t a = norm_axis(axis, int64_t(x.rank()), op);
  if (scale.dim(0) != x.dim(size_t(a))) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: scale has {} values for an axis of {}", op, scale.dim(0), x.dim(size_t(a)));
  g.per_axis = true;
  g.len = x.dim(size_t(a));
  for (size_t d = size_t(a) + 1; d < x.rank(); ++d) g.inner *= x.dim(d);
  return g;
}

std::unique_ptr<Kernel> dequantize_create(const Node& n, CpuSession& session) {
  const int64_t axis = n.attr_int("axis", 1);
  ThreadPool* pool = session.pool();
  return make_kernel([axis, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0), sc = ctx.input(1);
    auto zp = ctx.optional_input(2);
    const QuantAxis g = q_geometry(x, sc, axis, "DequantizeLinear");
    if (zp && (zp->numel() != sc.numel() || zp->dtype() != x.dtype())) sdk::fail(NXRT_INVALID_ARGUMENT, "DequantizeLinear: zero point does not match");
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    const float* s = sc.data<float>();
    float* yp = y.data<float>();
    dispatch_type(x.dtype(), "DequantizeLinear", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
        dequantize_linear(x.data<T>(), x.numel(), s, zp ? zp->data<T>() : nullptr, g, yp, pool);
    });
  });
}

std::unique_ptr<Kernel> quantize_create(const Node& n, CpuSession& session) {
  const int64_t axis = n.attr_int("axis", 1);
  const nxrt_dtype out = n.output(0).dtype();
  ThreadPool* pool = session.pool();
  return make_kernel([axis, out, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0), sc = ctx.input(1);
    auto zp = ctx.optional_input(2);
    const QuantAxis g = q_geometry(x, sc, axis, "QuantizeLinear");
    if (zp && (zp->numel() != sc.numel() || zp->dtype() != out)) sdk::fail(NXRT_INVALID_ARGUMENT, "QuantizeLinear: zero point does not match");
    TensorView y = ctx.output(0, out, x.dims());
    const float* s = sc.data<float>();
    const float* xp = x.data<float>();
    auto run = [&](auto tag) {
      using Q = decltype(tag);
      quantize_linear(xp, x.numel(), s, zp ? zp->data<Q>() : nullptr, g, y.data<Q>(), pool);
    };
    if (out == NXRT_DTYPE_UINT8) run(uint8_t{});
    else run(int8_t{});
  });
}

Check quant_check(const Node& n, bool quantize) {
  if (auto r = known_attrs(n, {"axis", "saturate"})) return r;
  if (auto r = input_dtype_is(n, 1, NXRT_DTYPE_FLOAT32, "scale")) return r;
  if (quantize) {
    if (auto r = input_dtype_is(n, 0, NXRT_DTYPE_FLOAT32, "x")) return r;
    const auto t = n.output(0).dtype();
    if (t != NXRT_DTYPE_UINT8 && t != NXRT_DTYPE_INT8) return sdk::refuse(NXRT_REFUSE_DTYPE, "QuantizeLinear output is {}", sdk::dtype_name(t));
    if (n.has_input(2) && n.input(2).dtype() != t) return sdk::refuse(NXRT_REFUSE_DTYPE, "QuantizeLinear: zero point dtype");
    return std::nullopt;
  }
  const auto t = n.input(0).dtype();
  if (t != NXRT_DTYPE_UINT8 && t != NXRT_DTYPE_INT8 && t != NXRT_DTYPE_INT32)
    return sdk::refuse(NXRT_REFUSE_DTYPE, "DequantizeLinear input is {}", sdk::dtype_name(t));
  if (n.has_input(2) && n.input(2).dtype() != t) return sdk::refuse(NXRT_REFUSE_DTYPE, "DequantizeLinear: zero point dtype");
  if (n.output(0).dtype() != NXRT_DTYPE_FLOAT32) return sdk::refuse(NXRT_REFUSE_DTYPE, "DequantizeLinear output is {}", sdk::dtype_name(n.output(0).dtype()));
  return std::nullopt;
}

std::unique_ptr<Kernel> dynq_create(const Node&, CpuSession&) {
  return make_kernel([](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const float* xp = x.data<float>();
    const DynamicQuant q = dynamic_quant_params(xp, x.numel());
    TensorView y = ctx.output(0, NXRT_DTYPE_UINT8, x.dims());
    TensorView ys = ctx.output(1, NXRT_DTYPE_FLOAT32, std::span<const int64_t>());
    TensorView yz = ctx.output(2, NXRT_DTYPE_UINT8, std::span<const int64_t>());
    ys.data<float>()[0] = q.scale;
    yz.data<uint8_t>()[0] = q.zero_point;
    dynamic_quantize_linear(xp, x.numel(), q, y.data<uint8_t>());
  });
}

}  // namespace

void register_quantize_ops(Registry& r) {
  r.add(Def{"DequantizeLinear", "", 10, INT_MAX, [](const Node& n) { return quant_check(n, false); }, dequantize_create});
  r.add(Def{"QuantizeLinear", "", 10, INT_MAX, [](const Node& n) { return quant_check(n, true); }, quantize_create});
  r.add(Def{"DynamicQuantizeLinear", "", 11, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = input_dtype_is(n, 0, NXRT_DTYPE_FLOAT32, "x")) return c;
              return known_attrs(n, {});
            },
            dynq_create});
}

}  // namespace nxrt::cpu
