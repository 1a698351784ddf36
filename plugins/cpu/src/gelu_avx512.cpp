// The exact-Gelu chain with a == 1 (elementwise.cpp's u_gelu_erfc_chain) on AVX-512:
// y = (erfc(-x / c) * x) * h, erfc(-u) taken as erfc(|u|) or 2 - erfc(|u|), the row's tail
// under a mask.
#include "elementwise.hpp"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers pass an "undefined" vector to the masked builtins (see gemm_int8_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "vmath_avx512.hpp"

namespace nxrt::cpu {
namespace {

__attribute__((target("avx512f"), always_inline)) inline __m512 gelu16(__m512 x, __m512 c, __m512 inv_c, __m512 h) {
  const __m512 u = vm512::div_by(x, c, inv_c);
  const __m512 e = vm512::erfc_nonneg(_mm512_abs_ps(u));
  const __mmask16 neg = _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_LT_OQ);
  __m512 one_plus_erf = _mm512_mask_blend_ps(neg, _mm512_sub_ps(_mm512_set1_ps(2.f), e), e);
  one_plus_erf = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(u, u, _CMP_UNORD_Q), one_plus_erf, u);  // NaN stays NaN
  return _mm512_mul_ps(_mm512_mul_ps(one_plus_erf, x), h);
}

__attribute__((target("avx512f"))) void gelu_erfc_chain_avx512(const float* x, float* y, int64_t n, float c, float h) {
  const __m512 cv = _mm512_set1_ps(c), inv = _mm512_set1_ps(1.f / c), hv = _mm512_set1_ps(h);
  int64_t i = 0;
  // Four independent vectors a step: one is a chain of ~40 dependent instructions.
  for (; i + 64 <= n; i += 64) {
    __m512 v[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) v[j] = gelu16(_mm512_loadu_ps(x + i + 16 * j), cv, inv, hv);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(y + i + 16 * j, v[j]);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, m, gelu16(_mm512_maskz_loadu_ps(m, x + i), cv, inv, hv));
  }
}

}  // namespace

GeluChainFn gelu_erfc_chain_avx512_fn() { return &gelu_erfc_chain_avx512; }

}  // namespace nxrt::cpu
#else
namespace nxrt::cpu {
GeluChainFn gelu_erfc_chain_avx512_fn() { return nullptr; }
}  // namespace nxrt::cpu
#endif
