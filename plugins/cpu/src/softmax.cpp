#include "softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu_info.hpp"
#include "simd.hpp"
#include "vmath.hpp"

namespace nxrt::cpu {

// 16 lanes of running max and partial sums, so the loops vectorise (a float reduction in
// one variable does not without reassociation: softmax of 128 values ran scalar, 1.3 ns each).
NXRT_CLONES
static void softmax_row(const float* x, float* y, int64_t n) {
  constexpr int L = 16;
  float mv[L], sv[L] = {};
  for (int j = 0; j < L; ++j) mv[j] = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int j = 0; j < L; ++j) mv[j] = x[i + j] > mv[j] ? x[i + j] : mv[j];
  float m = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (int j = 0; j < L; ++j) m = mv[j] > m ? mv[j] : m;
  i = 0;
  for (; i + L <= n; i += L)
    for (int j = 0; j < L; ++j) {
      const float e = vm::exp(x[i + j] - m);
      y[i + j] = e;
      sv[j] += e;
    }
  float s = 0.f;
  for (; i < n; ++i) {
    const float e = vm::exp(x[i] - m);
    y[i] = e;
    s += e;
  }
  for (int j = 0; j < L; ++j) s += sv[j];
  const float inv = 1.f / s;
  for (i = 0; i < n; ++i) y[i] *= inv;
}

// Strided case: softmax along `axis` for `inner` interleaved columns.
NXRT_CLONES
static void softmax_strided(const float* x, float* y, int64_t axis, int64_t inner) {
  for (int64_t j = 0; j < inner; ++j) y[j] = -std::numeric_limits<float>::infinity();
  for (int64_t a = 0; a < axis; ++a)
    for (int64_t j = 0; j < inner; ++j) y[j] = x[a * inner + j] > y[j] ? x[a * inner + j] : y[j];
  // Row 0 of y holds the running max; rows 1.. get their exponentials first,
  // row 0 last (each element reads its max before overwriting it).
  const float* mx = y;
  for (int64_t a = axis - 1; a >= 1; --a)
    for (int64_t j = 0; j < inner; ++j) y[a * inner + j] = vm::exp(x[a * inner + j] - mx[j]);
  for (int64_t j = 0; j < inner; ++j) y[j] = vm::exp(x[j] - mx[j]);
  for (int64_t j = 0; j < inner; ++j) {
    float s = 0.f;
    for (int64_t a = 0; a < axis; ++a) s += y[a * inner + j];
    const float inv = 1.f / s;
    for (int64_t a = 0; a < axis; ++a) y[a * inner + j] *= inv;
  }
}

void softmax(int64_t outer, int64_t axis, int64_t inner, const float* x, float* y, ThreadPool* pool) {
  if (outer == 0 || axis == 0 || inner == 0) return;
  const int64_t rows = outer;
  static const SoftmaxRowFn row_fn = [] {
    const SoftmaxRowFn f = active_isa() >= Isa::avx512 ? softmax_row_avx512_fn() : nullptr;
    return f ? f : &softmax_row;
  }();
  const int t = threads_for(pool, double(outer) * double(axis) * double(inner), 1 << 14);
  const int64_t tasks = t <= 1 ? 1 : std::min<int64_t>(rows, int64_t(t) * 4);
  auto body = [&](int64_t i) {
    int64_t b, e;
    split_range(rows, tasks, i, b, e);
    for (int64_t r = b; r < e; ++r) {
      if (inner == 1) row_fn(x + r * axis, y + r * axis, axis);
      else softmax_strided(x + r * axis * inner, y + r * axis * inner, axis, inner);
    }
  };
  if (tasks <= 1) body(0);
  else parallel_for(pool, tasks, body);
}

namespace {

void log_softmax_or_hardmax(int64_t outer, int64_t len, int64_t inner, const float* xp, float* yp, ThreadPool* pool, bool hard) {
  const int parts = threads_for(pool, double(outer * len * inner) * 4, 65536.0);
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
}

}  // namespace

void log_softmax(int64_t outer, int64_t axis, int64_t inner, const float* x, float* y, ThreadPool* pool) {
  log_softmax_or_hardmax(outer, axis, inner, x, y, pool, false);
}

void hardmax(int64_t outer, int64_t axis, int64_t inner, const float* x, float* y, ThreadPool* pool) {
  log_softmax_or_hardmax(outer, axis, inner, x, y, pool, true);
}

}  // namespace nxrt::cpu
