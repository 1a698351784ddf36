// The depthwise kernel for small planes (out_w <= 8) with 8 channels as the AVX2 lanes
// (conv_depthwise.hpp). Its own file: added to conv_depthwise_avx2.cpp, it moved the
// per-plane kernels' code and made MobileNetV2's stride-1 blocks 6-9% slower (code layout).
#include "conv_depthwise.hpp"
#include "hard_swish.hpp"
#include "simd.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

namespace nxrt::cpu {

#define NXRT_AVX2 __attribute__((target("avx2,fma")))

bool dw_lanes_ok(const ConvShape& s, int64_t max_stride, int64_t max_out_w) {
  if (s.k_h != s.k_w || (s.k_h != 3 && s.k_h != 5 && s.k_h != 7) || s.dil_h != 1 || s.dil_w != 1) return false;
  if (s.stride_h < 1 || s.stride_w < 1 || s.stride_h > max_stride || s.stride_w > max_stride) return false;
  const int64_t hp = (s.out_h - 1) * s.stride_h + s.k_h, wp = (s.out_w - 1) * s.stride_w + s.k_w;
  return s.out_w >= 1 && s.out_w <= max_out_w && s.out_h >= 1 && hp * wp <= kDwLanesMaxPadded && s.pad_top >= 0 &&
         s.pad_left >= 0;
}

NXRT_AVX2 void dw_planes8_avx2(const ConvShape& s, const DwPlanes& p, const ConvPostOps& post) {
  const int64_t K = s.k_h, taps = K * K, SH = s.stride_h, SW = s.stride_w, OH = s.out_h, OW = s.out_w;
  const int64_t hp = (OH - 1) * SH + K, wp = (OW - 1) * SW + K;
  // [hp][wp][8 channels], zero where padding; past the end, zeros for the columns that the
  // last row's outputs ox >= OW read (computed, then dropped).
  constexpr int64_t kMargin = 7 * 2 + 6 + 1;
  alignas(32) float t[(kDwLanesMaxPadded + kMargin) * 8];
  alignas(32) float wv[49 * 8];  // [tap][8 channels]
  alignas(32) float ob[8 * 8];   // one output row: [ox][8 channels]
  for (int64_t i = 0; i < hp * wp + kMargin; ++i) _mm256_store_ps(t + i * 8, _mm256_setzero_ps());
  for (int64_t l = 0; l < 8; ++l)
    for (int64_t q = 0; q < taps; ++q) wv[q * 8 + l] = p.w[l * taps + q];
  __m256 bias = _mm256_setzero_ps();
  if (p.bias) bias = _mm256_loadu_ps(p.bias);
  // The 8 planes' input rows, 8 columns at a time, transposed into the lanes.
  for (int64_t iy = 0; iy < s.in_h; ++iy) {
    const int64_t r = iy + s.pad_top;
    if (r >= hp) break;
    for (int64_t x0 = 0; x0 < s.in_w && x0 + s.pad_left < wp; x0 += 8) {
      const __m256i m = avx2_lane_mask(std::min<int64_t>(8, s.in_w - x0));
      __m256 v[8];
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) v[l] = _mm256_maskload_ps(p.in + l * p.in_stride + iy * s.in_w + x0, m);
      avx2_transpose8x8(v);
      const int64_t n = std::min<int64_t>(8, wp - (x0 + s.pad_left));
      for (int64_t j = 0; j < n; ++j) _mm256_store_ps(t + (r * wp + x0 + s.pad_left + j) * 8, v[j]);
    }
  }
  const __m256 lo = _mm256_set1_ps(post.lo), hi = _mm256_set1_ps(post.hi);
  const __m256i om = avx2_lane_mask(OW);
  for (int64_t oy = 0; oy < OH; ++oy) {
    // All 8 columns of the row at once: 8 independent sums per tap (one sum's taps in a
    // chain ran at the FMA latency, 4x slower than the per-plane kernels).
    __m256 acc[8];
#pragma GCC unroll 8
    for (int ox = 0; ox < 8; ++ox) acc[ox] = bias;
    for (int64_t ky = 0; ky < K; ++ky) {
      const float* row = t + (oy * SH + ky) * wp * 8;
      for (int64_t kx = 0; kx < K; ++kx) {
        const __m256 wt = _mm256_load_ps(wv + (ky * K + kx) * 8);
        const float* q = row + kx * 8;
        if (SW == 1) {
#pragma GCC unroll 8
          for (int ox = 0; ox < 8; ++ox) acc[ox] = _mm256_fmadd_ps(wt, _mm256_load_ps(q + ox * 8), acc[ox]);
        } else {
#pragma GCC unroll 8
          for (int ox = 0; ox < 8; ++ox) acc[ox] = _mm256_fmadd_ps(wt, _mm256_load_ps(q + ox * 16), acc[ox]);
        }
      }
    }
#pragma GCC unroll 8
    for (int ox = 0; ox < 8; ++ox) _mm256_store_ps(ob + ox * 8, acc[ox]);
    // Back to the planes: row oy of channel l, then the residual and the activation.
    __m256 v[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) v[j] = _mm256_load_ps(ob + j * 8);
    avx2_transpose8x8(v);
    // A masked store costs ~10x a plain one here (Zen 3): a row whose 8 floats end inside
    // the plane is stored whole, the extra columns (later rows') overwritten when those rows
    // are stored (not when a residual is read, which may be the output itself).
    const bool whole = !p.res && (oy * OW + 8 <= OH * OW);
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) {
      __m256 x = v[l];
      if (p.res) x = _mm256_add_ps(x, _mm256_maskload_ps(p.res + l * p.res_stride + oy * OW, om));
      // max / min return their second operand when either is NaN: NaN propagates.
      if (post.clamp) x = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
      if (post.hardswish) x = hard_swish_avx2(x);
      float* o = p.out + l * p.out_stride + oy * OW;
      if (whole) _mm256_storeu_ps(o, x);
      else avx2_store_first(o, x, OW);
    }
  }
}

}  // namespace nxrt::cpu
#endif
