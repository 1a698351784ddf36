// HardSwish, x * clamp(x / 6 + 1/2, 0, 1), as the node and every fused conv / GEMM store
// compute it (scalar, AVX-512, AVX2). NaN stays NaN (x * anything).
#pragma once
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace nxrt::cpu {

inline float hard_swish(float x) {
  float g = x * (1.f / 6.f) + 0.5f;
  g = g < 0.f ? 0.f : g;
  g = g > 1.f ? 1.f : g;
  return x * g;
}

// The vector forms' arithmetic on one float (the gate by one fused multiply-add), for a scalar
// store that must match them bit for bit (gemm_narrow.cpp).
inline float hard_swish_fused(float x) {
  float g = std::fma(x, 1.f / 6.f, 0.5f);
  g = g > 0.f ? g : 0.f;  // max(g, 0), then min(1, .), as the vector forms order them
  g = 1.f < g ? 1.f : g;
  return x * g;
}

#if defined(__x86_64__)
// max / min return their second operand when either is NaN: the gate is 0, x * 0 stays NaN.
// (Zero-masked forms with a full mask: GCC 12's plain ones warn about _mm512_undefined_ps.)
__attribute__((target("avx512f"), always_inline)) inline __m512 hard_swish_avx512(__m512 x) {
  const __m512 g = _mm512_fmadd_ps(x, _mm512_set1_ps(1.f / 6.f), _mm512_set1_ps(0.5f));
  return _mm512_mul_ps(x, _mm512_maskz_min_ps(0xFFFF, _mm512_set1_ps(1.f), _mm512_maskz_max_ps(0xFFFF, g, _mm512_setzero_ps())));
}

__attribute__((target("avx2,fma"), always_inline)) inline __m256 hard_swish_avx2(__m256 x) {
  const __m256 g = _mm256_fmadd_ps(x, _mm256_set1_ps(1.f / 6.f), _mm256_set1_ps(0.5f));
  return _mm256_mul_ps(x, _mm256_min_ps(_mm256_set1_ps(1.f), _mm256_max_ps(g, _mm256_setzero_ps())));
}
#endif

}  // namespace nxrt::cpu
