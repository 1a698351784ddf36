#include "elementwise.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "cpu_info.hpp"
#include "hard_swish.hpp"
#include "simd.hpp"
#include "vmath.hpp"

namespace nxrt::cpu {

float exp_approx(float x) { return vm::exp(x); }
float erf_approx(float x) { return vm::erf(x); }

bool broadcast_shape(std::span<const int64_t> a, std::span<const int64_t> b, std::vector<int64_t>& out) {
  const size_t r = std::max(a.size(), b.size());
  out.assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1) out[i] = da;
    else if (da == 1) out[i] = db;
    else return false;
  }
  return true;
}

// ------------------------------------------------------------ binary ops

namespace {

template <typename T>
struct OpAdd { static T f(T a, T b) { return T(a + b); } };
template <typename T>
struct OpSub { static T f(T a, T b) { return T(a - b); } };
template <typename T>
struct OpMul { static T f(T a, T b) { return T(a * b); } };
template <typename T>
struct OpDiv {
  static T f(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return a / b;
    } else {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return T(-a);  // avoids INT_MIN / -1 trapping
      return T(a / b);
    }
  }
};
template <typename T>
struct OpPow { static T f(T a, T b) { return std::pow(a, b); } };

// Inner loop over n elements; sa/sb are 0 (broadcast scalar) or 1.
template <typename T, typename Op>
NXRT_INLINE void binary_inner(const T* a, int64_t sa, const T* b, int64_t sb, T* o, int64_t n) {
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i) o[i] = Op::f(a[i], b[i]);
  } else if (sb) {
    const T x = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = Op::f(x, b[i]);
  } else if (sa) {
    const T y = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = Op::f(a[i], y);
  } else {
    const T v = Op::f(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

using InnerFn = void (*)(const void*, int64_t, const void*, int64_t, void*, int64_t);

#define NXRT_BINARY_FN(NAME, T, OP)                                                                \
  NXRT_CLONES void NAME(const void* a, int64_t sa, const void* b, int64_t sb, void* o, int64_t n) { \
    binary_inner<T, OP<T>>(static_cast<const T*>(a), sa, static_cast<const T*>(b), sb,            \
                           static_cast<T*>(o), n);                                                 \
  }
#define NXRT_BINARY_SET(T, SUFFIX)             \
  NXRT_BINARY_FN(add_##SUFFIX, T, OpAdd)       \
  NXRT_BINARY_FN(sub_##SUFFIX, T, OpSub)       \
  NXRT_BINARY_FN(mul_##SUFFIX, T, OpMul)       \
  NXRT_BINARY_FN(div_##SUFFIX, T, OpDiv)

NXRT_BINARY_SET(float, f32)
NXRT_BINARY_SET(int32_t, i32)
NXRT_BINARY_SET(int64_t, i64)
NXRT_BINARY_SET(uint8_t, u8)
NXRT_BINARY_SET(int8_t, i8)

void pow_f32(const void* a, int64_t sa, const void* b, int64_t sb, void* o, int64_t n) {
  binary_inner<float, OpPow<float>>(static_cast<const float*>(a), sa, static_cast<const float*>(b), sb,
                                    static_cast<float*>(o), n);
}

template <typename T>
InnerFn pick(BinaryOp op);
#define NXRT_PICK(T, SUFFIX)                                  \
  template <>                                                 \
  InnerFn pick<T>(BinaryOp op) {                              \
    switch (op) {                                             \
      case BinaryOp::Add: return &add_##SUFFIX;               \
      case BinaryOp::Sub: return &sub_##SUFFIX;               \
      case BinaryOp::Mul: return &mul_##SUFFIX;               \
      case BinaryOp::Div: return &div_##SUFFIX;               \
      default: return nullptr;                                \
    }                                                         \
  }
NXRT_PICK(int32_t, i32)
NXRT_PICK(int64_t, i64)
NXRT_PICK(uint8_t, u8)
NXRT_PICK(int8_t, i8)
template <>
InnerFn pick<float>(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return &add_f32;
    case BinaryOp::Sub: return &sub_f32;
    case BinaryOp::Mul: return &mul_f32;
    case BinaryOp::Div: return &div_f32;
    case BinaryOp::Pow: return &pow_f32;
  }
  return nullptr;
}

}  // namespace

template <typename T>
void binary(BinaryOp op, const T* a, std::span<const int64_t> a_dims, const T* b, std::span<const int64_t> b_dims,
            T* out, std::span<const int64_t> out_dims, ThreadPool* pool) {
  InnerFn fn = pick<T>(op);
  if (!fn) throw std::invalid_argument("binary op not implemented for this element type");
  const size_t r = out_dims.size();
  int64_t total = 1;
  for (auto d : out_dims) total *= d;
  if (total == 0) return;
  // Collapse: drop size-1 output dims, merge runs with the same broadcast pattern.
  struct Dim { int64_t n; bool a_bc, b_bc; };
  Dim dims[16];
  std::vector<Dim> big;
  Dim* d = r <= 16 ? dims : (big.resize(r), big.data());
  int nd = 0;
  for (size_t i = 0; i < r; ++i) {
    const int64_t n = out_dims[i];
    if (n == 1) continue;
    const int64_t da = i < r - a_dims.size() ? 1 : a_dims[i - (r - a_dims.size())];
    const int64_t db = i < r - b_dims.size() ? 1 : b_dims[i - (r - b_dims.size())];
    const bool abc = da == 1, bbc = db == 1;
    if (nd > 0 && d[nd - 1].a_bc == abc && d[nd - 1].b_bc == bbc) d[nd - 1].n *= n;
    else d[nd++] = Dim{n, abc, bbc};
  }
  if (nd == 0) {
    fn(a, 0, b, 0, out, 1);
    return;
  }
  // Strides of the collapsed operands.
  int64_t sa[16], sb[16];
  std::vector<int64_t> bigs;
  int64_t* psa = sa;
  int64_t* psb = sb;
  if (nd > 16) {
    bigs.resize(size_t(2 * nd));
    psa = bigs.data();
    psb = bigs.data() + nd;
  }
  int64_t ma = 1, mb = 1;
  for (int i = nd - 1; i >= 0; --i) {
    psa[i] = d[i].a_bc ? 0 : ma;
    psb[i] = d[i].b_bc ? 0 : mb;
    if (!d[i].a_bc) ma *= d[i].n;
    if (!d[i].b_bc) mb *= d[i].n;
  }
  const int64_t inner = d[nd - 1].n;
  const int64_t ia = psa[nd - 1], ib = psb[nd - 1];
  const int64_t outer = total / inner;
  auto run_rows = [&](int64_t o0, int64_t o1) {
    // odometer over the outer dims, starting at row o0
    int64_t idx[16];
    std::vector<int64_t> bigidx;
    int64_t* id = nd <= 16 ? idx : (bigidx.resize(size_t(nd)), bigidx.data());
    int64_t rem = o0, offa = 0, offb = 0;
    for (int i = nd - 2; i >= 0; --i) {
      id[i] = rem % d[i].n;
      rem /= d[i].n;
      offa += id[i] * psa[i];
      offb += id[i] * psb[i];
    }
    for (int64_t o = o0; o < o1; ++o) {
      fn(a + offa, ia, b + offb, ib, out + o * inner, inner);
      for (int i = nd - 2; i >= 0; --i) {
        offa += psa[i];
        offb += psb[i];
        if (++id[i] < d[i].n) break;
        offa -= psa[i] * d[i].n;
        offb -= psb[i] * d[i].n;
        id[i] = 0;
      }
    }
  };
  const int t = threads_for(pool, double(total), 1 << 16);
  if (t <= 1 || outer == 1) {
    if (outer == 1 && t > 1) {
      // one long row: split it
      parallel_for(pool, t, [&](int64_t i) {
        int64_t s, e;
        split_range(inner, t, i, s, e);
        fn(a + s * ia, ia, b + s * ib, ib, out + s, e - s);
      });
      return;
    }
    run_rows(0, outer);
    return;
  }
  parallel_for(pool, t, [&](int64_t i) {
    int64_t s, e;
    split_range(outer, t, i, s, e);
    run_rows(s, e);
  });
}

template void binary<float>(BinaryOp, const float*, std::span<const int64_t>, const float*, std::span<const int64_t>,
                            float*, std::span<const int64_t>, ThreadPool*);
template void binary<int32_t>(BinaryOp, const int32_t*, std::span<const int64_t>, const int32_t*,
                              std::span<const int64_t>, int32_t*, std::span<const int64_t>, ThreadPool*);
template void binary<int64_t>(BinaryOp, const int64_t*, std::span<const int64_t>, const int64_t*,
                              std::span<const int64_t>, int64_t*, std::span<const int64_t>, ThreadPool*);
template void binary<uint8_t>(BinaryOp, const uint8_t*, std::span<const int64_t>, const uint8_t*,
                              std::span<const int64_t>, uint8_t*, std::span<const int64_t>, ThreadPool*);
template void binary<int8_t>(BinaryOp, const int8_t*, std::span<const int64_t>, const int8_t*,
                             std::span<const int64_t>, int8_t*, std::span<const int64_t>, ThreadPool*);

// ------------------------------------------------------------- unary ops

namespace {

NXRT_CLONES void u_relu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : (x[i] != x[i] ? x[i] : 0.f);
}
NXRT_CLONES void u_erf(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = vm::erf(x[i]);
}
NXRT_CLONES void u_exp(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = vm::exp(x[i]);
}
NXRT_CLONES void u_sqrt(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = __builtin_sqrtf(x[i]);
}
NXRT_CLONES void u_sigmoid(const float* x, float* y, int64_t n) {
  // sigmoid(x) = 1/(1+e^-x) for x >= 0, e^x/(1+e^x) otherwise (no overflow); one division,
  // its numerator picked (vectorised, both quotients were computed and one selected).
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float e = vm::exp(v < 0.f ? v : -v);
    y[i] = (v >= 0.f ? 1.f : e) / (1.f + e);
  }
}
NXRT_CLONES void u_tanh(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = vm::tanh(x[i]);
}
NXRT_CLONES void u_neg(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = -x[i];
}
NXRT_CLONES void u_gelu_erf_chain(const float* x, float* y, int64_t n, float c, float a, float h) {
  for (int64_t i = 0; i < n; ++i) y[i] = ((vm::erf(x[i] / c) + a) * x[i]) * h;
}
// a == 1 (Gelu as exported): 1 + erf(u) is erfc(-u), computed as erfc(|u|) or 2 - erfc(|u|):
// one branch instead of erf's two, and no cancellation for negative u (1 + erf(u) there
// came out as 0 or a few ulps of 1).
NXRT_CLONES void u_gelu_erfc_chain(const float* x, float* y, int64_t n, float c, float h) {
  for (int64_t i = 0; i < n; ++i) {
    const float u = x[i] / c;
    const float e = vm::erfc_nonneg(u < 0.f ? -u : u);
    float one_plus_erf = u < 0.f ? e : 2.f - e;
    one_plus_erf = u != u ? u : one_plus_erf;
    y[i] = (one_plus_erf * x[i]) * h;
  }
}
NXRT_CLONES void u_hardswish(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = hard_swish(x[i]);
}
NXRT_CLONES void u_hard_sigmoid(const float* x, float* y, int64_t n, float alpha, float beta) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = alpha * x[i] + beta;
    // NaN in, NaN out: the comparisons are false for NaN, so v passes through.
    y[i] = v < 0.f ? 0.f : v > 1.f ? 1.f : v;
  }
}
NXRT_CLONES void u_abs(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = __builtin_fabsf(x[i]);
}

template <typename F>
void split_elements(int64_t n, ThreadPool* pool, double per_thread, F&& f) {
  const int t = threads_for(pool, double(n), per_thread);
  if (t <= 1) {
    f(0, n);
    return;
  }
  parallel_for(pool, t, [&](int64_t i) {
    int64_t s, e;
    split_range(n, t, i, s, e);
    f(s, e);
  });
}

}  // namespace

void gelu_erf_chain(const float* x, float* y, int64_t n, float c, float a, float h, ThreadPool* pool) {
  static const GeluChainFn erfc_chain = [] {
    const GeluChainFn f = active_isa() >= Isa::avx512 ? gelu_erfc_chain_avx512_fn() : nullptr;
    return f ? f : &u_gelu_erfc_chain;
  }();
  split_elements(n, pool, 1 << 14, [&](int64_t s, int64_t e) {
    if (a == 1.f) erfc_chain(x + s, y + s, e - s, c, h);
    else u_gelu_erf_chain(x + s, y + s, e - s, c, a, h);
  });
}

void hard_sigmoid(const float* x, float* y, int64_t n, float alpha, float beta, ThreadPool* pool) {
  split_elements(n, pool, 1 << 17, [&](int64_t s, int64_t e) { u_hard_sigmoid(x + s, y + s, e - s, alpha, beta); });
}

void unary(UnaryOp op, const float* x, float* y, int64_t n, ThreadPool* pool) {
  void (*fn)(const float*, float*, int64_t) = nullptr;
  double per = 1 << 17;
  switch (op) {
    case UnaryOp::Relu: fn = &u_relu; break;
    case UnaryOp::Erf: fn = &u_erf; per = 1 << 14; break;
    case UnaryOp::Exp: fn = &u_exp; per = 1 << 14; break;
    case UnaryOp::Sqrt: fn = &u_sqrt; per = 1 << 15; break;
    case UnaryOp::Sigmoid: fn = &u_sigmoid; per = 1 << 14; break;
    case UnaryOp::Tanh: fn = &u_tanh; per = 1 << 14; break;
    case UnaryOp::Neg: fn = &u_neg; break;
    case UnaryOp::Abs: fn = &u_abs; break;
    case UnaryOp::HardSwish: fn = &u_hardswish; break;
  }
  split_elements(n, pool, per, [&](int64_t s, int64_t e) { fn(x + s, y + s, e - s); });
}

template <typename T>
void relu(const T* x, T* y, int64_t n, ThreadPool* pool) {
  if constexpr (std::is_same_v<T, float>) {
    unary(UnaryOp::Relu, x, y, n, pool);
  } else {
    split_elements(n, pool, 1 << 17, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
    });
  }
}

namespace {
NXRT_CLONES void clip_f32(const float* x, float* y, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    y[i] = v;
  }
}
}  // namespace

template <typename T>
void clip(const T* x, T* y, int64_t n, T lo, T hi, ThreadPool* pool) {
  split_elements(n, pool, 1 << 17, [&](int64_t s, int64_t e) {
    if constexpr (std::is_same_v<T, float>) {
      clip_f32(x + s, y + s, e - s, lo, hi);
    } else {
      for (int64_t i = s; i < e; ++i) y[i] = std::min(std::max(x[i], lo), hi);
    }
  });
}

#define NXRT_INST_RELU_CLIP(T)                                   \
  template void relu<T>(const T*, T*, int64_t, ThreadPool*);     \
  template void clip<T>(const T*, T*, int64_t, T, T, ThreadPool*);
NXRT_INST_RELU_CLIP(float)
NXRT_INST_RELU_CLIP(int8_t)
NXRT_INST_RELU_CLIP(uint8_t)
NXRT_INST_RELU_CLIP(int16_t)
NXRT_INST_RELU_CLIP(uint16_t)
NXRT_INST_RELU_CLIP(int32_t)
NXRT_INST_RELU_CLIP(uint32_t)
NXRT_INST_RELU_CLIP(int64_t)
NXRT_INST_RELU_CLIP(uint64_t)

}  // namespace nxrt::cpu
