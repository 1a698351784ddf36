// Depthwise convolution kernels for AVX2 + FMA CPUs (the AVX-512 ones live in
// conv.cpp): the direct 3x3 plane kernel and the tap accumulation of the
// phase-plane path. Compiled with target attributes, called only after CPUID
// reports AVX2 and FMA.
#include "conv_depthwise.hpp"
#include "hard_swish.hpp"
#include "simd.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

namespace nxrt::cpu {

#define NXRT_AVX2 __attribute__((target("avx2,fma")))

namespace {

// Column modes of the direct kernels (their SW parameter): stride 1; stride 2 on plain rows
// (each tap's even / odd lanes picked out of two loads by shuffles); stride 2 on split rows
// (DwPlanes::split_cols: a row's even columns, then its odd ones; every tap one plain load).
constexpr int kSplit = 3;
// Columns a chunk moves along an input row per output column, and the pad the row pointer
// is moved back by (split rows: the taps' offsets hold it).
constexpr int64_t col_step(int SW) { return SW == kSplit ? 1 : SW; }
inline int64_t pad_shift(int SW, const ConvShape& s) { return SW == kSplit ? 0 : s.pad_left; }

// Where tap kx (pad_left p) of output column j reads in a split row of width W: column
// 2j + kx - p lies in the even half (first (W + 1) / 2 floats) or the odd one, at j + d.
struct SplitTap {
  int64_t off;    // from the row start to output column 0's float
  int64_t d;      // j + d in its half
  int64_t width;  // floats in its half
};
inline SplitTap split_tap(int64_t kx, int64_t pad_left, int64_t W) {
  const int64_t e = kx - pad_left, ph = e & 1, d = (e - ph) / 2, half = (W + 1) / 2;
  return {ph * half + d, d, ph ? W / 2 : half};
}

// Lanes [0, 8) of a load at row[start + i] that fall inside [0, width), as a maskload mask.
NXRT_AVX2 inline __m256i in_mask(int64_t start, int64_t width) {
  const int64_t lo = std::clamp<int64_t>(-start, 0, 8), hi = std::clamp<int64_t>(width - start, 0, 8);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i ge_lo = _mm256_cmpgt_epi32(iota, _mm256_set1_epi32(int(lo) - 1));
  const __m256i lt_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(hi)), iota);
  return _mm256_and_si256(ge_lo, lt_hi);
}

// Even and odd lanes of the 16 floats a:b.
NXRT_AVX2 inline __m256 even_lanes(__m256 a, __m256 b) {
  return _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))), _MM_SHUFFLE(3, 1, 2, 0)));
}
NXRT_AVX2 inline __m256 odd_lanes(__m256 a, __m256 b) {
  return _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))), _MM_SHUFFLE(3, 1, 2, 0)));
}

// Per 8-column chunk of an output row: the load masks (SW 1: r, r+1, r+2;
// SW 2: r, r+8, r+2, r+10), the store mask, and whether every mask is full.
struct Chunk {
  __m256i m[4];
  __m256i out;
  bool full;      // every load and the store whole
  bool out_full;  // the store whole (8 outputs)
  int64_t n_out;  // outputs stored (1..8)
  int64_t off[3];  // split rows: the taps' offsets from the chunk's first column
};

// The three taps of one input row for 8 outputs (stride SW along the row).
template <bool FULL>
NXRT_AVX2 inline __m256 ld(const float* p, __m256i m) {
  return FULL ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}

template <int SW, bool FULL>
NXRT_AVX2 inline void load3(const float* r, const Chunk& k, __m256& x0, __m256& x1, __m256& x2) {
  if constexpr (SW == 1) {
    x0 = ld<FULL>(r, k.m[0]);
    x1 = ld<FULL>(r + 1, k.m[1]);
    x2 = ld<FULL>(r + 2, k.m[2]);
  } else if constexpr (SW == kSplit) {
    x0 = ld<FULL>(r + k.off[0], k.m[0]);
    x1 = ld<FULL>(r + k.off[1], k.m[1]);
    x2 = ld<FULL>(r + k.off[2], k.m[2]);
  } else {
    const __m256 a = ld<FULL>(r, k.m[0]), b = ld<FULL>(r + 8, k.m[1]), c = ld<FULL>(r + 2, k.m[2]),
                 d = ld<FULL>(r + 10, k.m[3]);
    x0 = even_lanes(a, b);
    x1 = odd_lanes(a, b);
    x2 = even_lanes(c, d);
  }
}

// The store of chunk k's outputs (any chunk type: reads out, out_full and n_out). No masked
// stores (microcoded on AMD's cores): whole outputs store plain even when the chunk's loads
// were masked (a row's first and last chunks read padding), partial ones lane group by lane
// group (simd.hpp). 184 planes of 14x14, 120 of 28x28, 72 of 16x56, 3x3: 16-21% faster.
template <typename C>
NXRT_AVX2 inline void finish(__m256 v, float* o, const float* res, const C& k, bool clamp, __m256 lo, __m256 hi,
                             bool hardswish) {
  if (res) v = _mm256_add_ps(v, k.out_full ? _mm256_loadu_ps(res) : _mm256_maskload_ps(res, k.out));
  // max/min return their second operand when either is NaN: NaN propagates.
  if (clamp) v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
  if (hardswish) v = hard_swish_avx2(v);
  if (k.out_full)
    _mm256_storeu_ps(o, v);
  else
    avx2_store_first(o, v, k.n_out);
}

// Two output rows (oy, oy + 1 when `two`) of one 8-column chunk, testing each input row: the
// plane's top and bottom rows (plane() runs the interior row pairs through interior_rows2).
template <int SW, bool FULL>
NXRT_AVX2 inline void rows2(const ConvShape& s, const float* in, const float* wk, __m256 b, const Chunk& k,
                            int64_t oy, bool two, int64_t j0, float* o, const float* res, const ConvPostOps& post,
                            __m256 lo, __m256 hi) {
  const int64_t H = s.in_h, W = s.in_w, OW = s.out_w, sh = s.stride_h;
  const int64_t iy0 = oy * sh - s.pad_top, nrows = two ? sh + 3 : 3, base = j0 * col_step(SW) - pad_shift(SW, s);
  __m256 a0 = b, a1 = _mm256_setzero_ps(), b0 = b, b1 = _mm256_setzero_ps();
  for (int64_t rr = 0; rr < nrows; ++rr) {
    const int64_t iy = iy0 + rr;
    const bool for_a = rr < 3, for_b = two && rr >= sh && rr - sh < 3;
    if (iy < 0 || iy >= H || !(for_a || for_b)) continue;
    // Pointer arithmetic through uintptr_t: the window may start before the row.
    const float* r = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(in + iy * W) +
                                                    uintptr_t(base * int64_t(sizeof(float))));
    __m256 x0, x1, x2;
    load3<SW, FULL>(r, k, x0, x1, x2);
    if (for_a) {
      a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(wk + rr * 3 + 0), x0, a0);
      a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(wk + rr * 3 + 1), x1, a1);
      a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(wk + rr * 3 + 2), x2, a0);
    }
    if (for_b) {
      const int64_t ky = rr - sh;
      b0 = _mm256_fmadd_ps(_mm256_broadcast_ss(wk + ky * 3 + 0), x0, b0);
      b1 = _mm256_fmadd_ps(_mm256_broadcast_ss(wk + ky * 3 + 1), x1, b1);
      b0 = _mm256_fmadd_ps(_mm256_broadcast_ss(wk + ky * 3 + 2), x2, b0);
    }
  }
  finish(_mm256_add_ps(a0, a1), o + oy * OW + j0, res ? res + oy * OW + j0 : nullptr, k, post.clamp, lo, hi, post.hardswish);
  if (two)
    finish(_mm256_add_ps(b0, b1), o + (oy + 1) * OW + j0, res ? res + (oy + 1) * OW + j0 : nullptr, k, post.clamp,
           lo, hi, post.hardswish);
}

// Output rows oy and oy + 1 of one chunk, for interior rows (the 4 or 5 input rows all inside
// the plane): the 9 weights in registers, masked loads only where the chunk reads padding
// (FULL false: a row's first or last chunk). r: input row iy0, from the row's first window.
template <int SW, int SH, bool FULL>
__attribute__((always_inline, target("avx2,fma"))) inline void interior_chunk(
    const float* r, int64_t W, const __m256 (&w)[9], __m256 b, int64_t c, const Chunk& k, float* o0, float* o1,
    const float* res0, const float* res1, const ConvPostOps& post, __m256 lo, __m256 hi) {
  // Pointer arithmetic through uintptr_t: the first chunk's window may start before the row.
  const float* rc = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(r) + uintptr_t(c * 8 * col_step(SW) * int64_t(sizeof(float))));
  __m256 x0, x1, x2;
  load3<SW, FULL>(rc, k, x0, x1, x2);  // row 0: a ky 0
  __m256 a = _mm256_fmadd_ps(w[0], x0, b);
  a = _mm256_fmadd_ps(w[1], x1, a);
  a = _mm256_fmadd_ps(w[2], x2, a);
  load3<SW, FULL>(rc + W, k, x0, x1, x2);  // row 1: a ky 1, b ky 0 (stride 1)
  a = _mm256_fmadd_ps(w[3], x0, a);
  a = _mm256_fmadd_ps(w[4], x1, a);
  a = _mm256_fmadd_ps(w[5], x2, a);
  __m256 bb = b;
  if constexpr (SH == 1) {
    bb = _mm256_fmadd_ps(w[0], x0, bb);
    bb = _mm256_fmadd_ps(w[1], x1, bb);
    bb = _mm256_fmadd_ps(w[2], x2, bb);
  }
  load3<SW, FULL>(rc + 2 * W, k, x0, x1, x2);  // row 2: a ky 2, b ky 1 (stride 1) or 0 (stride 2)
  a = _mm256_fmadd_ps(w[6], x0, a);
  a = _mm256_fmadd_ps(w[7], x1, a);
  a = _mm256_fmadd_ps(w[8], x2, a);
  constexpr int k2 = SH == 1 ? 3 : 0;
  bb = _mm256_fmadd_ps(w[k2], x0, bb);
  bb = _mm256_fmadd_ps(w[k2 + 1], x1, bb);
  bb = _mm256_fmadd_ps(w[k2 + 2], x2, bb);
  load3<SW, FULL>(rc + 3 * W, k, x0, x1, x2);  // row 3: b ky 2 (stride 1) or 1 (stride 2)
  constexpr int k3 = SH == 1 ? 6 : 3;
  bb = _mm256_fmadd_ps(w[k3], x0, bb);
  bb = _mm256_fmadd_ps(w[k3 + 1], x1, bb);
  bb = _mm256_fmadd_ps(w[k3 + 2], x2, bb);
  if constexpr (SH == 2) {
    load3<SW, FULL>(rc + 4 * W, k, x0, x1, x2);  // row 4: b ky 2
    bb = _mm256_fmadd_ps(w[6], x0, bb);
    bb = _mm256_fmadd_ps(w[7], x1, bb);
    bb = _mm256_fmadd_ps(w[8], x2, bb);
  }
  finish(a, o0 + c * 8, res0 ? res0 + c * 8 : nullptr, k, post.clamp, lo, hi, post.hardswish);
  finish(bb, o1 + c * 8, res1 ? res1 + c * 8 : nullptr, k, post.clamp, lo, hi, post.hardswish);
}

template <int SW, int SH>
__attribute__((always_inline, target("avx2,fma"))) inline void interior_rows2(
    const float* r, int64_t W, const __m256 (&w)[9], __m256 b, int64_t chunks, const Chunk* mk, float* o0, float* o1,
    const float* res0, const float* res1, const ConvPostOps& post, __m256 lo, __m256 hi) {
  for (int64_t c = 0; c < chunks; ++c) {
    if (mk[c].full) interior_chunk<SW, SH, true>(r, W, w, b, c, mk[c], o0, o1, res0, res1, post, lo, hi);
    else interior_chunk<SW, SH, false>(r, W, w, b, c, mk[c], o0, o1, res0, res1, post, lo, hi);
  }
}

template <int SW>
NXRT_AVX2 void plane(const ConvShape& s, const float* in, const float* wk, float bias, float* o, const float* res,
                     const ConvPostOps& post) {
  const int64_t W = s.in_w, OW = s.out_w;
  const __m256 b = _mm256_set1_ps(bias), lo = _mm256_set1_ps(post.lo), hi = _mm256_set1_ps(post.hi);
  const int64_t chunks = (OW + 7) / 8;
  Chunk mk[kDw3x3MaxWidth / 8];
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t j0 = c * 8, n = std::min<int64_t>(8, OW - j0), base = j0 * SW - s.pad_left;
    Chunk& k = mk[c];
    k.out = in_mask(0, n);
    const int64_t offs[4] = {0, SW == 1 ? 1 : 8, 2, SW == 1 ? 0 : 10};
    bool full = n == 8;
    for (int i = 0; i < (SW == 2 ? 4 : 3); ++i) {
      if constexpr (SW == kSplit) {
        const SplitTap t = split_tap(i, s.pad_left, W);
        k.off[i] = t.off;
        k.m[i] = in_mask(j0 + t.d, t.width);
      } else {
        k.m[i] = in_mask(base + offs[i], W);
      }
      full = full && _mm256_movemask_ps(_mm256_castsi256_ps(k.m[i])) == 0xFF;
    }
    k.full = full;
    k.out_full = n == 8;
    k.n_out = n;
  }
  __m256 w[9];
  for (int i = 0; i < 9; ++i) w[i] = _mm256_broadcast_ss(wk + i);
  const int64_t sh = s.stride_h, H = s.in_h;
  // Two output rows per pass: the input rows they share are loaded once.
  for (int64_t oy = 0; oy < s.out_h; oy += 2) {
    const bool two = oy + 1 < s.out_h;
    const int64_t iy0 = oy * sh - s.pad_top;
    if (two && (sh == 1 || sh == 2) && iy0 >= 0 && iy0 + sh + 3 <= H) {
      // Pointer arithmetic through uintptr_t: the row's first window may start before it.
      const float* r = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(in + iy0 * W) -
                                                      uintptr_t(pad_shift(SW, s) * int64_t(sizeof(float))));
      float* o0 = o + oy * s.out_w;
      const float* r0 = res ? res + oy * s.out_w : nullptr;
      const float* r1 = res ? res + (oy + 1) * s.out_w : nullptr;
      if (sh == 1) interior_rows2<SW, 1>(r, W, w, b, chunks, mk, o0, o0 + s.out_w, r0, r1, post, lo, hi);
      else interior_rows2<SW, 2>(r, W, w, b, chunks, mk, o0, o0 + s.out_w, r0, r1, post, lo, hi);
      continue;
    }
    for (int64_t c = 0; c < chunks; ++c) {
      if (mk[c].full)
        rows2<SW, true>(s, in, wk, b, mk[c], oy, two, c * 8, o, res, post, lo, hi);
      else
        rows2<SW, false>(s, in, wk, b, mk[c], oy, two, c * 8, o, res, post, lo, hi);
    }
  }
}

// ---- K x K (5, 7): one output row at a time, the K taps of a row as vectors.

// Load slots of a chunk: SW 1: offsets 0..K-1 (tap kx at slot kx); SW 2: offsets
// 2p and 2p + 8 for p < ceil(K/2), whose even lanes give tap 2p and odd lanes tap 2p + 1.
template <int K, int SW>
constexpr int kSlots = SW == 2 ? 2 * ((K + 1) / 2) : K;

template <int K, int SW>
constexpr int64_t slot_offset(int i) {
  return SW == 1 ? i : (i / 2) * 2 + (i % 2) * 8;
}

template <int K, int SW>
struct ChunkK {
  __m256i m[kSlots<K, SW>];
  __m256i out;
  bool full;      // every load and the store whole
  bool out_full;  // the store whole (8 outputs)
  int64_t n_out;  // outputs stored (1..8)
  int64_t off[K];  // split rows: the taps' offsets from the chunk's first column
};

template <int K, int SW, bool FULL>
NXRT_AVX2 inline void taps_k(const float* r, const ChunkK<K, SW>& k, __m256* x) {
  if constexpr (SW == 1) {
#pragma GCC unroll 7
    for (int t = 0; t < K; ++t) x[t] = ld<FULL>(r + t, k.m[t]);
  } else if constexpr (SW == kSplit) {
#pragma GCC unroll 7
    for (int t = 0; t < K; ++t) x[t] = ld<FULL>(r + k.off[t], k.m[t]);
  } else {
#pragma GCC unroll 4
    for (int p = 0; p < (K + 1) / 2; ++p) {
      const __m256 a = ld<FULL>(r + 2 * p, k.m[2 * p]), b = ld<FULL>(r + 2 * p + 8, k.m[2 * p + 1]);
      x[2 * p] = even_lanes(a, b);
      if (2 * p + 1 < K) x[2 * p + 1] = odd_lanes(a, b);
    }
  }
}

template <int K, int SW, bool FULL>
NXRT_AVX2 inline void row_k(const ConvShape& s, const float* in, const float* wk, __m256 b, const ChunkK<K, SW>& k,
                            int64_t oy, int64_t j0, float* o, const float* res, const ConvPostOps& post, __m256 lo,
                            __m256 hi) {
  const int64_t H = s.in_h, W = s.in_w, OW = s.out_w, base = j0 * col_step(SW) - pad_shift(SW, s);
  __m256 acc0 = b, acc1 = _mm256_setzero_ps();
  for (int64_t ky = 0; ky < K; ++ky) {
    const int64_t iy = oy * s.stride_h - s.pad_top + ky;
    if (iy < 0 || iy >= H) continue;
    // Pointer arithmetic through uintptr_t: the window may start before the row.
    const float* r = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(in + iy * W) +
                                                    uintptr_t(base * int64_t(sizeof(float))));
    __m256 x[K];
    taps_k<K, SW, FULL>(r, k, x);
#pragma GCC unroll 7
    for (int t = 0; t < K; ++t) {
      __m256& acc = t % 2 ? acc1 : acc0;
      acc = _mm256_fmadd_ps(_mm256_broadcast_ss(wk + ky * K + t), x[t], acc);
    }
  }
  finish(_mm256_add_ps(acc0, acc1), o + oy * OW + j0, res ? res + oy * OW + j0 : nullptr, k, post.clamp, lo, hi, post.hardswish);
}

// R output rows [oy, oy + R) of one chunk at once: 2R independent sums (one row's 25 or 49
// taps in two chains ran at the FMA latency: 120 planes of 28x28 5x5 took 220 us, 21
// GFLOP/s), and each input row loaded once for the R rows that read it.
template <int K, int SW, int R, bool FULL>
NXRT_AVX2 inline void rows_k(const ConvShape& s, const float* in, const float* wk, __m256 b, const ChunkK<K, SW>& k,
                             int64_t oy, int64_t j0, float* o, const float* res, const ConvPostOps& post, __m256 lo,
                             __m256 hi) {
  const int64_t H = s.in_h, W = s.in_w, OW = s.out_w, SH = s.stride_h, base = j0 * col_step(SW) - pad_shift(SW, s);
  __m256 acc[R][2];
#pragma GCC unroll 4
  for (int rr = 0; rr < R; ++rr) acc[rr][0] = b, acc[rr][1] = _mm256_setzero_ps();
  const int64_t iy0 = oy * SH - s.pad_top, span = (R - 1) * SH + K;
  for (int64_t i = 0; i < span; ++i) {
    const int64_t iy = iy0 + i;
    if (iy < 0 || iy >= H) continue;
    const float* r = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(in + iy * W) +
                                                    uintptr_t(base * int64_t(sizeof(float))));
    __m256 x[K];
    taps_k<K, SW, FULL>(r, k, x);
#pragma GCC unroll 4
    for (int rr = 0; rr < R; ++rr) {
      const int64_t ky = i - rr * SH;
      if (ky < 0 || ky >= K) continue;
      const float* w = wk + ky * K;
#pragma GCC unroll 7
      for (int t = 0; t < K; ++t) acc[rr][t % 2] = _mm256_fmadd_ps(_mm256_broadcast_ss(w + t), x[t], acc[rr][t % 2]);
    }
  }
#pragma GCC unroll 4
  for (int rr = 0; rr < R; ++rr)
    finish(_mm256_add_ps(acc[rr][0], acc[rr][1]), o + (oy + rr) * OW + j0, res ? res + (oy + rr) * OW + j0 : nullptr,
           k, post.clamp, lo, hi, post.hardswish);
}

template <int K, int SW>
NXRT_AVX2 void plane_k(const ConvShape& s, const float* in, const float* wk, float bias, float* o, const float* res,
                       const ConvPostOps& post) {
  const int64_t W = s.in_w, OW = s.out_w;
  const __m256 b = _mm256_set1_ps(bias), lo = _mm256_set1_ps(post.lo), hi = _mm256_set1_ps(post.hi);
  const int64_t chunks = (OW + 7) / 8;
  ChunkK<K, SW> mk[kDw3x3MaxWidth / 8];
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t j0 = c * 8, n = std::min<int64_t>(8, OW - j0), base = j0 * SW - s.pad_left;
    ChunkK<K, SW>& k = mk[c];
    k.out = in_mask(0, n);
    bool full = n == 8;
    for (int i = 0; i < kSlots<K, SW>; ++i) {
      if constexpr (SW == kSplit) {
        const SplitTap t = split_tap(i, s.pad_left, W);
        k.off[i] = t.off;
        k.m[i] = in_mask(j0 + t.d, t.width);
      } else {
        k.m[i] = in_mask(base + slot_offset<K, SW>(i), W);
      }
      full = full && _mm256_movemask_ps(_mm256_castsi256_ps(k.m[i])) == 0xFF;
    }
    k.full = full;
    k.out_full = n == 8;
    k.n_out = n;
  }
  // Rows in groups of R (R sums and K taps in 16 registers), the rest one at a time.
  constexpr int R = K == 7 ? 3 : 4;
  int64_t oy = 0;
  for (; oy + R <= s.out_h; oy += R)
    for (int64_t c = 0; c < chunks; ++c) {
      if (mk[c].full)
        rows_k<K, SW, R, true>(s, in, wk, b, mk[c], oy, c * 8, o, res, post, lo, hi);
      else
        rows_k<K, SW, R, false>(s, in, wk, b, mk[c], oy, c * 8, o, res, post, lo, hi);
    }
  for (; oy < s.out_h; ++oy)
    for (int64_t c = 0; c < chunks; ++c) {
      if (mk[c].full)
        row_k<K, SW, true>(s, in, wk, b, mk[c], oy, c * 8, o, res, post, lo, hi);
      else
        row_k<K, SW, false>(s, in, wk, b, mk[c], oy, c * 8, o, res, post, lo, hi);
    }
}

}  // namespace

void dwkxk_plane_avx2(const ConvShape& s, const float* in, const float* wk, float bias, float* o, const float* res,
                      const ConvPostOps& post, bool split_cols) {
  if (s.k_h == 5) {
    if (s.stride_w == 1) plane_k<5, 1>(s, in, wk, bias, o, res, post);
    else if (split_cols) plane_k<5, kSplit>(s, in, wk, bias, o, res, post);
    else plane_k<5, 2>(s, in, wk, bias, o, res, post);
  } else {
    if (s.stride_w == 1) plane_k<7, 1>(s, in, wk, bias, o, res, post);
    else if (split_cols) plane_k<7, kSplit>(s, in, wk, bias, o, res, post);
    else plane_k<7, 2>(s, in, wk, bias, o, res, post);
  }
}

void dw3x3_plane_avx2(const ConvShape& s, const float* in, const float* wk, float bias, float* o, const float* res,
                      const ConvPostOps& post, bool split_cols) {
  if (s.stride_w == 1) plane<1>(s, in, wk, bias, o, res, post);
  else if (split_cols) plane<kSplit>(s, in, wk, bias, o, res, post);
  else plane<2>(s, in, wk, bias, o, res, post);
}

NXRT_AVX2 void dw_split_row_avx2(const float* src, int64_t W, float* dst) {
  float* even = dst;
  float* odd = dst + (W + 1) / 2;
  int64_t j = 0;
  for (; 2 * j + 16 <= W; j += 8) {
    const __m256 a = _mm256_loadu_ps(src + 2 * j), b = _mm256_loadu_ps(src + 2 * j + 8);
    _mm256_storeu_ps(even + j, even_lanes(a, b));
    _mm256_storeu_ps(odd + j, odd_lanes(a, b));
  }
  for (; 2 * j < W; ++j) {
    even[j] = src[2 * j];
    if (2 * j + 1 < W) odd[j] = src[2 * j + 1];
  }
}

// 64 outputs (8 ymm) per step, taps streamed through them.
NXRT_AVX2 void dw_accumulate_avx2(float* out, int64_t n, const float* const* src, const float* w, int64_t taps,
                                  float bias) {
  const __m256 b = _mm256_set1_ps(bias);
  int64_t j0 = 0;
  for (; j0 + 64 <= n; j0 += 64) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) acc[v] = b;
    for (int64_t t = 0; t < taps; ++t) {
      const float* sp = src[t] + j0;
      const __m256 wt = _mm256_broadcast_ss(w + t);
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) acc[v] = _mm256_fmadd_ps(wt, _mm256_loadu_ps(sp + v * 8), acc[v]);
    }
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) _mm256_storeu_ps(out + j0 + v * 8, acc[v]);
  }
  for (; j0 < n; j0 += 8) {
    const __m256i m = in_mask(0, std::min<int64_t>(8, n - j0));
    __m256 acc = b;
    for (int64_t t = 0; t < taps; ++t)
      acc = _mm256_fmadd_ps(_mm256_broadcast_ss(w + t), _mm256_maskload_ps(src[t] + j0, m), acc);
    avx2_store_first(out + j0, acc, std::min<int64_t>(8, n - j0));
  }
}

}  // namespace nxrt::cpu
#endif
