// The depthwise kernel for small planes (out_w <= 16) with 16 channels as the AVX-512 lanes
// (conv_depthwise.hpp): the AVX2 one's layout at twice the width. Rows of up to 8 input or
// output columns move by 8x8 AVX2 transposes, one per half of the 16 channels; wider ones by
// 16x16 AVX-512 transposes.
#include "conv_depthwise.hpp"
#include "hard_swish.hpp"
#include "simd.hpp"
#include "transpose16_avx512.hpp"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers pass an "undefined" vector to the 256 <-> 512-bit casts' builtins.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

namespace nxrt::cpu {

#define NXRT_AVX512 __attribute__((target("avx512f,avx2,fma")))

namespace {

// Residual, activation and the masked store of one output row (`om`: its columns) of plane c.
NXRT_AVX512 inline void store_row(__m512 x, const DwPlanes& p, int64_t c, int64_t at, __mmask16 om,
                                  const ConvPostOps& post, __m512 lo, __m512 hi) {
  if (p.res) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(om, p.res + c * p.res_stride + at));
  // max / min return their second operand when either is NaN: NaN propagates.
  if (post.clamp) x = _mm512_maskz_min_ps(0xFFFF, hi, _mm512_maskz_max_ps(0xFFFF, lo, x));
  if (post.hardswish) x = hard_swish_avx512(x);
  _mm512_mask_storeu_ps(p.out + c * p.out_stride + at, om, x);
}

// NC: output columns a row keeps in registers, 8 (out_w <= 8) or 16.
template <int NC>
NXRT_AVX512 void planes16(const ConvShape& s, const DwPlanes& p, const ConvPostOps& post) {
  const int64_t K = s.k_h, taps = K * K, SH = s.stride_h, SW = s.stride_w, OH = s.out_h, OW = s.out_w;
  const int64_t hp = (OH - 1) * SH + K, wp = (OW - 1) * SW + K, pt = s.pad_top, pl = s.pad_left;
  // [hp][wp][16 channels], zero where padding; past the end, zeros for the columns that the
  // last row's outputs ox >= OW read (computed, then dropped).
  constexpr int64_t kMargin = (NC - 1) * 2 + 7;
  alignas(64) float t[(kDwLanesMaxPadded + kMargin) * 16];
  alignas(64) float wv[49 * 16];  // [tap][16 channels]
  alignas(64) float ob[8 * 16];   // one output row of up to 8 columns: [ox][16 channels]
  const __m512 zero = _mm512_setzero_ps();
  // Only the padding is zeroed (the rest is written below): rows outside the input, then the
  // left and right columns of the input rows, and the margin.
  const int64_t r0 = std::min(hp, pt), r1 = std::clamp<int64_t>(pt + s.in_h, r0, hp);
  const int64_t c1 = std::clamp<int64_t>(pl + s.in_w, pl, wp);
  for (int64_t i = 0; i < r0 * wp; ++i) _mm512_store_ps(t + i * 16, zero);
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t j = 0; j < std::min(pl, wp); ++j) _mm512_store_ps(t + (r * wp + j) * 16, zero);
    for (int64_t j = c1; j < wp; ++j) _mm512_store_ps(t + (r * wp + j) * 16, zero);
  }
  for (int64_t i = r1 * wp; i < hp * wp + kMargin; ++i) _mm512_store_ps(t + i * 16, zero);
  for (int64_t l = 0; l < 16; ++l)
    for (int64_t q = 0; q < taps; ++q) wv[q * 16 + l] = p.w[l * taps + q];
  const __m512 bias = p.bias ? _mm512_loadu_ps(p.bias) : zero;
  // The 16 planes' input rows into the lanes, 8 or 16 columns at a time.
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t iy = r - pt;
    for (int64_t x0 = 0; x0 < s.in_w && x0 + pl < wp; x0 += NC) {
      const int64_t n = std::min<int64_t>({NC, wp - (x0 + pl), s.in_w - x0});
      const __mmask16 m = __mmask16((1u << n) - 1u);
      float* dst = t + (r * wp + x0 + pl) * 16;
      const float* src = p.in + iy * s.in_w + x0;
      if constexpr (NC == 16) {
        __m512 v[16];
#pragma GCC unroll 16
        for (int l = 0; l < 16; ++l) v[l] = _mm512_maskz_loadu_ps(m, src + l * p.in_stride);
        avx512::transpose16x16(v);
        // (Unrolled with a test, not a loop to n: v's index must be a constant for v to stay
        // in registers.)
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j)
          if (j < n) _mm512_store_ps(dst + j * 16, v[j]);
      } else {
        for (int h = 0; h < 2; ++h) {
          __m256 v[8];
#pragma GCC unroll 8
          for (int l = 0; l < 8; ++l)
            v[l] = _mm512_castps512_ps256(_mm512_maskz_loadu_ps(m, src + (h * 8 + l) * p.in_stride));
          avx2_transpose8x8(v);
#pragma GCC unroll 8
          for (int j = 0; j < 8; ++j)
            if (j < n) _mm256_store_ps(dst + j * 16 + h * 8, v[j]);
        }
      }
    }
  }
  const __m512 lo = _mm512_set1_ps(post.lo), hi = _mm512_set1_ps(post.hi);
  const __mmask16 om = __mmask16((1u << OW) - 1u);
  for (int64_t oy = 0; oy < OH; ++oy) {
    // All NC columns of the row at once: NC independent sums per tap.
    __m512 acc[NC];
#pragma GCC unroll 16
    for (int ox = 0; ox < NC; ++ox) acc[ox] = bias;
    for (int64_t ky = 0; ky < K; ++ky) {
      const float* row = t + (oy * SH + ky) * wp * 16;
      for (int64_t kx = 0; kx < K; ++kx) {
        const __m512 wt = _mm512_load_ps(wv + (ky * K + kx) * 16);
        const float* q = row + kx * 16;
        if (SW == 1) {
#pragma GCC unroll 16
          for (int ox = 0; ox < NC; ++ox) acc[ox] = _mm512_fmadd_ps(wt, _mm512_load_ps(q + ox * 16), acc[ox]);
        } else {
#pragma GCC unroll 16
          for (int ox = 0; ox < NC; ++ox) acc[ox] = _mm512_fmadd_ps(wt, _mm512_load_ps(q + ox * 32), acc[ox]);
        }
      }
    }
    // Back to the planes: row oy of channel c, then the residual and the activation, stored
    // under the mask of the row's OW columns.
    if constexpr (NC == 16) {
      avx512::transpose16x16(acc);
#pragma GCC unroll 16
      for (int c = 0; c < 16; ++c) store_row(acc[c], p, c, oy * OW, om, post, lo, hi);
    } else {
#pragma GCC unroll 8
      for (int ox = 0; ox < 8; ++ox) _mm512_store_ps(ob + ox * 16, acc[ox]);
      for (int h = 0; h < 2; ++h) {
        __m256 v[8];
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) v[j] = _mm256_load_ps(ob + j * 16 + h * 8);
        avx2_transpose8x8(v);
#pragma GCC unroll 8
        for (int l = 0; l < 8; ++l) store_row(_mm512_zextps256_ps512(v[l]), p, h * 8 + l, oy * OW, om, post, lo, hi);
      }
    }
  }
}

}  // namespace

void dw_planes16_avx512(const ConvShape& s, const DwPlanes& p, const ConvPostOps& post) {
  if (s.out_w <= 8) planes16<8>(s, p, post);
  else planes16<16>(s, p, post);
}

}  // namespace nxrt::cpu
#endif
