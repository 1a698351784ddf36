// Softmax, LogSoftmax and Hardmax: opset 1-12 coerce the input to 2-D at
// axis, 13+ work along one axis. float32.
#include <cmath>
#include <limits>

#include "ops.hpp"
#include "softmax.hpp"

namespace nxrt::cpu {
namespace {

// --------------------------------------------------------------- Softmax

std::unique_ptr<Kernel> softmax_create(const Node& n, CpuSession& session, bool opset13) {
  const int64_t axis = n.attr_int("axis", opset13 ? -1 : 1);
  ThreadPool* pool = session.pool();
  return make_kernel([axis, opset13, pool](Context& ctx) {
    TensorView x = ctx.input(0);
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
void softmax_geometry(const TensorView& x, int64_t axis, bool coerce, const char* op, int64_t& outer, int64_t& n, int64_t& inner) {
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
    TensorView x = ctx.input(0);
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    if (x.numel() == 0) return;
    int64_t outer = 0, len = 0, inner = 0;
    softmax_geometry(x, axis, coerce, hard ? "Hardmax" : "LogSoftmax", outer, len, inner);
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const int parts = threads_for(pool, double(x.numel()) * 4, 65536.0);
    const int64_t cols = outer * inner;
    parallel_ranges(pool, cols, parts, [&](int64_t b, int64_t e) {
      for (int64_t col = b; col < e; ++col) {
        const int64_t o = col / inner, in = col % inner;
        const float* xr = xp + o * len * inner + in;
        float* yr = yp + o * len * inner + in;
        float m = -std::numeric_limits<float>::infinity();
        int64_t arg = 0;
        for (int64_t i = 0; i < len; ++i)
          if (xr[i * inner] > m) {
            m = xr[i * inner];
            arg = i;
          }
        if (hard) {
          for (int64_t i = 0; i < len; ++i) yr[i * inner] = i == arg ? 1.f : 0.f;
          continue;
        }
        double sum = 0;
        for (int64_t i = 0; i < len; ++i) sum += std::exp(double(xr[i * inner]) - double(m));
        const double ls = std::log(sum) + double(m);
        for (int64_t i = 0; i < len; ++i) yr[i * inner] = float(double(xr[i * inner]) - ls);
      }
    });
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
