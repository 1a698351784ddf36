// AVX-512 BW run of QuantizeLinear over elements that share one scale and zero point
// (quantize.hpp): x / scale (a true division, as the scalar code), clamped to Q's range minus
// the zero point in float, converted to nearest even, + zero point as int16 after packs; four
// vectors a 64-byte store. The same integers as the scalar nearbyint + zero point + saturate:
// rounding is monotone and the bounds are integers; NaN takes the lower bound (max returns its
// second operand for NaN). Masked 16-lane steps for the rest. Target attribute, called only
// after CPUID reports AVX-512 BW. A network's float input (cnn_int8's 1x3x224x224): 29 -> 10 us
// against the AVX2 run, hot, one thread.
#include "quantize.hpp"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers pass an "undefined" vector to the masked builtins (see gemm_int8_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <type_traits>

#include "simd.hpp"

namespace nxrt::cpu {
namespace {

#define NXRT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

// x / s clamped to [lo, hi] (integers), to int32 at nearest even.
NXRT_AVX512 inline __m512i rounded(__m512 x, __m512 s, __m512 lo, __m512 hi) {
  return _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_div_ps(x, s), lo), hi));
}

template <typename Q>
NXRT_AVX512 void quantize_run(const float* x, int64_t n, float scale, int32_t zero_point, Q* y) {
  constexpr bool u8 = std::is_same_v<Q, uint8_t>;
  const __m512 s = _mm512_set1_ps(scale);
  const __m512 lo = _mm512_set1_ps((u8 ? 0.f : -128.f) - float(zero_point));
  const __m512 hi = _mm512_set1_ps((u8 ? 255.f : 127.f) - float(zero_point));
  const __m512i zp16 = _mm512_set1_epi16(int16_t(zero_point)), zp32 = _mm512_set1_epi32(zero_point);
  // packs / packus interleave the four vectors by 128-bit lanes; this puts them back.
  const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i q0 = rounded(_mm512_loadu_ps(x + i), s, lo, hi);
    const __m512i q1 = rounded(_mm512_loadu_ps(x + i + 16), s, lo, hi);
    const __m512i q2 = rounded(_mm512_loadu_ps(x + i + 32), s, lo, hi);
    const __m512i q3 = rounded(_mm512_loadu_ps(x + i + 48), s, lo, hi);
    // In Q's range minus the zero point: int16 holds them, + zero point lands in Q's range.
    const __m512i w01 = _mm512_add_epi16(_mm512_packs_epi32(q0, q1), zp16);
    const __m512i w23 = _mm512_add_epi16(_mm512_packs_epi32(q2, q3), zp16);
    const __m512i bytes = u8 ? _mm512_packus_epi16(w01, w23) : _mm512_packs_epi16(w01, w23);
    _mm512_storeu_si512(y + i, _mm512_permutexvar_epi32(order, bytes));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1u);
    store_low_bytes(y + i, m, _mm512_add_epi32(rounded(_mm512_maskz_loadu_ps(m, x + i), s, lo, hi), zp32));
  }
}

}  // namespace

template <>
QuantizeRun<uint8_t> quantize_run_avx512<uint8_t>() { return &quantize_run<uint8_t>; }
template <>
QuantizeRun<int8_t> quantize_run_avx512<int8_t>() { return &quantize_run<int8_t>; }

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
template <>
QuantizeRun<uint8_t> quantize_run_avx512<uint8_t>() { return nullptr; }
template <>
QuantizeRun<int8_t> quantize_run_avx512<int8_t>() { return nullptr; }
}  // namespace nxrt::cpu
#endif
