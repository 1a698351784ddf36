// A 16 x 16 float transpose in AVX-512 registers (unpacks within 128-bit lanes, then
// 128-bit lane shuffles: 64 shuffles), for kernels that store a GEMM computed transposed.
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>

namespace nxrt::cpu::avx512 {

// r[i] = row i in, column i out.
__attribute__((target("avx512f"), always_inline)) inline void transpose16x16(__m512 (&r)[16]) {
  __m512 a[16], b[16];
  for (int i = 0; i < 8; ++i) {  // (maskz forms: GCC 12 warns about the plain ones' pass-through)
    a[2 * i] = _mm512_maskz_unpacklo_ps(0xFFFF, r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_maskz_unpackhi_ps(0xFFFF, r[2 * i], r[2 * i + 1]);
  }
  // b[4j + k], 128-bit lane L: column 4L + k of rows 4j .. 4j + 3.
  for (int j = 0; j < 4; ++j) {
    const __m512d a0 = _mm512_castps_pd(a[4 * j]), a1 = _mm512_castps_pd(a[4 * j + 1]);
    const __m512d a2 = _mm512_castps_pd(a[4 * j + 2]), a3 = _mm512_castps_pd(a[4 * j + 3]);
    b[4 * j] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, a0, a2));
    b[4 * j + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, a0, a2));
    b[4 * j + 2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, a1, a3));
    b[4 * j + 3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, a1, a3));
  }
  // Column 4L + k: lane L of b[k], b[4 + k], b[8 + k], b[12 + k].
  for (int k = 0; k < 4; ++k) {
    const __m512 e0 = _mm512_maskz_shuffle_f32x4(0xFFFF, b[k], b[4 + k], 0x88),
                 e1 = _mm512_maskz_shuffle_f32x4(0xFFFF, b[k], b[4 + k], 0xDD);
    const __m512 f0 = _mm512_maskz_shuffle_f32x4(0xFFFF, b[8 + k], b[12 + k], 0x88),
                 f1 = _mm512_maskz_shuffle_f32x4(0xFFFF, b[8 + k], b[12 + k], 0xDD);
    r[k] = _mm512_maskz_shuffle_f32x4(0xFFFF, e0, f0, 0x88);
    r[8 + k] = _mm512_maskz_shuffle_f32x4(0xFFFF, e0, f0, 0xDD);
    r[4 + k] = _mm512_maskz_shuffle_f32x4(0xFFFF, e1, f1, 0x88);
    r[12 + k] = _mm512_maskz_shuffle_f32x4(0xFFFF, e1, f1, 0xDD);
  }
}

}  // namespace nxrt::cpu::avx512
#endif
