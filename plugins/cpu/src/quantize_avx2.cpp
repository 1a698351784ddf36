// AVX2 runs of QuantizeLinear / DequantizeLinear over elements that share one scale and
// zero point (quantize.hpp). The scalar operations, 8 lanes at a time: x / scale (a true
// division, as the scalar code), vroundps to nearest even, + zero point in float, NaN and
// the range saturated to Q; dequantize widens to int32, subtracts, converts (exact for 8-bit
// values) and multiplies. Bit-identical to the scalar loops. Target attribute, called only
// after CPUID reports AVX2.
#include "quantize.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

namespace nxrt::cpu {
namespace {

#define NXRT_AVX2 __attribute__((target("avx2,fma")))

// 8 floats, already integral and within [lo, hi], to 8 bytes.
NXRT_AVX2 inline __m128i to_bytes(__m256 r) {
  const __m256i i = _mm256_cvtps_epi32(r);
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
  return _mm_packs_epi16(w, w);  // exact for [-128, 127]; uint8 values are fixed below
}

template <typename Q>
NXRT_AVX2 void quantize_run(const float* x, int64_t n, float scale, int32_t zero_point, Q* y) {
  constexpr bool u8 = std::is_same_v<Q, uint8_t>;
  const __m256 s = _mm256_set1_ps(scale), zp = _mm256_set1_ps(float(zero_point));
  const __m256 lo = _mm256_set1_ps(u8 ? 0.f : -128.f), hi = _mm256_set1_ps(u8 ? 255.f : 127.f);
  // uint8 goes through int8 lanes shifted by 128, so the signed packs stay exact.
  const __m256 shift = _mm256_set1_ps(u8 ? 128.f : 0.f);
  const __m128i flip = _mm_set1_epi8(u8 ? char(0x80) : 0);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 r = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_add_ps(r, zp);
    r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);  // max returns lo for NaN, as the scalar saturate
    const __m128i b = _mm_xor_si128(to_bytes(_mm256_sub_ps(r, shift)), flip);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), b);
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
