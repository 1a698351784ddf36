// AVX2 runs of QuantizeLinear / DequantizeLinear over elements that share one scale and
// zero point (quantize.hpp). Quantize: quantize_store_simd.hpp's store, 32 values a step,
// then 8, then the scalar loop. Dequantize widens to int32, subtracts, converts (exact for
// 8-bit values) and multiplies. Bit-identical to the scalar loops. Target attribute, called
// only after CPUID reports AVX2.
#include "quantize.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "quantize_store_simd.hpp"

namespace nxrt::cpu {
namespace {

#define NXRT_AVX2 __attribute__((target("avx2,fma")))

template <typename Q>
NXRT_AVX2 void quantize_run(const float* x, int64_t n, float scale, int32_t zero_point, Q* y) {
  const QuotientBounds b = quotient_bounds<Q>(zero_point);
  const __m256 s = _mm256_set1_ps(scale), lo = _mm256_set1_ps(b.lo), hi = _mm256_set1_ps(b.hi);
  const __m256i zp16 = _mm256_set1_epi16(int16_t(zero_point)), zp32 = _mm256_set1_epi32(zero_point);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i q[4];
    for (int j = 0; j < 4; ++j) q[j] = quotient8(_mm256_loadu_ps(x + i + 8 * j), s, lo, hi);
    store_quotients32(y + i, q, zp16);
  }
  for (; i + 8 <= n; i += 8) store_quotients8(y + i, quotient8(_mm256_loadu_ps(x + i), s, lo, hi), zp32);
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
