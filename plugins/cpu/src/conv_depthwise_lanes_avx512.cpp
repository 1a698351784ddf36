// The depthwise kernel for small planes (out_w <= 8) with 16 channels as the AVX-512 lanes
// (conv_depthwise.hpp): the AVX2 one's layout at twice the width. The transposes stay 8x8
// AVX2 ones, one per half of the 16 channels.
#include "conv_depthwise.hpp"
#include "hard_swish.hpp"
#include "simd.hpp"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers pass an "undefined" vector to the 256 <-> 512-bit casts' builtins.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

namespace nxrt::cpu {

#define NXRT_AVX512 __attribute__((target("avx512f,avx2,fma")))

NXRT_AVX512 void dw_planes16_avx512(const ConvShape& s, const DwPlanes& p, const ConvPostOps& post) {
  const int64_t K = s.k_h, taps = K * K, SH = s.stride_h, SW = s.stride_w, OH = s.out_h, OW = s.out_w;
  const int64_t hp = (OH - 1) * SH + K, wp = (OW - 1) * SW + K;
  // [hp][wp][16 channels], zero where padding; past the end, zeros for the columns that the
  // last row's outputs ox >= OW read (computed, then dropped).
  constexpr int64_t kMargin = 7 * 2 + 6 + 1;
  alignas(64) float t[(kDwLanesMaxPadded + kMargin) * 16];
  alignas(64) float wv[49 * 16];  // [tap][16 channels]
  alignas(64) float ob[8 * 16];   // one output row: [ox][16 channels]
  for (int64_t i = 0; i < hp * wp + kMargin; ++i) _mm512_store_ps(t + i * 16, _mm512_setzero_ps());
  for (int64_t l = 0; l < 16; ++l)
    for (int64_t q = 0; q < taps; ++q) wv[q * 16 + l] = p.w[l * taps + q];
  const __m512 bias = p.bias ? _mm512_loadu_ps(p.bias) : _mm512_setzero_ps();
  // The 16 planes' input rows, 8 columns at a time, transposed into the lanes (8 planes per half).
  for (int64_t iy = 0; iy < s.in_h; ++iy) {
    const int64_t r = iy + s.pad_top;
    if (r >= hp) break;
    for (int64_t x0 = 0; x0 < s.in_w && x0 + s.pad_left < wp; x0 += 8) {
      const __mmask16 m = __mmask16((1u << std::min<int64_t>(8, s.in_w - x0)) - 1u);
      const int64_t n = std::min<int64_t>(8, wp - (x0 + s.pad_left));
      float* dst = t + (r * wp + x0 + s.pad_left) * 16;
      for (int h = 0; h < 2; ++h) {
        __m256 v[8];
#pragma GCC unroll 8
        for (int l = 0; l < 8; ++l)
          v[l] = _mm512_castps512_ps256(_mm512_maskz_loadu_ps(m, p.in + (h * 8 + l) * p.in_stride + iy * s.in_w + x0));
        avx2_transpose8x8(v);
        for (int64_t j = 0; j < n; ++j) _mm256_store_ps(dst + j * 16 + h * 8, v[j]);
      }
    }
  }
  const __m512 lo = _mm512_set1_ps(post.lo), hi = _mm512_set1_ps(post.hi);
  const __mmask16 om = __mmask16((1u << OW) - 1u);
  for (int64_t oy = 0; oy < OH; ++oy) {
    // All 8 columns of the row at once: 8 independent sums per tap.
    __m512 acc[8];
#pragma GCC unroll 8
    for (int ox = 0; ox < 8; ++ox) acc[ox] = bias;
    for (int64_t ky = 0; ky < K; ++ky) {
      const float* row = t + (oy * SH + ky) * wp * 16;
      for (int64_t kx = 0; kx < K; ++kx) {
        const __m512 wt = _mm512_load_ps(wv + (ky * K + kx) * 16);
        const float* q = row + kx * 16;
        if (SW == 1) {
#pragma GCC unroll 8
          for (int ox = 0; ox < 8; ++ox) acc[ox] = _mm512_fmadd_ps(wt, _mm512_load_ps(q + ox * 16), acc[ox]);
        } else {
#pragma GCC unroll 8
          for (int ox = 0; ox < 8; ++ox) acc[ox] = _mm512_fmadd_ps(wt, _mm512_load_ps(q + ox * 32), acc[ox]);
        }
      }
    }
#pragma GCC unroll 8
    for (int ox = 0; ox < 8; ++ox) _mm512_store_ps(ob + ox * 16, acc[ox]);
    // Back to the planes, 8 channels per half: row oy of channel l, then the residual and the
    // activation, stored under the mask of the row's OW columns.
    for (int h = 0; h < 2; ++h) {
      __m256 v[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) v[j] = _mm256_load_ps(ob + j * 16 + h * 8);
      avx2_transpose8x8(v);
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) {
        const int64_t c = h * 8 + l;
        __m512 x = _mm512_zextps256_ps512(v[l]);
        if (p.res) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(om, p.res + c * p.res_stride + oy * OW));
        // max / min return their second operand when either is NaN: NaN propagates.
        if (post.clamp) x = _mm512_maskz_min_ps(0xFFFF, hi, _mm512_maskz_max_ps(0xFFFF, lo, x));
        if (post.hardswish) x = hard_swish_avx512(x);
        _mm512_mask_storeu_ps(p.out + c * p.out_stride + oy * OW, om, x);
      }
    }
  }
}

}  // namespace nxrt::cpu
#endif
