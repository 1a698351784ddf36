// The fused QDQ Add (quantize.hpp): DequantizeLinear twice, a float add, [clamp],
// [QuantizeLinear], one element at a time in registers. The scalar loop is the nodes' code;
// the AVX2 (8 lanes, scalar tail) and AVX-512 (16 lanes, masked tail) runs do the same float
// operations: exact int -> float of (q - zp), one multiply, one add, max / min with the
// operands ordered as std::max / std::min (NaN and -0 kept alike), a true division, round
// to nearest even, + zero point, saturation (NaN to the lowest value). Bit-identical to the
// scalar loop (compiled with -ffp-contract=off: a fused multiply-add would round once where
// the nodes round twice). The 8-bit stores: quantize_store_simd.hpp. Target attributes,
// picked from active_isa() and CPUID.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "cpu_info.hpp"
#include "quantize.hpp"
#include "quantize_store_simd.hpp"
#include "simd.hpp"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers pass an "undefined" vector to the masked builtins (see gemm_int8_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace nxrt::cpu {
namespace {

template <typename A, typename B, typename Y>
void add_scalar(const A* a, const B* b, Y* y, int64_t n, const QdqAddParams& p) {
  for (int64_t i = 0; i < n; ++i) {
    float v = float(int64_t(a[i]) - int64_t(p.a_zp)) * p.a_scale;
    v += float(int64_t(b[i]) - int64_t(p.b_zp)) * p.b_scale;
    if (p.clamp) v = std::min(std::max(v, p.lo), p.hi);
    if constexpr (std::is_same_v<Y, float>) y[i] = v;
    else y[i] = saturate_round<Y>(std::nearbyint(v / p.y_scale) + float(p.y_zp));
  }
}

#if defined(__x86_64__)
#define NXRT_AVX2 __attribute__((target("avx2,fma")))
#define NXRT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

template <typename T>
NXRT_AVX2 inline __m256 dequant8(const T* x, __m256i zp, __m256 s) {
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x));
  const __m256i w = std::is_same_v<T, uint8_t> ? _mm256_cvtepu8_epi32(v) : _mm256_cvtepi8_epi32(v);
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(w, zp)), s);
}

// The 8-bit output: the Add's clamp, then quantize_store_simd.hpp's store. With no upper clamp
// (Relu) the min is skipped; with the clamp at 0 and a quotient bound already >= 0 (u8 zero
// point 0), the bound's max is the clamp itself.
struct AddStore {
  QuotientBounds bounds;
  bool clamp_lo, clamp_hi;
};
template <typename Y>
AddStore add_store(const QdqAddParams& p) {
  AddStore st{quotient_bounds<Y>(p.y_zp), p.clamp, p.clamp && p.hi != std::numeric_limits<float>::infinity()};
  if (st.clamp_lo && p.lo == 0.f && st.bounds.lo >= 0.f && p.y_scale > 0.f) st.clamp_lo = false;
  return st;
}

// add_store's quotients of 8 sums.
struct AddStore8 {
  __m256 lo, hi, ys, qlo, qhi;
  bool clamp_lo, clamp_hi;
};
NXRT_AVX2 inline __m256i quantize8(__m256 v, const AddStore8& s) {
  if (s.clamp_lo) v = _mm256_max_ps(s.lo, v);
  if (s.clamp_hi) v = _mm256_min_ps(s.hi, v);
  return quotient8(v, s.ys, s.qlo, s.qhi);
}

template <typename A, typename B, typename Y>
NXRT_AVX2 void add_avx2(const A* a, const B* b, Y* y, int64_t n, const QdqAddParams& p) {
  const __m256i za = _mm256_set1_epi32(p.a_zp), zb = _mm256_set1_epi32(p.b_zp);
  const __m256 sa = _mm256_set1_ps(p.a_scale), sb = _mm256_set1_ps(p.b_scale);
  int64_t i = 0;
  if constexpr (std::is_same_v<Y, float>) {
    const __m256 lo = _mm256_set1_ps(p.lo), hi = _mm256_set1_ps(p.hi);
    for (; i + 8 <= n; i += 8) {
      __m256 v = _mm256_add_ps(dequant8(a + i, za, sa), dequant8(b + i, zb, sb));
      if (p.clamp) v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
      _mm256_storeu_ps(y + i, v);
    }
  } else {
    const AddStore st = add_store<Y>(p);
    const AddStore8 s{_mm256_set1_ps(p.lo),        _mm256_set1_ps(p.hi),        _mm256_set1_ps(p.y_scale),
                      _mm256_set1_ps(st.bounds.lo), _mm256_set1_ps(st.bounds.hi), st.clamp_lo, st.clamp_hi};
    const __m256i yz16 = _mm256_set1_epi16(int16_t(p.y_zp)), yz32 = _mm256_set1_epi32(p.y_zp);
    for (; i + 32 <= n; i += 32) {
      __m256i q[4];
      for (int j = 0; j < 4; ++j) {
        const int64_t k = i + 8 * j;
        q[j] = quantize8(_mm256_add_ps(dequant8(a + k, za, sa), dequant8(b + k, zb, sb)), s);
      }
      store_quotients32(y + i, q, yz16);
    }
    for (; i + 8 <= n; i += 8)
      store_quotients8(y + i, quantize8(_mm256_add_ps(dequant8(a + i, za, sa), dequant8(b + i, zb, sb)), s), yz32);
  }
  add_scalar(a + i, b + i, y + i, n - i, p);
}

template <typename T>
NXRT_AVX512 inline __m512 dequant16(const T* x, __mmask16 m, __m512i zp, __m512 s) {
  const __m128i v = _mm_maskz_loadu_epi8(m, x);
  const __m512i w = std::is_same_v<T, uint8_t> ? _mm512_cvtepu8_epi32(v) : _mm512_cvtepi8_epi32(v);
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(w, zp)), s);
}

// add_store's quotients of 16 sums.
struct AddStore16 {
  __m512 lo, hi, ys, qlo, qhi;
  bool clamp_lo, clamp_hi;
};
NXRT_AVX512 inline __m512i quantize16(__m512 v, const AddStore16& s) {
  if (s.clamp_lo) v = _mm512_max_ps(s.lo, v);
  if (s.clamp_hi) v = _mm512_min_ps(s.hi, v);
  return quotient16(v, s.ys, s.qlo, s.qhi);
}

template <typename A, typename B, typename Y>
NXRT_AVX512 void add_avx512(const A* a, const B* b, Y* y, int64_t n, const QdqAddParams& p) {
  const __m512i za = _mm512_set1_epi32(p.a_zp), zb = _mm512_set1_epi32(p.b_zp);
  const __m512 sa = _mm512_set1_ps(p.a_scale), sb = _mm512_set1_ps(p.b_scale);
  if constexpr (std::is_same_v<Y, float>) {
    const __m512 lo = _mm512_set1_ps(p.lo), hi = _mm512_set1_ps(p.hi);
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1u);
      __m512 v = _mm512_add_ps(dequant16(a + i, m, za, sa), dequant16(b + i, m, zb, sb));
      if (p.clamp) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
      _mm512_mask_storeu_ps(y + i, m, v);
    }
  } else {
    const AddStore st = add_store<Y>(p);
    const AddStore16 s{_mm512_set1_ps(p.lo),        _mm512_set1_ps(p.hi),        _mm512_set1_ps(p.y_scale),
                       _mm512_set1_ps(st.bounds.lo), _mm512_set1_ps(st.bounds.hi), st.clamp_lo, st.clamp_hi};
    const __m512i yz16 = _mm512_set1_epi16(int16_t(p.y_zp)), yz32 = _mm512_set1_epi32(p.y_zp);
    const __mmask16 all = 0xffff;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
      __m512i q[4];
      for (int j = 0; j < 4; ++j) {
        const int64_t k = i + 16 * j;
        q[j] = quantize16(_mm512_add_ps(dequant16(a + k, all, za, sa), dequant16(b + k, all, zb, sb)), s);
      }
      store_quotients64(y + i, q, yz16);
    }
    for (; i < n; i += 16) {
      const __mmask16 m = n - i >= 16 ? all : __mmask16((1u << (n - i)) - 1u);
      const __m512 v = _mm512_add_ps(dequant16(a + i, m, za, sa), dequant16(b + i, m, zb, sb));
      store_low_bytes(y + i, m, _mm512_add_epi32(quantize16(v, s), yz32));  // low bytes: exact in range
    }
  }
}
#endif

}  // namespace

template <typename A, typename B, typename Y>
void qdq_add(const A* a, const B* b, Y* y, int64_t n, const QdqAddParams& p) {
#if defined(__x86_64__)
  if (avx512bw_active()) return add_avx512(a, b, y, n, p);
  if (active_isa() >= Isa::avx2) return add_avx2(a, b, y, n, p);
#endif
  add_scalar(a, b, y, n, p);
}

#define NXRT_QDQ_ADD(A, B)                                                                    \
  template void qdq_add<A, B, uint8_t>(const A*, const B*, uint8_t*, int64_t, const QdqAddParams&); \
  template void qdq_add<A, B, int8_t>(const A*, const B*, int8_t*, int64_t, const QdqAddParams&);   \
  template void qdq_add<A, B, float>(const A*, const B*, float*, int64_t, const QdqAddParams&);
NXRT_QDQ_ADD(uint8_t, uint8_t)
NXRT_QDQ_ADD(uint8_t, int8_t)
NXRT_QDQ_ADD(int8_t, uint8_t)
NXRT_QDQ_ADD(int8_t, int8_t)
#undef NXRT_QDQ_ADD

}  // namespace nxrt::cpu
