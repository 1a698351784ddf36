// The fused QDQ Add (quantize.hpp): DequantizeLinear twice, a float add, [clamp],
// [QuantizeLinear], one element at a time in registers. The scalar loop is the nodes' code;
// the AVX2 (8 lanes, scalar tail) and AVX-512 (16 lanes, masked tail) runs do the same float
// operations: exact int -> float of (q - zp), one multiply, one add, max / min with the
// operands ordered as std::max / std::min (NaN and -0 kept alike), a true division, round
// to nearest even, + zero point, saturation (NaN to the lowest value). Bit-identical to the
// scalar loop (compiled with -ffp-contract=off: a fused multiply-add would round once where
// the nodes round twice). Target attributes, picked from active_isa() and CPUID.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "cpu_info.hpp"
#include "quantize.hpp"
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

template <typename A, typename B, typename Y>
NXRT_AVX2 void add_avx2(const A* a, const B* b, Y* y, int64_t n, const QdqAddParams& p) {
  const __m256i za = _mm256_set1_epi32(p.a_zp), zb = _mm256_set1_epi32(p.b_zp);
  const __m256 sa = _mm256_set1_ps(p.a_scale), sb = _mm256_set1_ps(p.b_scale), ys = _mm256_set1_ps(p.y_scale);
  const __m256 lo = _mm256_set1_ps(p.lo), hi = _mm256_set1_ps(p.hi), yz = _mm256_set1_ps(float(p.y_zp));
  constexpr bool u8 = std::is_same_v<Y, uint8_t>;
  const __m256 qlo = _mm256_set1_ps(u8 ? 0.f : -128.f), qhi = _mm256_set1_ps(u8 ? 255.f : 127.f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_add_ps(dequant8(a + i, za, sa), dequant8(b + i, zb, sb));
    if (p.clamp) v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
    if constexpr (std::is_same_v<Y, float>) {
      _mm256_storeu_ps(y + i, v);
    } else {
      __m256 r = _mm256_round_ps(_mm256_div_ps(v, ys), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      r = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(r, yz), qlo), qhi);  // max gives qlo for NaN
      const __m256i q = _mm256_cvtps_epi32(r);
      const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), u8 ? _mm_packus_epi16(w, w) : _mm_packs_epi16(w, w));
    }
  }
  add_scalar(a + i, b + i, y + i, n - i, p);
}

template <typename T>
NXRT_AVX512 inline __m512 dequant16(const T* x, __mmask16 m, __m512i zp, __m512 s) {
  const __m128i v = _mm_maskz_loadu_epi8(m, x);
  const __m512i w = std::is_same_v<T, uint8_t> ? _mm512_cvtepu8_epi32(v) : _mm512_cvtepi8_epi32(v);
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(w, zp)), s);
}

template <typename A, typename B, typename Y>
NXRT_AVX512 void add_avx512(const A* a, const B* b, Y* y, int64_t n, const QdqAddParams& p) {
  const __m512i za = _mm512_set1_epi32(p.a_zp), zb = _mm512_set1_epi32(p.b_zp);
  const __m512 sa = _mm512_set1_ps(p.a_scale), sb = _mm512_set1_ps(p.b_scale), ys = _mm512_set1_ps(p.y_scale);
  const __m512 lo = _mm512_set1_ps(p.lo), hi = _mm512_set1_ps(p.hi), yz = _mm512_set1_ps(float(p.y_zp));
  constexpr bool u8 = std::is_same_v<Y, uint8_t>;
  const __m512 qlo = _mm512_set1_ps(u8 ? 0.f : -128.f), qhi = _mm512_set1_ps(u8 ? 255.f : 127.f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1u);
    __m512 v = _mm512_add_ps(dequant16(a + i, m, za, sa), dequant16(b + i, m, zb, sb));
    if (p.clamp) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
    if constexpr (std::is_same_v<Y, float>) {
      _mm512_mask_storeu_ps(y + i, m, v);
    } else {
      __m512 r = _mm512_roundscale_ps(_mm512_div_ps(v, ys), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      r = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(r, yz), qlo), qhi);
      store_low_bytes(y + i, m, _mm512_cvtps_epi32(r));  // low bytes: exact in range
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
