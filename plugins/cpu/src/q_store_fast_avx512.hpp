// The 8-bit QOutput store's float shortcut (q_fast_path, gemm_int8.hpp) one vector at a time:
// the AVX-512 store's (gemm_int8_avx512.cpp) and those of kernels that store in their own
// loops (conv_int8_nhwc.cpp, conv_int8_winograd.cpp).
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>

#include "gemm_int8.hpp"

namespace nxrt::cpu {

#define NXRT_QFAST __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"), always_inline)) inline

// The epilogue's constants for q_fast_bytes.
struct QFastConsts {
  __m512 vlo, vhi, fzp, c2lo, c2hi, fqlo, fqhi, abs_mask;
  __m512i zpi;
  bool two_clamps;
};
NXRT_QFAST QFastConsts q_fast_consts(const QEpilogue& e) {
  const bool u8 = e.type == QType::U8;
  return {_mm512_set1_ps(e.fast_lo),
          _mm512_set1_ps(e.fast_hi),
          _mm512_set1_ps(float(e.zero_point)),
          _mm512_set1_ps(float(e.lo)),
          _mm512_set1_ps(float(e.hi)),
          _mm512_set1_ps(u8 ? 0.f : -128.f),
          _mm512_set1_ps(u8 ? 255.f : 127.f),
          _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff)),
          _mm512_set1_epi32(e.zero_point),
          e.fast_two_clamps};
}

// v (the sum plus the bias, wrapping) through the shortcut with a channel's fast_m, fast_b and
// fast_lim per lane: false where a lane of `lanes` lies within the margin of a half-integer
// (the caller stores that vector by the exact steps), else its 16 bytes in out.
NXRT_QFAST bool q_fast_bytes(const QFastConsts& k, __m512i v, __m512 fm, __m512 fb, __m512 lim, __mmask16 lanes,
                             __m128i& out) {
  __m512 q = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), fm, fb);
  q = _mm512_min_ps(k.vhi, _mm512_max_ps(k.vlo, q));
  const __m512 r = _mm512_roundscale_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  if (_mm512_mask_cmp_ps_mask(lanes, _mm512_and_ps(_mm512_sub_ps(q, r), k.abs_mask), lim, _CMP_NLT_UQ)) return false;
  __m512i o;
  if (k.two_clamps) {  // the saturation, then [lo, hi]
    const __m512 f = _mm512_min_ps(k.fqhi, _mm512_max_ps(k.fqlo, _mm512_add_ps(r, k.fzp)));
    o = _mm512_cvtps_epi32(_mm512_min_ps(k.c2hi, _mm512_max_ps(k.c2lo, f)));
  } else {  // r within the integer clamp - zp already (fast_lo, fast_hi)
    o = _mm512_add_epi32(_mm512_cvtps_epi32(r), k.zpi);
  }
  out = _mm512_cvtepi32_epi8(o);
  return true;
}

}  // namespace nxrt::cpu
#endif
