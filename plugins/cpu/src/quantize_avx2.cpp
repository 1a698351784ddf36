// AVX2 runs of QuantizeLinear / DequantizeLinear over elements that share one scale and
// zero point (quantize.hpp). Quantize: x / scale (a true division, as the scalar code),
// clamped to Q's range minus the zero point in float, converted at nearest even, + zero point
// as int16 after packs, 32 values a store (the same integers as nearbyint + zero point +
// saturate: rounding is monotone, the bounds are integers, NaN takes the lower bound as max
// returns its second operand). Dequantize widens to int32, subtracts, converts (exact for
// 8-bit values) and multiplies. Bit-identical to the scalar loops. Target attribute, called
// only after CPUID reports AVX2.
#include "quantize.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <type_traits>

namespace nxrt::cpu {
namespace {

#define NXRT_AVX2 __attribute__((target("avx2,fma")))

// x / s clamped to [lo, hi] (integers), to int32 at nearest even.
NXRT_AVX2 inline __m256i rounded(__m256 x, __m256 s, __m256 lo, __m256 hi) {
  return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_div_ps(x, s), lo), hi));
}

template <typename Q>
NXRT_AVX2 void quantize_run(const float* x, int64_t n, float scale, int32_t zero_point, Q* y) {
  constexpr bool u8 = std::is_same_v<Q, uint8_t>;
  const __m256 s = _mm256_set1_ps(scale);
  const __m256 lo = _mm256_set1_ps((u8 ? 0.f : -128.f) - float(zero_point));
  const __m256 hi = _mm256_set1_ps((u8 ? 255.f : 127.f) - float(zero_point));
  const __m256i zp16 = _mm256_set1_epi16(int16_t(zero_point)), zp32 = _mm256_set1_epi32(zero_point);
  // packs / packus work within 128-bit lanes: dwords 0-3 hold the first halves of the four
  // vectors, 4-7 the second halves; this puts each vector's 8 bytes together.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i q0 = rounded(_mm256_loadu_ps(x + i), s, lo, hi);
    const __m256i q1 = rounded(_mm256_loadu_ps(x + i + 8), s, lo, hi);
    const __m256i q2 = rounded(_mm256_loadu_ps(x + i + 16), s, lo, hi);
    const __m256i q3 = rounded(_mm256_loadu_ps(x + i + 24), s, lo, hi);
    // In Q's range minus the zero point: int16 holds them, + zero point lands in Q's range.
    const __m256i w01 = _mm256_add_epi16(_mm256_packs_epi32(q0, q1), zp16);
    const __m256i w23 = _mm256_add_epi16(_mm256_packs_epi32(q2, q3), zp16);
    const __m256i bytes = u8 ? _mm256_packus_epi16(w01, w23) : _mm256_packs_epi16(w01, w23);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm256_permutevar8x32_epi32(bytes, order));
  }
  for (; i + 8 <= n; i += 8) {
    const __m256i q = _mm256_add_epi32(rounded(_mm256_loadu_ps(x + i), s, lo, hi), zp32);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), u8 ? _mm_packus_epi16(w, w) : _mm_packs_epi16(w, w));
  }
  for (; i < n; ++i) y[i] = saturate_round<Q>(std::nearbyint(x[i] / scale) + float(zero_point));
}

template <typename T>
NXRT_AVX2 void dequantize_run(const T* x, int64_t n, float scale, int32_t zero_point, float* y) {
  const __m256 s = _mm256_set1_ps(scale);
  const __m256i zp = _mm256_set1_epi32(zero_point);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i));
    const __m256i v = std::is_same_v<T, uint8_t> ? _mm256_cvtepu8_epi32(b) : _mm256_cvtepi8_epi32(b);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v, zp)), s));
  }
  for (; i < n; ++i) y[i] = float(int64_t(x[i]) - int64_t(zero_point)) * scale;
}

}  // namespace

template <>
QuantizeRun<uint8_t> quantize_run_avx2<uint8_t>() { return &quantize_run<uint8_t>; }
template <>
QuantizeRun<int8_t> quantize_run_avx2<int8_t>() { return &quantize_run<int8_t>; }
template <>
DequantizeRun<uint8_t> dequantize_run_avx2<uint8_t>() { return &dequantize_run<uint8_t>; }
template <>
DequantizeRun<int8_t> dequantize_run_avx2<int8_t>() { return &dequantize_run<int8_t>; }

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
template <>
QuantizeRun<uint8_t> quantize_run_avx2<uint8_t>() { return nullptr; }
template <>
QuantizeRun<int8_t> quantize_run_avx2<int8_t>() { return nullptr; }
template <>
DequantizeRun<uint8_t> dequantize_run_avx2<uint8_t>() { return nullptr; }
template <>
DequantizeRun<int8_t> dequantize_run_avx2<int8_t>() { return nullptr; }
}  // namespace nxrt::cpu
#endif
