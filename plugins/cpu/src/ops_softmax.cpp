// Softmax, LogSoftmax and Hardmax: opset 1-12 coerce the input to 2-D at
// axis, 13+ work along one axis; the math is in softmax.cpp. float32.
#include "ops.hpp"
#include "softmax.hpp"

namespace nxrt::cpu {
namespace {

// --------------------------------------------------------------- Softmax

std::unique_ptr<Kernel> softmax_create(const Node& n, CpuSession& session, bool opset13) {
  const int64_t axis = n.attr_int("axis", opset13 ? -1 : 1);
  ThreadPool* pool = session.pool();
  return make_kernel([axis, opset13, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const int64_t r = int64_t(x.rank());
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    if (x.numel() == 0) return;
    if (r == 0) {
      y.data<float>()[0] = 1.f;
      return;
    }
    const int64_t ax = norm_axis(axis, r, "Softmax");
    int64_t outer = 1, mid = 1, inner = 1;
    for (int64_t i = 0; i < ax; ++i) outer *= x.dim(size_t(i));
    if (opset13) {
      mid = x.dim(size_t(ax));
      for (int64_t i = ax + 1; i < r; ++i) inner *= x.dim(size_t(i));
    } else {
      for (int64_t i = ax; i < r; ++i) mid *= x.dim(size_t(i));  // coerced to 2-D
    }
    softmax(outer, mid, inner, x.data<float>(), y.data<float>(), pool);
  });
}

// ----------------------------------------------------- LogSoftmax, Hardmax

// Splits x around `axis`: opset < 13 coerces to 2-D at axis (inner = 1).
void softmax_geometry(const ConstTensorView& x, int64_t axis, bool coerce, const char* op, int64_t& outer, int64_t& n, int64_t& inner) {
  const int64_t r = int64_t(x.rank());
  const int64_t a = norm_axis(axis, r, op, coerce);
  outer = 1;
  n = 1;
  inner = 1;
  for (int64_t i = 0; i < a; ++i) outer *= x.dim(size_t(i));
  if (coerce) {
    for (int64_t i = a; i < r; ++i) n *= x.dim(size_t(i));
  } else {
    n = x.dim(size_t(a));
    for (int64_t i = a + 1; i < r; ++i) inner *= x.dim(size_t(i));
  }
}

std::unique_ptr<Kernel> logsoftmax_create(const Node& n, CpuSession& s, bool coerce, bool hard) {
  const int64_t axis = n.attr_int("axis", coerce ? 1 : -1);
  ThreadPool* pool = s.pool();
  return make_kernel([axis, coerce, hard, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    if (x.numel() == 0) return;
    int64_t outer = 0, len = 0, inner = 0;
    softmax_geometry(x, axis, coerce, hard ? "Hardmax" : "LogSoftmax", outer, len, inner);
    if (hard) hardmax(outer, len, inner, x.data<float>(), y.data<float>(), pool);
    else log_softmax(outer, len, inner, x.data<float>(), y.data<float>(), pool);
  });
}

}  // namespace

void register_softmax_ops(Registry& r) {
  r.add(Def{"Softmax", "", 1, 12, [](const Node& n) { return sdk::require_dtypes(n, kF32); },
            [](const Node& n, CpuSession& s) { return softmax_create(n, s, false); }});
  r.add(Def{"Softmax", "", 13, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kF32); },
            [](const Node& n, CpuSession& s) { return softmax_create(n, s, true); }});
  r.add(Def{"LogSoftmax", "", 1, 12,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kF32)) return c;
              return known_attrs(n, {"axis"});
            },
            [](const Node& n, CpuSession& s) { return logsoftmax_create(n, s, true, false); }});
  r.add(Def{"LogSoftmax", "", 13, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kF32)) return c;
              return known_attrs(n, {"axis"});
            },
            [](const Node& n, CpuSession& s) { return logsoftmax_create(n, s, false, false); }});
  r.add(Def{"Hardmax", "", 1, 12,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kF32)) return c;
              return known_attrs(n, {"axis"});
            },
            [](const Node& n, CpuSession& s) { return logsoftmax_create(n, s, true, true); }});
  r.add(Def{"Hardmax", "", 13, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kF32)) return c;
              return known_attrs(n, {"axis"});
            },
            [](const Node& n, CpuSession& s) { return logsoftmax_create(n, s, false, true); }});
}

}  // namespace nxrt::cpu
