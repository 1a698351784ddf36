// The channels-last depthwise kernel on AVX2 + FMA (conv_depthwise.hpp: dw_nhwc_rows_avx2):
// AVX-512's (conv_depthwise_nhwc_avx512.cpp) with 8 channels per vector, so every tap of every
// output is one vector load and one multiply-add. 3x3: the 9 weights in registers and four
// outputs of a row sharing their input columns (16 registers: 9 + 4 sums + the column); 5x5:
// four outputs, each row of 5 weights loaded once a pass (25 do not fit).
#include "conv_depthwise.hpp"
#include "hard_swish.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

namespace nxrt::cpu {

namespace {

#define NXRT_AVX2 __attribute__((target("avx2,fma")))

// max / min return the second operand on NaN: NaN propagates.
NXRT_AVX2 inline __m256 dw_nhwc8_act(__m256 v, bool clamp, float lo, float hi, bool hardswish) {
  if (clamp) v = _mm256_min_ps(_mm256_set1_ps(hi), _mm256_max_ps(_mm256_set1_ps(lo), v));
  if (hardswish) v = hard_swish_avx2(v);
  return v;
}

// Tap (ky, kx)'s weights for this channel group: from registers (3x3) or wg (5x5, [k * k][cs]).
template <int K>
struct DwWeights8 {
  __m256 r[K == 3 ? 9 : 1];
  const float* wg;
  int64_t cs;
  NXRT_AVX2 __m256 at(int t) const {
    if constexpr (K == 3) return r[t];
    else return _mm256_loadu_ps(wg + t * cs);
  }
};

// Q outputs from column ix0 of one output row (r[ky] null: a padding row). CHECKED: taps may
// fall outside the row (its first and last outputs), columns outside [0, W) are skipped; Q
// chains instead of one per output there (a 7-wide 5x5 row has 4 such outputs of 7).
template <int K, int S, int Q, bool CHECKED>
NXRT_AVX2 inline void dw_nhwc8_pass(const float* const (&r)[K], int64_t cs, int64_t W, int64_t ix0,
                                    const DwWeights8<K>& w, __m256 b, float* o, const ConvPostOps& post) {
  constexpr int NC = (Q - 1) * S + K;
  __m256 acc[Q];
#pragma GCC unroll 4
  for (int q = 0; q < Q; ++q) acc[q] = b;
#pragma GCC unroll 5
  for (int ky = 0; ky < K; ++ky) {
    if (!r[ky]) continue;
    __m256 wr[K];
#pragma GCC unroll 5
    for (int kx = 0; kx < K; ++kx) wr[kx] = w.at(ky * K + kx);
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) {
      const int64_t ix = ix0 + c;
      if (CHECKED && (ix < 0 || ix >= W)) continue;
      const __m256 x = _mm256_load_ps(r[ky] + ix * cs);
#pragma GCC unroll 4
      for (int q = 0; q < Q; ++q) {
        const int kx = c - q * S;
        if (kx >= 0 && kx < K) acc[q] = _mm256_fmadd_ps(wr[kx], x, acc[q]);
      }
    }
  }
#pragma GCC unroll 4
  for (int q = 0; q < Q; ++q) _mm256_store_ps(o + q * cs, dw_nhwc8_act(acc[q], post.clamp, post.lo, post.hi, post.hardswish));
}

// Outputs [ox, end) in passes of Q, then Q / 2, ... 1.
template <int K, int S, int Q, bool CHECKED>
NXRT_AVX2 inline void dw_nhwc8_run(const float* const (&r)[K], int64_t cs, int64_t W, int64_t ox, int64_t end,
                                   int64_t pl, const DwWeights8<K>& w, __m256 b, float* o, const ConvPostOps& post) {
  for (; ox + Q <= end; ox += Q) dw_nhwc8_pass<K, S, Q, CHECKED>(r, cs, W, ox * S - pl, w, b, o + ox * cs, post);
  if constexpr (Q > 1) dw_nhwc8_run<K, S, Q / 2, CHECKED>(r, cs, W, ox, end, pl, w, b, o, post);
}

template <int K, int S>
NXRT_AVX2 void dw_nhwc8_rows_ks(const ConvShape& s, const float* const* rows, int64_t cs, const float* wt,
                                const float* bias, float* out, int64_t out_rows, const ConvPostOps& post) {
  constexpr int Q = 4;
  const int64_t W = s.in_w, OW = s.out_w, pl = s.pad_left;
  // Outputs [lo_x, hi_x) read only columns inside the row.
  const int64_t last = W - K + pl;  // the last output reading inside the row starts here, times S
  const int64_t lo_x = std::min(OW, (pl + S - 1) / S);
  const int64_t hi_x = last < 0 ? lo_x : std::max(lo_x, std::min(OW, last / S + 1));
  // Channel groups outside, rows inside: a group's input rows stay in L1 from one output row
  // to the next.
  for (int64_t g = 0; g < cs; g += 8) {
    DwWeights8<K> w;
    w.wg = wt + g;
    w.cs = cs;
    if constexpr (K == 3)
      for (int t = 0; t < 9; ++t) w.r[t] = _mm256_loadu_ps(wt + t * cs + g);
    else
      w.r[0] = _mm256_setzero_ps();
    const __m256 b = _mm256_loadu_ps(bias + g);
    for (int64_t oy = 0; oy < out_rows; ++oy) {
      const float* r[K];
      for (int ky = 0; ky < K; ++ky) r[ky] = rows[oy * S + ky] ? rows[oy * S + ky] + g : nullptr;
      float* o = out + oy * OW * cs + g;
      if (K == 5 && OW <= 8) {  // rows of 4+ edges in 7: all in checked passes of 4 (3x3: slower)
        dw_nhwc8_run<K, S, Q, true>(r, cs, W, 0, OW, pl, w, b, o, post);
        continue;
      }
      dw_nhwc8_run<K, S, 2, true>(r, cs, W, 0, lo_x, pl, w, b, o, post);
      dw_nhwc8_run<K, S, Q, false>(r, cs, W, lo_x, hi_x, pl, w, b, o, post);
      dw_nhwc8_run<K, S, 2, true>(r, cs, W, std::max(lo_x, hi_x), OW, pl, w, b, o, post);
    }
  }
}

}  // namespace

void dw_nhwc_rows_avx2(const ConvShape& s, const float* const* rows, int64_t cs, const float* wt, const float* bias,
                       float* out, int64_t out_rows, const ConvPostOps& post) {
  if (s.k_w == 3) {
    if (s.stride_w == 1) dw_nhwc8_rows_ks<3, 1>(s, rows, cs, wt, bias, out, out_rows, post);
    else dw_nhwc8_rows_ks<3, 2>(s, rows, cs, wt, bias, out, out_rows, post);
  } else {
    if (s.stride_w == 1) dw_nhwc8_rows_ks<5, 1>(s, rows, cs, wt, bias, out, out_rows, post);
    else dw_nhwc8_rows_ks<5, 2>(s, rows, cs, wt, bias, out, out_rows, post);
  }
}

}  // namespace nxrt::cpu

#endif
