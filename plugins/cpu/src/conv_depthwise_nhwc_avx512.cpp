// The channels-last depthwise kernel (conv_depthwise.hpp: dw_nhwc_rows): 16 channels per
// vector, so every tap of every output is one vector load and one multiply-add, with no
// shifts, masks or transposes. 3x3: eight outputs of a row share their input columns (stride
// 1: 10 columns per input row for 72 multiply-adds; stride 2: 17); 5x5: two (25 weights in
// registers). Rows are [W][cs] floats with
// cs a multiple of 16 and 64-byte aligned rows, so each load is one cache line (unaligned
// pixels split every load over two lines and ran at half the rate in a harness).
#include "conv_depthwise.hpp"
#include "hard_swish.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

namespace nxrt::cpu {

namespace {

#define NXRT_AVX512 __attribute__((target("avx512f")))

NXRT_AVX512 inline __m512 dw_nhwc_act(__m512 v, bool clamp, __m512 lo, __m512 hi, bool hardswish) {
  // max / min in their masked forms return the second operand on NaN: NaN propagates.
  if (clamp) v = _mm512_maskz_min_ps(0xFFFF, hi, _mm512_maskz_max_ps(0xFFFF, lo, v));
  if (hardswish) v = hard_swish_avx512(v);
  return v;
}

// Q outputs from column ox of one output row, every tap inside the row (r[ky] null: a padding
// row). w: the K x K weight vectors of this channel group.
template <int K, int S, int Q>
NXRT_AVX512 inline void dw_nhwc_interior(const float* const (&r)[K], int64_t cs, int64_t ix0,
                                         const __m512 (&w)[K * K], __m512 b, float* o, bool clamp, __m512 lo,
                                         __m512 hi, bool hardswish) {
  constexpr int NC = (Q - 1) * S + K;
  __m512 acc[Q];
#pragma GCC unroll 8
  for (int q = 0; q < Q; ++q) acc[q] = b;
#pragma GCC unroll 5
  for (int ky = 0; ky < K; ++ky) {
    if (!r[ky]) continue;
    const float* row = r[ky] + ix0 * cs;
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) {
      const __m512 x = _mm512_load_ps(row + c * cs);
#pragma GCC unroll 8
      for (int q = 0; q < Q; ++q) {
        const int kx = c - q * S;
        if (kx >= 0 && kx < K) acc[q] = _mm512_fmadd_ps(w[ky * K + kx], x, acc[q]);
      }
    }
  }
#pragma GCC unroll 8
  for (int q = 0; q < Q; ++q) _mm512_store_ps(o + q * cs, dw_nhwc_act(acc[q], clamp, lo, hi, hardswish));
}

// One output whose taps may fall outside the row (the first and last columns).
template <int K>
NXRT_AVX512 inline void dw_nhwc_edge(const float* const (&r)[K], int64_t cs, int64_t W, int64_t ix0,
                                     const __m512 (&w)[K * K], __m512 b, float* o, bool clamp, __m512 lo,
                                     __m512 hi, bool hardswish) {
  __m512 acc = b;
  for (int ky = 0; ky < K; ++ky) {
    if (!r[ky]) continue;
    for (int kx = 0; kx < K; ++kx) {
      const int64_t ix = ix0 + kx;
      if (ix >= 0 && ix < W) acc = _mm512_fmadd_ps(w[ky * K + kx], _mm512_load_ps(r[ky] + ix * cs), acc);
    }
  }
  _mm512_store_ps(o, dw_nhwc_act(acc, clamp, lo, hi, hardswish));
}

// Outputs sharing a pass: 8 at 3x3 (9 weights + 8 sums in registers: 8 independent chains of
// 9 multiply-adds, where 4 chains left FMA slots idle to their latency; rows 28-112 wide
// 7-15% faster in a harness), 2 at 5x5 (25 + 2). A row's last interior outputs go in passes
// of half as many, down to 1 (single outputs, one latency-bound chain each, were up to 7).
template <int K>
constexpr int dw_nhwc_outputs() {
  return K == 3 ? 8 : 2;
}

// Interior outputs [ox, end) in passes of Q, then Q / 2, ... 1.
template <int K, int S, int Q>
NXRT_AVX512 inline void dw_nhwc_interior_run(const float* const (&r)[K], int64_t cs, int64_t ox, int64_t end,
                                             int64_t pl, const __m512 (&w)[K * K], __m512 b, float* o, bool clamp,
                                             __m512 lo, __m512 hi, bool hardswish) {
  for (; ox + Q <= end; ox += Q)
    dw_nhwc_interior<K, S, Q>(r, cs, ox * S - pl, w, b, o + ox * cs, clamp, lo, hi, hardswish);
  if constexpr (Q > 1) dw_nhwc_interior_run<K, S, Q / 2>(r, cs, ox, end, pl, w, b, o, clamp, lo, hi, hardswish);
}

template <int K, int S>
NXRT_AVX512 void dw_nhwc_rows_ks(const ConvShape& s, const float* const* rows, int64_t cs, const float* wt,
                                 const float* bias, float* out, int64_t out_rows, const ConvPostOps& post) {
  constexpr int Q = dw_nhwc_outputs<K>();
  const int64_t W = s.in_w, OW = s.out_w, pl = s.pad_left;
  // Outputs [lo_x, hi_x) read only columns inside the row.
  const int64_t last = W - K + pl;  // the last output reading inside the row starts here, times S
  const int64_t lo_x = std::min(OW, (pl + S - 1) / S);
  const int64_t hi_x = last < 0 ? lo_x : std::max(lo_x, std::min(OW, last / S + 1));
  const __m512 lo = _mm512_set1_ps(post.lo), hi = _mm512_set1_ps(post.hi);
  // Rows of under 24 interior outputs (14x14 maps and smaller) ran 5-10% slower in passes of
  // 8 than of 4 (a harness, 576 channels): they take 4.
  const bool wide = hi_x - lo_x >= 24;
  // Channel groups outside, rows inside: a group's input rows stay in L1 from one output row
  // to the next.
  for (int64_t g = 0; g < cs; g += 16) {
    __m512 w[K * K];
    for (int t = 0; t < K * K; ++t) w[t] = _mm512_loadu_ps(wt + t * cs + g);
    const __m512 b = _mm512_loadu_ps(bias + g);
    for (int64_t oy = 0; oy < out_rows; ++oy) {
      const float* r[K];
      for (int ky = 0; ky < K; ++ky) r[ky] = rows[oy * S + ky] ? rows[oy * S + ky] + g : nullptr;
      float* o = out + oy * OW * cs + g;
      int64_t ox = 0;
      for (; ox < lo_x; ++ox)
        dw_nhwc_edge<K>(r, cs, W, ox * S - pl, w, b, o + ox * cs, post.clamp, lo, hi, post.hardswish);
      if (wide)
        dw_nhwc_interior_run<K, S, Q>(r, cs, ox, hi_x, pl, w, b, o, post.clamp, lo, hi, post.hardswish);
      else
        dw_nhwc_interior_run<K, S, (Q > 2 ? Q / 2 : Q)>(r, cs, ox, hi_x, pl, w, b, o, post.clamp, lo, hi,
                                                        post.hardswish);
      ox = std::max(ox, hi_x);
      for (; ox < OW; ++ox)
        dw_nhwc_edge<K>(r, cs, W, ox * S - pl, w, b, o + ox * cs, post.clamp, lo, hi, post.hardswish);
    }
  }
}

}  // namespace

void dw_nhwc_rows_avx512(const ConvShape& s, const float* const* rows, int64_t cs, const float* wt,
                         const float* bias, float* out, int64_t out_rows, const ConvPostOps& post) {
  if (s.k_w == 3) {
    if (s.stride_w == 1) dw_nhwc_rows_ks<3, 1>(s, rows, cs, wt, bias, out, out_rows, post);
    else dw_nhwc_rows_ks<3, 2>(s, rows, cs, wt, bias, out, out_rows, post);
  } else {
    if (s.stride_w == 1) dw_nhwc_rows_ks<5, 1>(s, rows, cs, wt, bias, out, out_rows, post);
    else dw_nhwc_rows_ks<5, 2>(s, rows, cs, wt, bias, out, out_rows, post);
  }
}

}  // namespace nxrt::cpu

#endif
