// 16 x 16 byte transposes in AVX-512 registers, for kernels that make bytes channels-last (a
// pixel's channels along a vector) and store them in NCHW planes (conv_int8_nhwc.cpp,
// pooling_channels_last.cpp).
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>

namespace nxrt::cpu::avx512 {

#define NXRT_TB __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline))

// Each 128-bit lane of r[0..15] (row i: 16 bytes) transposed in place: lane L of r[k] becomes
// byte k of lane L of every input row (unpacks by 8, 16, 32, 64 bits: r[k] ends as column k).
NXRT_TB inline void transpose16x16_lanes(__m512i (&r)[16]) {
  __m512i t[16];
  for (int p = 0; p < 8; ++p) {
    t[2 * p] = _mm512_unpacklo_epi8(r[2 * p], r[2 * p + 1]);
    t[2 * p + 1] = _mm512_unpackhi_epi8(r[2 * p], r[2 * p + 1]);
  }
  for (int q = 0; q < 4; ++q)
    for (int h = 0; h < 2; ++h) {
      r[4 * q + 2 * h] = _mm512_unpacklo_epi16(t[4 * q + h], t[4 * q + 2 + h]);
      r[4 * q + 2 * h + 1] = _mm512_unpackhi_epi16(t[4 * q + h], t[4 * q + 2 + h]);
    }
  for (int b = 0; b < 2; ++b)
    for (int m = 0; m < 4; ++m) {
      t[8 * b + 2 * m] = _mm512_unpacklo_epi32(r[8 * b + m], r[8 * b + 4 + m]);
      t[8 * b + 2 * m + 1] = _mm512_unpackhi_epi32(r[8 * b + m], r[8 * b + 4 + m]);
    }
  for (int n = 0; n < 8; ++n) {
    r[2 * n] = _mm512_unpacklo_epi64(t[n], t[8 + n]);
    r[2 * n + 1] = _mm512_unpackhi_epi64(t[n], t[8 + n]);
  }
}

// The bytes of 128-bit lane L of v where m is set, to dst.
template <int L>
NXRT_TB inline void store_lane(char* dst, __mmask16 m, __m512i v) {
  _mm_mask_storeu_epi8(dst, m, _mm512_extracti32x4_epi32(v, L));
}

// rows [n <= 16 pixels][64 bytes at `pitch`] (channel c of pixel i at rows + i * pitch + c;
// nv * 16 channels used) to NCHW planes: channel c's n bytes at y + c * plane.
NXRT_TB inline void store_pixels_transposed(const uint8_t* rows, int64_t pitch, int64_t n, int nv, char* y,
                                            int64_t plane) {
  const __mmask16 m = __mmask16((1u << n) - 1u);
  __m512i v[16];
  for (int i = 0; i < 16; ++i) v[i] = _mm512_loadu_si512(rows + (i < n ? i : 0) * pitch);
  transpose16x16_lanes(v);  // lane L of v[k]: channel 16 L + k of the n pixels
  for (int k = 0; k < 16; ++k) {
    store_lane<0>(y + k * plane, m, v[k]);
    if (nv > 1) store_lane<1>(y + (16 + k) * plane, m, v[k]);
    if (nv > 2) store_lane<2>(y + (32 + k) * plane, m, v[k]);
    if (nv > 3) store_lane<3>(y + (48 + k) * plane, m, v[k]);
  }
}

#undef NXRT_TB

}  // namespace nxrt::cpu::avx512
#endif
