// AVX-512 BW run of QuantizeLinear over elements that share one scale and zero point
// (quantize.hpp): quantize_store_simd.hpp's store, 64 values a step, masked 16-lane steps for
// the rest. Target attribute, called only after CPUID reports AVX-512 BW. A network's float
// input (cnn_int8's 1x3x224x224): 29 -> 10 us against the AVX2 run, hot, one thread.
#include "quantize.hpp"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers pass an "undefined" vector to the masked builtins (see gemm_int8_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "quantize_store_simd.hpp"
#include "simd.hpp"

namespace nxrt::cpu {
namespace {

#define NXRT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

template <typename Q>
NXRT_AVX512 void quantize_run(const float* x, int64_t n, float scale, int32_t zero_point, Q* y) {
  const QuotientBounds b = quotient_bounds<Q>(zero_point);
  const __m512 s = _mm512_set1_ps(scale), lo = _mm512_set1_ps(b.lo), hi = _mm512_set1_ps(b.hi);
  const __m512i zp16 = _mm512_set1_epi16(int16_t(zero_point)), zp32 = _mm512_set1_epi32(zero_point);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512i q[4];
    for (int j = 0; j < 4; ++j) q[j] = quotient16(_mm512_loadu_ps(x + i + 16 * j), s, lo, hi);
    store_quotients64(y + i, q, zp16);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1u);
    store_low_bytes(y + i, m, _mm512_add_epi32(quotient16(_mm512_maskz_loadu_ps(m, x + i), s, lo, hi), zp32));
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
