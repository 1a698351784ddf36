#include "tensor_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace nxrt::cpu {

// ------------------------------------------------------------ broadcasting

bool broadcast_shapes(std::span<const std::vector<int64_t>> shapes, std::vector<int64_t>& out) {
  size_t r = 0;
  for (auto& s : shapes) r = std::max(r, s.size());
  out.assign(r, 1);
  for (auto& s : shapes)
    for (size_t i = 0; i < s.size(); ++i) {
      const size_t o = r - s.size() + i;
      const int64_t d = s[i];
      if (d == out[o] || d == 1) continue;
      if (out[o] == 1) out[o] = d;
      else return false;
    }
  return true;
}

std::vector<int64_t> broadcast_strides(std::span<const int64_t> dims, std::span<const int64_t> out_dims) {
  const size_t r = out_dims.size();
  std::vector<int64_t> st(r, 0);
  int64_t m = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    const size_t o = r - dims.size() + i;
    st[o] = dims[i] == 1 ? 0 : m;
    m *= dims[i];
  }
  return st;
}

std::vector<int64_t> contiguous_strides(std::span<const int64_t> dims) {
  std::vector<int64_t> st(dims.size());
  int64_t m = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    st[i] = m;
    m *= dims[i];
  }
  return st;
}

// ---------------------------------------------------------- index-map copy

namespace {

// The last dim's map as runs: copies of consecutive source elements, fills, and repeats of one
// source element (a broadcast), so that each output row is a few memcpy / fill calls.
struct MapRun {
  enum Kind { copy, fill, repeat } kind;
  int64_t src, len;  // src: the first source offset (copy, repeat)
};
std::vector<MapRun> map_runs(const std::vector<int64_t>& last) {
  std::vector<MapRun> runs;
  for (const int64_t m : last) {
    MapRun* b = runs.empty() ? nullptr : &runs.back();
    if (m == kFill) {
      if (b && b->kind == MapRun::fill) ++b->len;
      else runs.push_back({MapRun::fill, 0, 1});
    } else if (b && b->kind != MapRun::fill && b->len == 1 && m == b->src) {
      b->kind = MapRun::repeat;
      ++b->len;
    } else if (b && b->kind == MapRun::repeat && m == b->src) {
      ++b->len;
    } else if (b && b->kind == MapRun::copy && m == b->src + b->len) {
      ++b->len;
    } else {
      runs.push_back({MapRun::copy, m, 1});
    }
  }
  return runs;
}

template <typename U>
void map_copy_t(const U* src, U* dst, std::span<const int64_t> out_dims, const std::vector<std::vector<int64_t>>& maps,
                U fill, ThreadPool* pool) {
  const size_t r = out_dims.size();
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  for (auto d : out_dims)
    if (d == 0) return;
  const int64_t n = out_dims[r - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < r; ++d) rows *= out_dims[d];
  const std::vector<int64_t>& last = maps[r - 1];
  // Runs of 4+ elements on average (a constant Pad's row: fill, copy, fill; a Slice: one copy;
  // an Expand along the last dim: one repeat): per run. Else element by element. (A Pad of
  // 320 -> 321 columns went element by element: 211 us for 1.2 MB.)
  const std::vector<MapRun> runs = map_runs(last);
  const bool by_runs = int64_t(runs.size()) * 4 <= n;
  auto run = [&](int64_t r0, int64_t r1) {
    for (int64_t rw = r0; rw < r1; ++rw) {
      int64_t rem = rw, base = 0;
      bool filled = false;
      for (size_t d = r - 1; d-- > 0;) {
        const int64_t i = rem % out_dims[d];
        rem /= out_dims[d];
        const int64_t m = maps[d][size_t(i)];
        if (m == kFill) filled = true;
        else base += m;
      }
      U* o = dst + rw * n;
      if (filled) {
        std::fill(o, o + n, fill);
      } else if (by_runs) {
        for (const MapRun& q : runs) {
          switch (q.kind) {
            case MapRun::copy: std::memcpy(o, src + base + q.src, size_t(q.len) * sizeof(U)); break;
            case MapRun::fill: std::fill(o, o + q.len, fill); break;
            case MapRun::repeat: std::fill(o, o + q.len, src[base + q.src]); break;
          }
          o += q.len;
        }
      } else {
        for (int64_t i = 0; i < n; ++i) {
          const int64_t m = last[size_t(i)];
          o[i] = m == kFill ? fill : src[base + m];
        }
      }
    }
  };
  const int parts = threads_for(pool, double(rows) * double(n), 1 << 17);
  parallel_ranges(pool, rows, parts, run);
}

template <typename U>
U load_fill(const void* fill) {
  U v{};
  if (fill) std::memcpy(&v, fill, sizeof(U));
  return v;
}

}  // namespace

void map_copy(const void* src, void* dst, size_t esize, std::span<const int64_t> out_dims,
              const std::vector<std::vector<int64_t>>& maps, const void* fill, ThreadPool* pool) {
  switch (esize) {
    case 1: map_copy_t(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), out_dims, maps, load_fill<uint8_t>(fill), pool); break;
    case 2: map_copy_t(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), out_dims, maps, load_fill<uint16_t>(fill), pool); break;
    case 4: map_copy_t(static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), out_dims, maps, load_fill<uint32_t>(fill), pool); break;
    case 8: map_copy_t(static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst), out_dims, maps, load_fill<uint64_t>(fill), pool); break;
    default: break;
  }
}

int64_t slice_bounds(int64_t& start, int64_t end, int64_t step, int64_t dim) {
  int64_t b = start, e = end;
  if (b < 0) b += dim;
  if (e < 0) e += dim;
  int64_t cnt = 0;
  if (step > 0) {
    b = std::clamp(b, int64_t(0), dim);
    e = std::clamp(e, int64_t(0), dim);
    cnt = e > b ? (e - b + step - 1) / step : 0;
  } else {
    b = std::clamp(b, int64_t(0), dim - 1);
    e = std::clamp(e, int64_t(-1), dim - 1);
    cnt = b > e ? (b - e + (-step) - 1) / (-step) : 0;
  }
  start = b;
  return cnt;
}

void strided_slice(const void* src, void* dst, size_t esize, std::span<const int64_t> in_dims,
                   std::span<const int64_t> start, std::span<const int64_t> step, std::span<const int64_t> out_dims,
                   ThreadPool* pool) {
  for (auto d : out_dims)
    if (d == 0) return;
  const auto xs = contiguous_strides(in_dims);
  std::vector<std::vector<int64_t>> maps(out_dims.size());
  for (size_t d = 0; d < out_dims.size(); ++d) {
    maps[d].resize(size_t(out_dims[d]));
    for (int64_t i = 0; i < out_dims[d]; ++i) maps[d][size_t(i)] = (start[d] + i * step[d]) * xs[d];
  }
  map_copy(src, dst, esize, out_dims, maps, nullptr, pool);
}

bool gather(const void* src, void* dst, size_t esize, std::span<const int64_t> dims, int64_t axis,
            std::span<const int64_t> indices, ThreadPool* pool) {
  const int64_t d = dims[size_t(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= dims[size_t(i)];
  for (size_t i = size_t(axis) + 1; i < dims.size(); ++i) inner *= dims[i];
  std::vector<std::vector<int64_t>> maps(3);
  maps[1].resize(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    const int64_t v = indices[i];
    if (v < -d || v >= d) return false;
    maps[1][i] = (v < 0 ? v + d : v) * inner;
  }
  if (outer == 0 || inner == 0 || indices.empty()) return true;
  maps[0].resize(size_t(outer));
  for (int64_t i = 0; i < outer; ++i) maps[0][size_t(i)] = i * d * inner;
  maps[2].resize(size_t(inner));
  for (int64_t i = 0; i < inner; ++i) maps[2][size_t(i)] = i;
  const int64_t flat[3] = {outer, int64_t(indices.size()), inner};
  map_copy(src, dst, esize, flat, maps, nullptr, pool);
  return true;
}

namespace {

template <typename U>
void where_t(const bool* c, const U* a, const U* b, U* y, std::span<const int64_t> od,
             const std::array<std::vector<int64_t>, 3>& st, ThreadPool* pool) {
  broadcast_rows<3>(od, st, pool, [&](int64_t o, int64_t n, const int64_t* off, const int64_t* in) {
    const bool* cp = c + off[0];
    const U* ap = a + off[1];
    const U* bp = b + off[2];
    U* yp = y + o;
    if (in[0] == 1 && in[1] == 1 && in[2] == 1) {
      for (int64_t i = 0; i < n; ++i) yp[i] = cp[i] ? ap[i] : bp[i];
    } else if (in[0] == 1 && in[1] == 1 && in[2] == 0) {
      const U bv = bp[0];
      for (int64_t i = 0; i < n; ++i) yp[i] = cp[i] ? ap[i] : bv;
    } else if (in[0] == 1 && in[1] == 0 && in[2] == 1) {
      const U av = ap[0];
      for (int64_t i = 0; i < n; ++i) yp[i] = cp[i] ? av : bp[i];
    } else if (in[0] == 1 && in[1] == 0 && in[2] == 0) {
      const U av = ap[0], bv = bp[0];
      for (int64_t i = 0; i < n; ++i) yp[i] = cp[i] ? av : bv;
    } else if (in[0] == 0) {
      const U* src = cp[0] ? ap : bp;
      const int64_t ss = cp[0] ? in[1] : in[2];
      for (int64_t i = 0; i < n; ++i) yp[i] = src[i * ss];
    } else {
      for (int64_t i = 0; i < n; ++i) yp[i] = cp[i * in[0]] ? ap[i * in[1]] : bp[i * in[2]];
    }
  });
}

}  // namespace

void where(const bool* c, std::span<const int64_t> cd, const void* a, std::span<const int64_t> ad, const void* b,
           std::span<const int64_t> bd, void* y, size_t esize, std::span<const int64_t> od, ThreadPool* pool) {
  const std::array<std::vector<int64_t>, 3> st = {broadcast_strides(cd, od), broadcast_strides(ad, od),
                                                  broadcast_strides(bd, od)};
  switch (esize) {
    case 1: where_t(c, static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), static_cast<uint8_t*>(y), od, st, pool); break;
    case 2: where_t(c, static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), static_cast<uint16_t*>(y), od, st, pool); break;
    case 4: where_t(c, static_cast<const uint32_t*>(a), static_cast<const uint32_t*>(b), static_cast<uint32_t*>(y), od, st, pool); break;
    case 8: where_t(c, static_cast<const uint64_t*>(a), static_cast<const uint64_t*>(b), static_cast<uint64_t*>(y), od, st, pool); break;
    default: break;
  }
}

// ------------------------------------------------------------------- casts

namespace {

uint16_t double_to_half(double d) {
  const uint16_t sign = std::signbit(d) ? 0x8000u : 0u;
  if (std::isnan(d)) return uint16_t(sign | 0x7e00u);
  const double a = std::fabs(d);
  if (a >= 65520.0) return uint16_t(sign | 0x7c00u);  // rounds past 65504: inf
  if (a < 0x1p-14)                                     // subnormal (1024 = rounds up to the smallest normal)
    return uint16_t(sign | uint16_t(std::nearbyint(a * 0x1p24)));
  int ex = 0;
  std::frexp(a, &ex);  // a = m * 2^ex, m in [0.5, 1)
  int e = ex - 1;      // a in [2^e, 2^(e+1))
  double m = std::nearbyint(std::ldexp(a, 10 - e));  // in [1024, 2048], ties to even
  if (m >= 2048.0) {
    m = 1024.0;
    ++e;
  }
  return uint16_t(sign | uint16_t((e + 15) << 10) | uint16_t(int(m) - 1024));
}

}  // namespace

// Round to nearest even with integer bit tricks (F. Giesen's float_to_half_fast3_rtne):
// subnormal halves come from one IEEE float addition, normal ones from a biased add.
uint16_t float_to_half(float f) {
  constexpr uint32_t f32infty = 255u << 23, f16max = (127u + 16u) << 23, denorm_magic_u = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint16_t o = 0;
  if (u >= f16max) {
    o = u > f32infty ? 0x7e00 : 0x7c00;  // NaN stays NaN, overflow -> inf
  } else if (u < (113u << 23)) {         // below the smallest normal half
    float v = 0, magic = 0;
    std::memcpy(&v, &u, 4);
    std::memcpy(&magic, &denorm_magic_u, 4);
    v += magic;  // the float addition rounds to the half subnormal grid (ties to even)
    uint32_t r = 0;
    std::memcpy(&r, &v, 4);
    o = uint16_t(r - denorm_magic_u);
  } else {
    const uint32_t mant_odd = (u >> 13) & 1u;
    u += (uint32_t(15 - 127) << 23) + 0xfffu;
    u += mant_odd;
    o = uint16_t(u >> 13);
  }
  return uint16_t(o | (sign >> 16));
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t bits = 0;
  if (e == 0) {
    const float v = std::ldexp(float(m), -24);
    return sign ? -v : v;
  }
  if (e == 31) bits = sign | 0x7f800000u | (m << 13);
  else bits = sign | ((e + 112) << 23) | (m << 13);
  float f = 0;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bfloat16(float f, Bf16Round round) {
  uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return uint16_t((bits >> 16) | 0x40u);  // keep it a (quiet) NaN
  if (round == Bf16Round::Truncate) return uint16_t(bits >> 16);
  return uint16_t((uint64_t(bits) + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

float bfloat16_to_float(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f = 0;
  std::memcpy(&f, &bits, 4);
  return f;
}

namespace {

struct Half { uint16_t v; };
struct BHalf { uint16_t v; };

template <typename S>
double to_double(S v) {
  if constexpr (std::is_same_v<S, Half>) return half_to_float(v.v);
  else if constexpr (std::is_same_v<S, BHalf>) return bfloat16_to_float(v.v);
  else return double(v);
}

template <typename D>
D from_float(double v) {
  if constexpr (std::is_same_v<D, bool>) return v != 0.0;
  else if constexpr (std::is_floating_point_v<D>) return D(v);
  else {
    if (std::isnan(v)) return D(0);
    const double t = std::trunc(v);
    if (t <= double(std::numeric_limits<D>::lowest())) return std::numeric_limits<D>::lowest();
    if (t >= double(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    return D(t);
  }
}

template <typename S, typename D>
void cast_t(const S* s, D* d, int64_t n, Bf16Round bf16) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<D, Half>) {
      if constexpr (std::is_same_v<S, float>) d[i].v = float_to_half(s[i]);
      else d[i].v = double_to_half(to_double(s[i]));  // one rounding, also from double
    } else if constexpr (std::is_same_v<D, BHalf>) {
      d[i].v = float_to_bfloat16(float(to_double(s[i])), bf16);
    } else if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BHalf> || std::is_floating_point_v<S>) {
      d[i] = from_float<D>(to_double(s[i]));
    } else if constexpr (std::is_same_v<D, bool>) {
      d[i] = s[i] != 0;
    } else {
      d[i] = D(s[i]);  // integer/bool -> integer or float: C++ conversion (wraps like numpy)
    }
  }
}

template <typename S>
void cast_from(const S* s, void* dst, Elem dt, int64_t n, Bf16Round bf16) {
  switch (dt) {
    case Elem::F32: cast_t(s, static_cast<float*>(dst), n, bf16); break;
    case Elem::F16: cast_t(s, static_cast<Half*>(dst), n, bf16); break;
    case Elem::BF16: cast_t(s, static_cast<BHalf*>(dst), n, bf16); break;
    case Elem::F64: cast_t(s, static_cast<double*>(dst), n, bf16); break;
    case Elem::I8: cast_t(s, static_cast<int8_t*>(dst), n, bf16); break;
    case Elem::U8: cast_t(s, static_cast<uint8_t*>(dst), n, bf16); break;
    case Elem::I16: cast_t(s, static_cast<int16_t*>(dst), n, bf16); break;
    case Elem::U16: cast_t(s, static_cast<uint16_t*>(dst), n, bf16); break;
    case Elem::I32: cast_t(s, static_cast<int32_t*>(dst), n, bf16); break;
    case Elem::U32: cast_t(s, static_cast<uint32_t*>(dst), n, bf16); break;
    case Elem::I64: cast_t(s, static_cast<int64_t*>(dst), n, bf16); break;
    case Elem::U64: cast_t(s, static_cast<uint64_t*>(dst), n, bf16); break;
    case Elem::Bool: cast_t(s, static_cast<bool*>(dst), n, bf16); break;
  }
}

}  // namespace

void cast(const void* src, Elem st, void* dst, Elem dt, int64_t n, Bf16Round bf16) {
  switch (st) {
    case Elem::F32: cast_from(static_cast<const float*>(src), dst, dt, n, bf16); break;
    case Elem::F16: cast_from(static_cast<const Half*>(src), dst, dt, n, bf16); break;
    case Elem::BF16: cast_from(static_cast<const BHalf*>(src), dst, dt, n, bf16); break;
    case Elem::F64: cast_from(static_cast<const double*>(src), dst, dt, n, bf16); break;
    case Elem::I8: cast_from(static_cast<const int8_t*>(src), dst, dt, n, bf16); break;
    case Elem::U8: cast_from(static_cast<const uint8_t*>(src), dst, dt, n, bf16); break;
    case Elem::I16: cast_from(static_cast<const int16_t*>(src), dst, dt, n, bf16); break;
    case Elem::U16: cast_from(static_cast<const uint16_t*>(src), dst, dt, n, bf16); break;
    case Elem::I32: cast_from(static_cast<const int32_t*>(src), dst, dt, n, bf16); break;
    case Elem::U32: cast_from(static_cast<const uint32_t*>(src), dst, dt, n, bf16); break;
    case Elem::I64: cast_from(static_cast<const int64_t*>(src), dst, dt, n, bf16); break;
    case Elem::U64: cast_from(static_cast<const uint64_t*>(src), dst, dt, n, bf16); break;
    case Elem::Bool: cast_from(static_cast<const bool*>(src), dst, dt, n, bf16); break;
  }
}

// -------------------------------------------------------------- reductions

namespace {

template <typename T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

// Walks x (coalesced dims cd, reduce flags cf) and calls f(acc[o], x) for
// every element, o being its output offset. Parallel over the first dim when
// it is kept (disjoint outputs).
template <typename T, typename A, typename F>
void reduce_walk(const T* x, const std::vector<int64_t>& cd, const std::vector<bool>& cf, A* acc, ThreadPool* pool, F f) {
  const size_t r = cd.size();
  std::vector<int64_t> ost(r, 0);
  int64_t m = 1;
  for (size_t i = r; i-- > 0;)
    if (!cf[i]) {
      ost[i] = m;
      m *= cd[i];
    }
  const int64_t n = cd[r - 1];
  const bool inner_reduced = cf[r - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < r; ++d) rows *= cd[d];
  auto run = [&](int64_t r0, int64_t r1) {
    for (int64_t rw = r0; rw < r1; ++rw) {
      int64_t rem = rw, o = 0;
      for (size_t d = r - 1; d-- > 0;) {
        o += (rem % cd[d]) * ost[d];
        rem /= cd[d];
      }
      const T* xr = x + rw * n;
      if (inner_reduced) {
        A a = acc[o];
        for (int64_t i = 0; i < n; ++i) f(a, xr[i], o);
        acc[o] = a;
      } else {
        A* ar = acc + o;
        for (int64_t i = 0; i < n; ++i) f(ar[i], xr[i], o + i);
      }
    }
  };
  const int parts = threads_for(pool, double(rows) * double(n), 1 << 17);
  if (parts <= 1 || r < 2 || cf[0] || cd[0] < 2) {
    run(0, rows);
    return;
  }
  // Split over the first (kept) dim: each chunk owns its outputs.
  const int64_t per = rows / cd[0];
  const int64_t chunks = std::min<int64_t>(cd[0], parts);
  parallel_for(pool, chunks, [&](int64_t c) {
    int64_t b = 0, e = 0;
    split_range(cd[0], chunks, c, b, e);
    run(b * per, e * per);
  });
}

template <typename A>
inline void acc_max(A& a, A v) {
  if constexpr (std::is_floating_point_v<A>) {
    if (v > a || std::isnan(v)) a = std::isnan(a) ? a : v;
  } else if (v > a) a = v;
}
template <typename A>
inline void acc_min(A& a, A v) {
  if constexpr (std::is_floating_point_v<A>) {
    if (v < a || std::isnan(v)) a = std::isnan(a) ? a : v;
  } else if (v < a) a = v;
}

}  // namespace

template <typename T>
void reduce(ReduceOp op, const T* x, std::span<const int64_t> dims, const std::vector<bool>& flags, T* y, ThreadPool* pool) {
  using A = Acc<T>;
  std::vector<int64_t> cd;
  std::vector<bool> cf;
  int64_t in_n = 1, out_n = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    in_n *= dims[d];
    if (!flags[d]) out_n *= dims[d];
    if (dims[d] == 1) continue;
    if (!cd.empty() && cf.back() == flags[d]) cd.back() *= dims[d];
    else {
      cd.push_back(dims[d]);
      cf.push_back(flags[d]);
    }
  }
  if (cd.empty()) {
    cd.push_back(1);
    cf.push_back(false);
  }
  if (out_n == 0) return;
  const int64_t count = out_n ? in_n / out_n : 0;
  constexpr bool fp = std::is_floating_point_v<A>;
  constexpr A lowest = fp ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest();
  constexpr A highest = fp ? std::numeric_limits<A>::infinity() : std::numeric_limits<A>::max();
  A init = 0;
  if (op == ReduceOp::Max || op == ReduceOp::LogSumExp) init = lowest;
  else if (op == ReduceOp::Min) init = highest;
  else if (op == ReduceOp::Prod) init = 1;
  std::vector<A> acc(size_t(out_n), init);
  A* a = acc.data();
  if (in_n > 0) {
    switch (op) {
      case ReduceOp::Sum: case ReduceOp::Mean: case ReduceOp::LogSum:
        reduce_walk(x, cd, cf, a, pool, [](A& s, T v, int64_t) { s += A(v); });
        break;
      case ReduceOp::SumSquare: case ReduceOp::L2:
        reduce_walk(x, cd, cf, a, pool, [](A& s, T v, int64_t) { s += A(v) * A(v); });
        break;
      case ReduceOp::L1:
        reduce_walk(x, cd, cf, a, pool, [](A& s, T v, int64_t) { s += A(v) < 0 ? -A(v) : A(v); });
        break;
      case ReduceOp::Prod:
        reduce_walk(x, cd, cf, a, pool, [](A& s, T v, int64_t) { s *= A(v); });
        break;
      case ReduceOp::Max:
        reduce_walk(x, cd, cf, a, pool, [](A& s, T v, int64_t) { acc_max(s, A(v)); });
        break;
      case ReduceOp::Min:
        reduce_walk(x, cd, cf, a, pool, [](A& s, T v, int64_t) { acc_min(s, A(v)); });
        break;
      case ReduceOp::LogSumExp: {
        reduce_walk(x, cd, cf, a, pool, [](A& s, T v, int64_t) { acc_max(s, A(v)); });
        std::vector<A> sum(size_t(out_n), 0);
        const A* mx = acc.data();
        reduce_walk(x, cd, cf, sum.data(), pool, [mx](A& s, T v, int64_t o) {
          if constexpr (fp) {
            const A m = std::isfinite(mx[o]) ? mx[o] : 0;
            s += std::exp(A(v) - m);
          }
        });
        if constexpr (fp)
          for (int64_t o = 0; o < out_n; ++o) {
            const A m = std::isfinite(a[o]) ? a[o] : 0;
            a[o] = std::log(sum[size_t(o)]) + m;
          }
        break;
      }
    }
  }
  for (int64_t o = 0; o < out_n; ++o) {
    A v = a[o];
    switch (op) {
      case ReduceOp::Mean:
        if constexpr (fp) v = v / A(count);
        else v = count ? v / count : 0;
        break;
      case ReduceOp::L2:
        if constexpr (fp) v = std::sqrt(v);
        break;
      case ReduceOp::LogSum:
        if constexpr (fp) v = std::log(v);
        break;
      case ReduceOp::LogSumExp:
        if (in_n == 0) {
          if constexpr (fp) v = -std::numeric_limits<A>::infinity();
        }
        break;
      default: break;
    }
    if constexpr (fp) y[o] = T(v);
    else {
      // Max/Min init values already fit T; sums wrap like the input type would.
      y[o] = T(v);
    }
  }
}

template <typename T>
void arg_reduce(bool is_max, bool last_index, const T* x, std::span<const int64_t> dims, int64_t axis, int64_t* y) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= dims[size_t(i)];
  for (size_t i = size_t(axis) + 1; i < dims.size(); ++i) inner *= dims[i];
  const int64_t n = dims[size_t(axis)];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      const T* p = x + o * n * inner + in;
      int64_t best = 0;
      T bv = p[0];
      for (int64_t k = 1; k < n; ++k) {
        const T v = p[k * inner];
        const bool better = is_max ? (last_index ? v >= bv : v > bv) : (last_index ? v <= bv : v < bv);
        if (better) {
          bv = v;
          best = k;
        }
      }
      y[o * inner + in] = best;
    }
}

#define NXRT_REDUCE_INST(T)                                                                                          \
  template void reduce<T>(ReduceOp, const T*, std::span<const int64_t>, const std::vector<bool>&, T*, ThreadPool*); \
  template void arg_reduce<T>(bool, bool, const T*, std::span<const int64_t>, int64_t, int64_t*);
NXRT_REDUCE_INST(float)
NXRT_REDUCE_INST(double)
NXRT_REDUCE_INST(int32_t)
NXRT_REDUCE_INST(int64_t)
NXRT_REDUCE_INST(uint8_t)
NXRT_REDUCE_INST(int8_t)
#undef NXRT_REDUCE_INST

}  // namespace nxrt::cpu
