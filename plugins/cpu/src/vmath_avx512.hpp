// vmath.hpp's exp and erfc on 16 lanes with AVX-512 intrinsics, for the kernels that are
// mostly these functions (Softmax, the exact-Gelu chain). GCC's vectorisation of the scalar
// forms spilled Softmax's lane reductions to the stack (128-wide rows: 0.6 ns an element, now
// 0.25; the Gelu chain 0.75 -> 0.56, bound by its ~40 vector instructions per 16 elements).
// vscalefps puts 2^n into the result with IEEE overflow to inf and gradual underflow, so
// the clamps are only wide enough to keep the range reduction exact.
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>

namespace nxrt::cpu::vm512 {

#define NXRT_VM512 __attribute__((target("avx512f"), always_inline)) inline

// e^x: n = round(x log2 e), r = x - n ln2 in two parts (|r| <= ln2 / 2), vmath.hpp's
// degree-6 Taylor polynomial on r, scaled by 2^n. max(lo, x) and min(hi, .) return x when x
// is NaN (their second operand), so NaN propagates; below -104 the result is 0, above
// 88.73 inf (n = 128).
NXRT_VM512 __m512 exp(__m512 x) {
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(88.8f), _mm512_max_ps(_mm512_set1_ps(-104.f), x));
  const __m512 fn = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(-2.12194440e-4f), r);
  // Estrin's scheme: 3 dependent FMAs where Horner's has 6 (a shorter chain per vector).
  const __m512 r2 = _mm512_mul_ps(r, r), r4 = _mm512_mul_ps(r2, r2);
  const __m512 a = _mm512_add_ps(r, _mm512_set1_ps(1.f));
  const __m512 b = _mm512_fmadd_ps(r, _mm512_set1_ps(1.f / 6.f), _mm512_set1_ps(0.5f));
  const __m512 c = _mm512_fmadd_ps(r, _mm512_set1_ps(1.f / 120.f), _mm512_set1_ps(1.f / 24.f));
  const __m512 hi = _mm512_fmadd_ps(r2, _mm512_set1_ps(1.f / 720.f), c);
  const __m512 p = _mm512_fmadd_ps(r4, hi, _mm512_fmadd_ps(r2, b, a));
  return _mm512_scalef_ps(p, fn);
}

// 1 / d for d >= 1 (or any normal d): vrcp14ps and one Newton step (relative error ~2^-28
// before rounding), three instructions where vdivps holds its unit for several cycles.
NXRT_VM512 __m512 recip(__m512 d) {
  const __m512 r = _mm512_rcp14_ps(d);
  return _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.f)), r);
}

// x / c given inv = 1 / c: the product, corrected by its residual x - q c (an FMA computes it
// exactly), is the quotient rounded to nearest but in rare double-rounding cases (1 ulp).
NXRT_VM512 __m512 div_by(__m512 x, __m512 c, __m512 inv) {
  const __m512 q = _mm512_mul_ps(x, inv);
  return _mm512_fmadd_ps(_mm512_fnmadd_ps(q, c, x), inv, q);
}

// t c1 + c0.
NXRT_VM512 __m512 pair(__m512 t, float c1, float c0) {
  return _mm512_fmadd_ps(t, _mm512_set1_ps(c1), _mm512_set1_ps(c0));
}

// erfc(z) for z >= 0 (vmath.hpp's erfc_nonneg: the Numerical Recipes erfcc fit).
NXRT_VM512 __m512 erfc_nonneg(__m512 z) {
  const __m512 t = recip(_mm512_fmadd_ps(z, _mm512_set1_ps(0.5f), _mm512_set1_ps(1.f)));
  // The fit's degree-9 polynomial in t by Estrin's scheme (4 dependent FMAs, not 9).
  const __m512 t2 = _mm512_mul_ps(t, t), t4 = _mm512_mul_ps(t2, t2), t8 = _mm512_mul_ps(t4, t4);
  const __m512 q01 = pair(t, 1.00002368f, -1.26551223f), q23 = pair(t, 0.09678418f, 0.37409196f);
  const __m512 q45 = pair(t, 0.27886807f, -0.18628806f), q67 = pair(t, 1.48851587f, -1.13520398f);
  const __m512 q89 = pair(t, 0.17087277f, -0.82215223f);
  const __m512 q0_3 = _mm512_fmadd_ps(t2, q23, q01), q4_7 = _mm512_fmadd_ps(t2, q67, q45);
  const __m512 q = _mm512_fmadd_ps(t8, q89, _mm512_fmadd_ps(t4, q4_7, q0_3));
  return _mm512_mul_ps(t, exp(_mm512_fnmadd_ps(z, z, q)));
}

#undef NXRT_VM512

}  // namespace nxrt::cpu::vm512
#endif
