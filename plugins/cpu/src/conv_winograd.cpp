#include "conv_winograd.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "conv_winograd_2x2.hpp"
#include "cpu_info.hpp"
#include "gemm.hpp"
#include "scratch.hpp"
#include "simd.hpp"

namespace nxrt::cpu {

namespace {

constexpr int64_t kA = kWinogradAlpha, kT = kWinogradTile, kXi = kA * kA;
// Threaded, a block of tiles per thread needs at least this many tiles (conv2d_winograd).
constexpr int64_t kMinBlockTiles = 24;

// A dilated conv is d_h x d_w independent undilated ones, one per phase
// (py, px): outputs oy = py + d_h * i, ox = px + d_w * j read inputs on the same
// grid. Each phase is cut into 4x4 tiles; every tile of every phase is one GEMM
// column (the weights are shared). Undilated: one phase.
struct Phase {
  int64_t py, px;  // first output row / column
  int64_t oh, ow;  // outputs of this phase
  int64_t ty, tx;  // tiles
  int64_t base;    // its first tile's column
};

struct Tiles {
  std::vector<Phase> phases;
  int64_t count = 0, max_tx = 0;
};

Tiles tiles_of(const ConvShape& s) {
  Tiles t;
  for (int64_t py = 0; py < std::min(s.dil_h, s.out_h); ++py)
    for (int64_t px = 0; px < std::min(s.dil_w, s.out_w); ++px) {
      Phase p;
      p.py = py;
      p.px = px;
      p.oh = (s.out_h - py + s.dil_h - 1) / s.dil_h;
      p.ow = (s.out_w - px + s.dil_w - 1) / s.dil_w;
      p.ty = (p.oh + kT - 1) / kT;
      p.tx = (p.ow + kT - 1) / kT;
      p.base = t.count;
      t.count += p.ty * p.tx;
      t.max_tx = std::max(t.max_tx, p.tx);
      t.phases.push_back(p);
    }
  return t;
}

// Where column t (a tile) of row k (an input channel) lies in a packed-B
// operand of K rows: panel base plus k times the panel's width.
struct PackedColumns {
  std::vector<int64_t> base, width;
  PackedColumns(int64_t K, int64_t N) : base(size_t(N)), width(size_t(N)) {
    for (int64_t t = 0; t < N; ++t) {
      const int64_t p = t / kGemmNR;
      base[size_t(t)] = p * kGemmNR * K + (t - p * kGemmNR);
      width[size_t(t)] = gemm_panel_width(N, p);
    }
  }
};

// B^T d (6 values).
inline __attribute__((always_inline)) void wino_bt(float d0, float d1, float d2, float d3, float d4, float d5,
                                                   float* o) {
  const float t0 = d4 - 4.f * d2, t1 = d3 - 4.f * d1;
  const float t2 = d4 - d2, t3 = 2.f * (d3 - d1);
  o[0] = 4.f * d0 - 5.f * d2 + d4;
  o[1] = t0 + t1;
  o[2] = t0 - t1;
  o[3] = t2 + t3;
  o[4] = t2 - t3;
  o[5] = 4.f * d1 - 5.f * d3 + d5;
}

// A^T m (4 values).
inline __attribute__((always_inline)) void wino_at(float m0, float m1, float m2, float m3, float m4, float m5,
                                                   float* o) {
  const float p = m1 + m2, q = m1 - m2, r = m3 + m4, t = m3 - m4;
  o[0] = m0 + p + r;
  o[1] = q + 2.f * t;
  o[2] = p + 4.f * r;
  o[3] = q + 8.f * t + m5;
}

// row[j] = src[x0 + dw * j] for j in [0, wp), 0 where that column is outside [0, W): one
// input row of a dilation phase, zero padded (the scalar body and the AVX-512 transform).
inline void gather_dilated_row(const float* __restrict src, int64_t W, int64_t x0, int64_t dw, int64_t wp,
                               float* __restrict row) {
  for (int64_t j = 0; j < wp; ++j) {
    const int64_t ix = x0 + dw * j;
    row[j] = ix >= 0 && ix < W ? src[ix] : 0.f;
  }
}

// The 6 input rows of tile row ty of one phase into rows[6][wp] (wp = tx * 4 + 2), zero where
// they read padding (dilated columns gathered at the dilation stride).
inline __attribute__((always_inline)) void tile_row_inputs(const ConvShape& s, const Phase& ph, int64_t ty,
                                                            const float* __restrict plane, float* __restrict rows) {
  const int64_t wp = ph.tx * kT + 2, H = s.in_h, W = s.in_w, dh = s.dil_h, dw = s.dil_w;
  const int64_t x_off = ph.px - s.pad_left;  // input column of row position 0 (then every dw)
  for (int64_t i = 0; i < kA; ++i) {
    float* row = rows + i * wp;
    const int64_t iy = ph.py - s.pad_top + dh * (ty * kT + i);
    if (iy < 0 || iy >= H) {
      std::fill(row, row + wp, 0.f);
      continue;
    }
    const float* src = plane + iy * W;
    if (dw == 1) {
      const int64_t x0 = std::clamp<int64_t>(-x_off, 0, wp), x1 = std::clamp<int64_t>(W - x_off, x0, wp);
      std::fill(row, row + x0, 0.f);
      std::copy(src + (x0 + x_off), src + (x1 + x_off), row + x0);
      std::fill(row + x1, row + wp, 0.f);
    } else {
      gather_dilated_row(src, W, x_off, dw, wp, row);
    }
  }
}

// One input channel, tiles [lo, hi) of one phase (row-major in the phase): every
// tile's V = B^T d B, written as row `ic` of the 36 packed-B operands (operand xi
// at v + xi * v_floats), tile t at column ph.base + t - lo (the block's columns).
// tmp: 6 * (max_tx * 4 + 2) + 72 * max_tx floats. kWhole: all tiles of the phase,
// lo = 0 (folded, so the three-step path keeps its loops).
template <bool kWhole>
inline __attribute__((always_inline)) void input_transform_body(const ConvShape& s, const Phase& ph, int64_t lo,
                                                                 int64_t hi, const PackedColumns& pc,
                                                                 const float* __restrict plane, int64_t ic,
                                                                 float* __restrict v, size_t v_floats,
                                                                 float* __restrict tmp) {
  const int64_t wp = ph.tx * kT + 2;
  float* rows = tmp;                   // [6][wp]: the tile row's input rows, zero padded
  float* r = tmp + kA * wp;            // [6 rows i][6 c][tx]: B^T along x
  float* vt = r + kXi * ph.tx;         // [36 xi][tx]: B^T d B of the tile row
  const int64_t n = ph.tx;
  const int64_t ty_begin = kWhole ? 0 : lo / n, ty_end = kWhole ? ph.ty : (hi + n - 1) / n;
  for (int64_t ty = ty_begin; ty < ty_end; ++ty) {
    // This row's tiles [txa, txb).
    const int64_t txa = kWhole ? 0 : std::max<int64_t>(lo - ty * n, 0), txb = kWhole ? n : std::min(hi - ty * n, n);
    tile_row_inputs(s, ph, ty, plane, rows);
    for (int64_t i = 0; i < kA; ++i) {
      const float* row = rows + i * wp;
      float* ri = r + i * kA * ph.tx;
      for (int64_t tx = txa; tx < txb; ++tx) {
        const float* d = row + tx * kT;
        float o[6];
        wino_bt(d[0], d[1], d[2], d[3], d[4], d[5], o);
        for (int64_t c = 0; c < kA; ++c) ri[c * ph.tx + tx] = o[c];
      }
    }
    // B^T along y, one (a, c) row of tiles at a time (contiguous over tx, so it
    // vectorises), then each row copied into its operand in runs that stay
    // inside one 48-column panel.
    const int64_t t0 = ph.base + ty * n - lo;
    for (int64_t c = 0; c < kA; ++c) {
      const float* r0 = r + c * n;
      const int64_t st = kA * n;
      for (int64_t tx = txa; tx < txb; ++tx) {
        float o[6];
        wino_bt(r0[tx], r0[st + tx], r0[2 * st + tx], r0[3 * st + tx], r0[4 * st + tx], r0[5 * st + tx], o);
        for (int64_t a = 0; a < kA; ++a) vt[(a * kA + c) * n + tx] = o[a];
      }
    }
    for (int64_t tx = txa; tx < txb;) {
      const int64_t t = t0 + tx, run = std::min(txb - tx, kGemmNR - t % kGemmNR);
      const size_t at = size_t(pc.base[size_t(t)] + ic * pc.width[size_t(t)]);
      for (int64_t xi = 0; xi < kXi; ++xi) std::copy(vt + xi * n + tx, vt + xi * n + tx + run, v + size_t(xi) * v_floats + at);
      tx += run;
    }
  }
}

NXRT_CLONES
void input_transform(const ConvShape& s, const Phase& ph, const PackedColumns& pc, const float* __restrict plane,
                     int64_t ic, float* __restrict v, size_t v_floats, float* __restrict tmp) {
  input_transform_body<true>(s, ph, 0, ph.ty * ph.tx, pc, plane, ic, v, v_floats, tmp);
}

NXRT_CLONES
void input_transform_range(const ConvShape& s, const Phase& ph, int64_t lo, int64_t hi, const PackedColumns& pc, const float* __restrict plane, int64_t ic, float* __restrict v,
                           size_t v_floats, float* __restrict tmp) {
  input_transform_body<false>(s, ph, lo, hi, pc, plane, ic, v, v_floats, tmp);
}

#if defined(__x86_64__)
// B^T d over 16 tiles at once (the same arithmetic as wino_bt, lane by lane).
__attribute__((target("avx512f"), always_inline)) inline void wino_bt16(__m512 d0, __m512 d1, __m512 d2, __m512 d3,
                                                                      __m512 d4, __m512 d5, __m512* o) {
  const __m512 four = _mm512_set1_ps(4.f), five = _mm512_set1_ps(5.f), two = _mm512_set1_ps(2.f);
  const __m512 t0 = _mm512_fnmadd_ps(four, d2, d4), t1 = _mm512_fnmadd_ps(four, d1, d3);
  const __m512 t2 = _mm512_sub_ps(d4, d2), t3 = _mm512_mul_ps(two, _mm512_sub_ps(d3, d1));
  o[0] = _mm512_fmadd_ps(four, d0, _mm512_fnmadd_ps(five, d2, d4));
  o[1] = _mm512_add_ps(t0, t1);
  o[2] = _mm512_sub_ps(t0, t1);
  o[3] = _mm512_add_ps(t2, t3);
  o[4] = _mm512_sub_ps(t2, t3);
  o[5] = _mm512_fmadd_ps(four, d1, _mm512_fnmadd_ps(five, d3, d5));
}

// Elements j, j + 4, ..., j + 60 of l0:l1:l2:l3 (q: the j + 4i indices of one pair).
__attribute__((target("avx512f"), always_inline)) inline __m512 every4(__m512 l0, __m512 l1, __m512 l2, __m512 l3,
                                                                     __m512i q) {
  const __m512 lo8 = _mm512_permutex2var_ps(l0, q, l1), hi8 = _mm512_permutex2var_ps(l2, q, l3);
  return _mm512_mask_blend_ps(0xFF00, lo8, hi8);  // q repeats its 8 indices in lanes 8..15
}

// Lanes i of a 16-wide load at row[start + i] with 0 <= start + i < width.
inline __mmask16 in_row_mask(int64_t start, int64_t width) {
  const int64_t a = std::clamp<int64_t>(-start, 0, 16), b = std::clamp<int64_t>(width - start, 0, 16);
  if (b <= a) return 0;
  return __mmask16((b >= 16 ? 0xFFFFu : (1u << b) - 1u) & ~((1u << a) - 1u));
}

// Stores lanes [0, cnt) of o (tiles t .. t + cnt - 1, consecutive columns) as row `ic` of
// packed-B operand op: one run, or two where the tiles cross a panel edge.
__attribute__((target("avx512f"), always_inline)) inline void store_tile_run(float* op, const PackedColumns& pc,
                                                                           int64_t t, int64_t cnt, int64_t ic,
                                                                           __m512 o) {
  const int64_t k1 = std::min<int64_t>(cnt, kGemmNR - t % kGemmNR);
  _mm512_mask_storeu_ps(op + pc.base[size_t(t)] + ic * pc.width[size_t(t)], __mmask16((1u << k1) - 1u), o);
  if (cnt > k1)  // lane k1 on goes to the next panel's first column
    _mm512_mask_storeu_ps(reinterpret_cast<float*>(reinterpret_cast<uintptr_t>(op + pc.base[size_t(t + k1)] +
                                                                               ic * pc.width[size_t(t + k1)]) -
                                                   uintptr_t(k1 * int64_t(sizeof(float)))),
                          __mmask16(((1u << cnt) - 1u) & ~((1u << k1) - 1u)), o);
}

// Input row i of the 6-row windows of tile rows [ty, ty + 4): l[r] = 16 floats of tile row
// ty + r's input row from column col; zero where that row is padding or r >= rows.
// (Not a lambda: it would not inherit the target.)
__attribute__((target("avx512f"), always_inline)) inline void row_loads(const ConvShape& s, const Phase& ph,
                                                                      int64_t ty, int64_t rows, int64_t i,
                                                                      int64_t col, const float* __restrict plane,
                                                                      __m512* l) {
  for (int64_t r = 0; r < 4; ++r) {
    const int64_t iy = ph.py - s.pad_top + s.dil_h * ((ty + r) * kT + i);
    if (r >= rows || iy < 0 || iy >= s.in_h) {
      l[r] = _mm512_setzero_ps();
      continue;
    }
    // Through uintptr_t: the window may start before the row.
    const float* p = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(plane + iy * s.in_w) +
                                                    uintptr_t(col * int64_t(sizeof(float))));
    l[r] = _mm512_maskz_loadu_ps(in_row_mask(col, s.in_w), p);
  }
}

// Lanes of q picked from the pair x[0]:x[1], those under `second` from x[2]:x[3].
__attribute__((target("avx512f"), always_inline)) inline __m512 pick_rows(const __m512* x, __m512i q,
                                                                        __mmask16 second) {
  return _mm512_mask_blend_ps(second, _mm512_permutex2var_ps(x[0], q, x[1]), _mm512_permutex2var_ps(x[2], q, x[3]));
}

// Whole tile rows [ty, ty + rows) (rows <= 4) of one undilated-column phase with n = ph.tx
// <= 4 tiles each, in one 16-lane pass: tile (ty + r, tx) in lane r * n + tx, so the 36
// results are the rows' rows * n consecutive columns from t0. Per input row one 16-float load
// per tile row (l0 .. l3); lanes picked from the pairs l0:l1 and l2:l3 by two permutes and a
// blend, as every4 does for one row; d4, d5 from the same loads 4 columns on.
__attribute__((target("avx512f"))) void input_transform_rows_avx512(const ConvShape& s, const Phase& ph, int64_t ty,
                                                                   int64_t rows, int64_t t0, const PackedColumns& pc,
                                                                   const float* __restrict plane, int64_t ic,
                                                                   float* __restrict v, size_t v_floats) {
  const int64_t n = ph.tx;
  const int64_t c0 = ph.px - s.pad_left;  // input column of each row's first tile's first value
  // Lane k: tile row r = k / n, element 4 (k % n) + j of its load; rows 0 and 1 from the
  // first pair (lanes below 2n), the odd row as the pair's second load.
  // (Counted, not divided: a division per lane, every channel, was a fifth of the transform.)
  alignas(64) int32_t idx[16];
  for (int64_t k = 0, r = 0, e = 0; k < 16; ++k) {
    idx[k] = int32_t(e > 12 ? 0 : (r % 2) * 16 + e);  // a lane past the rows: any element
    e += 4;
    if (r < 3 && e == 4 * n) r += 1, e = 0;
  }
  const __m512i q0 = _mm512_load_si512(idx), q1 = _mm512_add_epi32(q0, _mm512_set1_epi32(1)),
                q2 = _mm512_add_epi32(q0, _mm512_set1_epi32(2)), q3 = _mm512_add_epi32(q0, _mm512_set1_epi32(3));
  const __mmask16 second = __mmask16(0xFFFFu << (2 * n));
  alignas(64) float rr[kA][kA][16];  // [input row i][c]: B^T along x
  for (int64_t i = 0; i < kA; ++i) {
    __m512 l[4], m[4];
    row_loads(s, ph, ty, rows, i, c0, plane, l);
    row_loads(s, ph, ty, rows, i, c0 + 4, plane, m);
    const __m512 d0 = pick_rows(l, q0, second), d1 = pick_rows(l, q1, second), d2 = pick_rows(l, q2, second),
                 d3 = pick_rows(l, q3, second), d4 = pick_rows(m, q0, second), d5 = pick_rows(m, q1, second);
    __m512 o[kA];
    wino_bt16(d0, d1, d2, d3, d4, d5, o);
    for (int64_t c = 0; c < kA; ++c) _mm512_store_ps(rr[i][c], o[c]);
  }
  const int64_t cnt = rows * n;
  for (int64_t c = 0; c < kA; ++c) {
    __m512 o[kA];
    wino_bt16(_mm512_load_ps(rr[0][c]), _mm512_load_ps(rr[1][c]), _mm512_load_ps(rr[2][c]), _mm512_load_ps(rr[3][c]),
              _mm512_load_ps(rr[4][c]), _mm512_load_ps(rr[5][c]), o);
    for (int64_t a = 0; a < kA; ++a) store_tile_run(v + size_t(a * kA + c) * v_floats, pc, t0, cnt, ic, o[a]);
  }
}

// input_transform_body for undilated columns (dil_w 1) on AVX-512: 16 tiles of
// a tile row at a time, straight from the input rows (padding by masked
// loads), their 6 input values per row split out with permutes, B^T d B in
// registers and each of the 36 results stored as one run of 16 columns of its
// packed-B operand (two runs where the tiles cross a panel edge). The scalar
// body copies rows, transforms one tile at a time and copies runs of a few
// floats: on ResNet's 64-channel 56x56 layers that was a third of the layer.
// Dilated columns (dil_w > 1): each of the tile row's 6 input rows is first gathered at the
// dilation stride into tmp (6 x (tx * 4 + 2) floats, zero where it reads padding), and the
// 16-tile loads read those rows instead.
__attribute__((target("avx512f"))) void input_transform_avx512(const ConvShape& s, const Phase& ph, int64_t lo,
                                                              int64_t hi, const PackedColumns& pc,
                                                              const float* __restrict plane, int64_t ic,
                                                              float* __restrict v, size_t v_floats,
                                                              float* __restrict tmp) {
  const int64_t H = s.in_h, n = ph.tx, dh = s.dil_h, dw = s.dil_w;
  // Where the loads read: the plane itself (dw 1), or the gathered rows.
  const bool gathered = dw != 1;
  const int64_t wp = n * kT + 2;
  const int64_t W = gathered ? wp : s.in_w;
  const int64_t x_off = gathered ? 0 : ph.px - s.pad_left;
  alignas(64) float r[kA][kA][16];  // [input row i][c]: B^T along x, 16 tiles
  // Lanes 0..7 of permutex2var(a, idx_j, b): elements j, j + 4, ..., j + 28 of a:b.
  const __m512i q0 = _mm512_set_epi32(28, 24, 20, 16, 12, 8, 4, 0, 28, 24, 20, 16, 12, 8, 4, 0);
  const __m512i q1 = _mm512_add_epi32(q0, _mm512_set1_epi32(1)), q2 = _mm512_add_epi32(q0, _mm512_set1_epi32(2)),
                q3 = _mm512_add_epi32(q0, _mm512_set1_epi32(3));
  // d4 = d0 of the next tile, d5 = d1 of the next: one lane along, the 16th from e.
  const __m512i sh4 = _mm512_set_epi32(16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1);
  const __m512i sh5 = _mm512_set_epi32(17, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1);
  const int64_t ty_begin = lo / n, ty_end = (hi + n - 1) / n;
  // Rows of at most 4 tiles (16x16 maps and smaller) leave most of the 16 lanes idle one
  // tile row at a time: whole tile rows go 4 to a pass, in slots of 4 lanes (ResNet's
  // 256-channel 14x14 layer, input transform alone: 103 -> 64 us). Slots of 8 (2 rows of
  // 5 .. 8 tiles) ran slower than one row a pass (28x28, 128 channels: 100 -> 114 us).
  const bool packed = !gathered && n <= 4;
  for (int64_t ty = ty_begin; ty < ty_end;) {
    if (packed) {
      int64_t rows = 0;  // whole rows from ty on, inside [lo, hi)
      while (rows < 4 && ty + rows < ty_end && (ty + rows) * n >= lo && (ty + rows + 1) * n <= hi) ++rows;
      if (rows >= 2) {
        input_transform_rows_avx512(s, ph, ty, rows, ph.base + ty * n - lo, pc, plane, ic, v, v_floats);
        ty += rows;
        continue;
      }
    }
    const int64_t txa = std::max<int64_t>(lo - ty * n, 0), txb = std::min(hi - ty * n, n);
    const int64_t t_row = ph.base + ty * n - lo;  // column of tile tx = 0 of this row
    if (gathered)
      for (int64_t i = 0; i < kA; ++i) {
        const int64_t iy = ph.py - s.pad_top + dh * (ty * kT + i);
        if (iy < 0 || iy >= H) continue;  // a row of padding: not read below
        gather_dilated_row(plane + iy * s.in_w, s.in_w, ph.px - s.pad_left, dw, wp, tmp + i * wp);
      }
    for (int64_t tx0 = txa; tx0 < txb; tx0 += 16) {
      const int64_t cnt = std::min<int64_t>(16, txb - tx0);
      const int64_t c0 = x_off + kT * tx0;  // input column of the first tile's first value
      for (int64_t i = 0; i < kA; ++i) {
        const int64_t iy = ph.py - s.pad_top + dh * (ty * kT + i);
        if (iy < 0 || iy >= H) {
          for (int64_t c = 0; c < kA; ++c) _mm512_store_ps(r[i][c], _mm512_setzero_ps());
          continue;
        }
        // Pointer arithmetic through uintptr_t: the window may start before the row.
        const float* base = gathered ? tmp + i * wp : plane + iy * W;
        const float* row = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(base) +
                                                          uintptr_t(c0 * int64_t(sizeof(float))));
        const __m512 l0 = _mm512_maskz_loadu_ps(in_row_mask(c0, W), row);
        const __m512 l1 = _mm512_maskz_loadu_ps(in_row_mask(c0 + 16, W), row + 16);
        const __m512 l2 = _mm512_maskz_loadu_ps(in_row_mask(c0 + 32, W), row + 32);
        const __m512 l3 = _mm512_maskz_loadu_ps(in_row_mask(c0 + 48, W), row + 48);
        const __m512 l4 = _mm512_maskz_loadu_ps(__mmask16(in_row_mask(c0 + 64, W) & 3u), row + 64);
        const __m512 d0 = every4(l0, l1, l2, l3, q0), d1 = every4(l0, l1, l2, l3, q1);
        const __m512 d2 = every4(l0, l1, l2, l3, q2), d3 = every4(l0, l1, l2, l3, q3);
        const __m512 d4 = _mm512_permutex2var_ps(d0, sh4, l4), d5 = _mm512_permutex2var_ps(d1, sh5, l4);
        __m512 o[kA];
        wino_bt16(d0, d1, d2, d3, d4, d5, o);
        for (int64_t c = 0; c < kA; ++c) _mm512_store_ps(r[i][c], o[c]);
      }
      // B^T along y, then the 36 results to their operands.
      const int64_t t = t_row + tx0, k1 = std::min<int64_t>(cnt, kGemmNR - t % kGemmNR);
      const __mmask16 m1 = __mmask16((1u << k1) - 1u), m2 = __mmask16(((1u << cnt) - 1u) & ~uint32_t(m1));
      const size_t at1 = size_t(pc.base[size_t(t)] + ic * pc.width[size_t(t)]);
      const size_t at2 = cnt > k1 ? size_t(pc.base[size_t(t + k1)] + ic * pc.width[size_t(t + k1)]) : 0;
      for (int64_t c = 0; c < kA; ++c) {
        __m512 o[kA];
        wino_bt16(_mm512_load_ps(r[0][c]), _mm512_load_ps(r[1][c]), _mm512_load_ps(r[2][c]),
                  _mm512_load_ps(r[3][c]), _mm512_load_ps(r[4][c]), _mm512_load_ps(r[5][c]), o);
        for (int64_t a = 0; a < kA; ++a) {
          float* op = v + size_t(a * kA + c) * v_floats;
          _mm512_mask_storeu_ps(op + at1, m1, o[a]);
          // Lane k1 on goes to the next panel's first column.
          if (m2)
            _mm512_mask_storeu_ps(reinterpret_cast<float*>(reinterpret_cast<uintptr_t>(op + at2) -
                                                           uintptr_t(k1 * int64_t(sizeof(float)))),
                                  m2, o[a]);
        }
      }
    }
    ++ty;
  }
}

// Whether the transforms take two channels a pass (input_transform_pair_avx512,
// output_transform_pair_avx512): AVX-512, undilated rows of 5-7 tiles, which fill 7 of 16
// lanes one channel at a time and 14 two at a time.
bool transforms_in_pairs(const ConvShape& s, const Phase& ph) {
  static const bool avx512 = active_isa() == Isa::avx512;
  return avx512 && s.dil_w == 1 && ph.tx >= 5 && ph.tx <= 7;
}

// input_transform_avx512 for two input channels at once where a tile row has 5-7 tiles
// (28x28 maps): channel ic's tiles in lanes 0-7, ic + 1's in 8-15, each row's 6 values picked
// from both channels' loads by the same permutes (every4), d4 and d5 one lane along within
// each half; then each result stored as two runs, the second from lane 8 on. One channel a
// pass left 9 of 16 lanes idle.
__attribute__((target("avx512f"))) void input_transform_pair_avx512(const ConvShape& s, const Phase& ph, int64_t lo,
                                                                   int64_t hi, const PackedColumns& pc,
                                                                   const float* __restrict plane0,
                                                                   const float* __restrict plane1, int64_t ic,
                                                                   float* __restrict v, size_t v_floats) {
  const int64_t H = s.in_h, W = s.in_w, n = ph.tx, dh = s.dil_h, x_off = ph.px - s.pad_left;
  alignas(64) float r[kA][kA][16];  // [input row i][c]: B^T along x
  const __m512i q0 = _mm512_set_epi32(28, 24, 20, 16, 12, 8, 4, 0, 28, 24, 20, 16, 12, 8, 4, 0);
  const __m512i q1 = _mm512_add_epi32(q0, _mm512_set1_epi32(1)), q2 = _mm512_add_epi32(q0, _mm512_set1_epi32(2)),
                q3 = _mm512_add_epi32(q0, _mm512_set1_epi32(3));
  // Lane i <- lane i + 1 within each half (lane 7's tile, past the row, gives tile 6 its d4, d5).
  const __m512i next = _mm512_set_epi32(15, 15, 14, 13, 12, 11, 10, 9, 7, 7, 6, 5, 4, 3, 2, 1);
  const int64_t ty_begin = lo / n, ty_end = (hi + n - 1) / n;
  for (int64_t ty = ty_begin; ty < ty_end; ++ty) {
    const int64_t txa = std::max<int64_t>(lo - ty * n, 0), txb = std::min(hi - ty * n, n), cnt = txb - txa;
    const int64_t c0 = x_off + kT * txa;  // input column of the first tile's first value
    const __mmask16 ma = in_row_mask(c0, W), mb = in_row_mask(c0 + 16, W);
    for (int64_t i = 0; i < kA; ++i) {
      const int64_t iy = ph.py - s.pad_top + dh * (ty * kT + i);
      if (iy < 0 || iy >= H) {
        for (int64_t c = 0; c < kA; ++c) _mm512_store_ps(r[i][c], _mm512_setzero_ps());
        continue;
      }
      // Through uintptr_t: the window may start before the row.
      const auto at = [&](const float* plane) {
        return reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(plane + iy * W) +
                                              uintptr_t(c0 * int64_t(sizeof(float))));
      };
      const float* a = at(plane0);
      const float* b = at(plane1);
      const __m512 l0 = _mm512_maskz_loadu_ps(ma, a), l1 = _mm512_maskz_loadu_ps(mb, a + 16);
      const __m512 l2 = _mm512_maskz_loadu_ps(ma, b), l3 = _mm512_maskz_loadu_ps(mb, b + 16);
      const __m512 d0 = every4(l0, l1, l2, l3, q0), d1 = every4(l0, l1, l2, l3, q1);
      const __m512 d2 = every4(l0, l1, l2, l3, q2), d3 = every4(l0, l1, l2, l3, q3);
      // (Zero-masked with a full mask: GCC 12's plain form warns about _mm512_undefined_ps.)
      const __m512 d4 = _mm512_maskz_permutexvar_ps(0xFFFF, next, d0);
      const __m512 d5 = _mm512_maskz_permutexvar_ps(0xFFFF, next, d1);
      __m512 o[kA];
      wino_bt16(d0, d1, d2, d3, d4, d5, o);
      for (int64_t c = 0; c < kA; ++c) _mm512_store_ps(r[i][c], o[c]);
    }
    // B^T along y, then the 36 results: lanes [0, cnt) to row ic, [8, 8 + cnt) to row ic + 1,
    // each split where the tiles cross a panel edge.
    const int64_t t = ph.base + ty * n + txa - lo, k1 = std::min<int64_t>(cnt, kGemmNR - t % kGemmNR);
    const __mmask16 m1 = __mmask16((1u << k1) - 1u), m2 = __mmask16(((1u << cnt) - 1u) & ~uint32_t(m1));
    const int64_t w1 = pc.width[size_t(t)], w2 = cnt > k1 ? pc.width[size_t(t + k1)] : 0;
    const uintptr_t at1 = uintptr_t(pc.base[size_t(t)] + ic * w1) * sizeof(float);
    const uintptr_t at2 = cnt > k1 ? uintptr_t(pc.base[size_t(t + k1)] + ic * w2 - k1) * sizeof(float) : 0;
    const uintptr_t hi1 = at1 + uintptr_t(w1 - 8) * sizeof(float), hi2 = at2 + uintptr_t(w2 - 8) * sizeof(float);
    for (int64_t c = 0; c < kA; ++c) {
      __m512 o[kA];
      wino_bt16(_mm512_load_ps(r[0][c]), _mm512_load_ps(r[1][c]), _mm512_load_ps(r[2][c]), _mm512_load_ps(r[3][c]),
                _mm512_load_ps(r[4][c]), _mm512_load_ps(r[5][c]), o);
      for (int64_t a = 0; a < kA; ++a) {
        const uintptr_t op = reinterpret_cast<uintptr_t>(v + size_t(a * kA + c) * v_floats);
        _mm512_mask_storeu_ps(reinterpret_cast<float*>(op + at1), m1, o[a]);
        _mm512_mask_storeu_ps(reinterpret_cast<float*>(op + hi1), __mmask16(m1 << 8), o[a]);
        if (m2) {
          _mm512_mask_storeu_ps(reinterpret_cast<float*>(op + at2), m2, o[a]);
          _mm512_mask_storeu_ps(reinterpret_cast<float*>(op + hi2), __mmask16(m2 << 8), o[a]);
        }
      }
    }
  }
}

// B^T d over 8 tiles at once (wino_bt lane by lane), AVX2.
__attribute__((target("avx2,fma"), always_inline)) inline void wino_bt8(__m256 d0, __m256 d1, __m256 d2, __m256 d3,
                                                                      __m256 d4, __m256 d5, __m256* o) {
  const __m256 four = _mm256_set1_ps(4.f), five = _mm256_set1_ps(5.f), two = _mm256_set1_ps(2.f);
  const __m256 t0 = _mm256_fnmadd_ps(four, d2, d4), t1 = _mm256_fnmadd_ps(four, d1, d3);
  const __m256 t2 = _mm256_sub_ps(d4, d2), t3 = _mm256_mul_ps(two, _mm256_sub_ps(d3, d1));
  o[0] = _mm256_fmadd_ps(four, d0, _mm256_fnmadd_ps(five, d2, d4));
  o[1] = _mm256_add_ps(t0, t1);
  o[2] = _mm256_sub_ps(t0, t1);
  o[3] = _mm256_add_ps(t2, t3);
  o[4] = _mm256_sub_ps(t2, t3);
  o[5] = _mm256_fmadd_ps(four, d1, _mm256_fnmadd_ps(five, d3, d5));
}

// Groups g and g + 4 of 4 floats (tile g's and tile g + 4's first 4 values) as one register.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 groups(const float* row, int64_t g) {
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(row + 4 * g)), _mm_loadu_ps(row + 4 * (g + 4)), 1);
}

// input_transform_body on AVX2: the tile row's 6 input rows are copied zero padded into tmp as
// the scalar body does, then 8 tiles at a time: their values d0..d3 by a 4x4 transpose of
// groups (tiles 0-3 in the low lanes, 4-7 in the high), d4, d5 the next groups' d0, d1, B^T d B
// in registers and each of the 36 results stored as one run of 8 columns of its packed-B
// operand (two where the tiles cross a panel edge). Loads past a row's last tile read the next
// row (or tmp's later scratch): those lanes are tiles past the row's end and are not stored.
__attribute__((target("avx2,fma"))) void input_transform_avx2(const ConvShape& s, const Phase& ph, int64_t lo,
                                                             int64_t hi, const PackedColumns& pc,
                                                             const float* __restrict plane, int64_t ic,
                                                             float* __restrict v, size_t v_floats,
                                                             float* __restrict tmp) {
  const int64_t n = ph.tx, wp = n * kT + 2;
  alignas(32) float r[kA][kA][8];  // [input row i][c]: B^T along x, 8 tiles
  const int64_t ty_begin = lo / n, ty_end = (hi + n - 1) / n;
  for (int64_t ty = ty_begin; ty < ty_end; ++ty) {
    const int64_t txa = std::max<int64_t>(lo - ty * n, 0), txb = std::min(hi - ty * n, n);
    const int64_t t_row = ph.base + ty * n - lo;  // column of tile tx = 0 of this row
    tile_row_inputs(s, ph, ty, plane, tmp);
    for (int64_t tx0 = txa; tx0 < txb; tx0 += 8) {
      const int64_t cnt = std::min<int64_t>(8, txb - tx0);
      for (int64_t i = 0; i < kA; ++i) {
        const float* row = tmp + i * wp + kT * tx0;
        __m256 g0 = groups(row, 0), g1 = groups(row, 1), g2 = groups(row, 2), g3 = groups(row, 3);
        const __m256 g4 = groups(row, 4);
        // 4x4 transposes within each 128-bit lane: (g0..g3) -> d0..d3, (g1..g4) -> d4, d5.
        const __m256 a0 = _mm256_unpacklo_ps(g0, g1), a1 = _mm256_unpackhi_ps(g0, g1);
        const __m256 a2 = _mm256_unpacklo_ps(g2, g3), a3 = _mm256_unpackhi_ps(g2, g3);
        const __m256 d0 = _mm256_shuffle_ps(a0, a2, 0x44), d1 = _mm256_shuffle_ps(a0, a2, 0xEE);
        const __m256 d2 = _mm256_shuffle_ps(a1, a3, 0x44), d3 = _mm256_shuffle_ps(a1, a3, 0xEE);
        const __m256 b0 = _mm256_unpacklo_ps(g1, g2), b2 = _mm256_unpacklo_ps(g3, g4);
        const __m256 d4 = _mm256_shuffle_ps(b0, b2, 0x44), d5 = _mm256_shuffle_ps(b0, b2, 0xEE);
        __m256 o[kA];
        wino_bt8(d0, d1, d2, d3, d4, d5, o);
        for (int64_t c = 0; c < kA; ++c) _mm256_store_ps(r[i][c], o[c]);
      }
      // B^T along y, then the 36 results to their operands.
      const int64_t t = t_row + tx0, k1 = std::min<int64_t>(cnt, kGemmNR - t % kGemmNR);
      // Lanes [0, k1) here, lanes [k1, cnt) moved down to the next panel's first columns.
      const __m256i down = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(int(k1)));
      const bool split = cnt > k1;
      const size_t at1 = size_t(pc.base[size_t(t)] + ic * pc.width[size_t(t)]);
      const size_t at2 = split ? size_t(pc.base[size_t(t + k1)] + ic * pc.width[size_t(t + k1)]) : 0;
      for (int64_t c = 0; c < kA; ++c) {
        __m256 o[kA];
        wino_bt8(_mm256_load_ps(r[0][c]), _mm256_load_ps(r[1][c]), _mm256_load_ps(r[2][c]), _mm256_load_ps(r[3][c]),
                 _mm256_load_ps(r[4][c]), _mm256_load_ps(r[5][c]), o);
        for (int64_t a = 0; a < kA; ++a) {
          float* op = v + size_t(a * kA + c) * v_floats;
          avx2_store_first(op + at1, o[a], k1);
          if (split) avx2_store_first(op + at2, _mm256_permutevar8x32_ps(o[a], down), cnt - k1);
        }
      }
    }
  }
}
#endif

// Tiles [lo, hi) of one phase for input channel ic (input_transform_body),
// on AVX-512 where the CPU has it (dilated columns: rows of 8 tiles or more), else AVX2.
void input_transform_tiles(const ConvShape& s, const Phase& ph, int64_t lo, int64_t hi, bool whole,
                           const PackedColumns& pc, const float* plane, int64_t ic, float* v, size_t v_floats,
                           float* tmp) {
#if defined(__x86_64__)
  static const bool avx512 = active_isa() == Isa::avx512;
  // Dilated: only rows of 8 tiles or more, where 16-tile steps are mostly full (DeepLab's
  // 16x16 maps at dilation 2 have 2 tiles per phase row and ran 7% slower that way).
  if (avx512 && (s.dil_w == 1 || ph.tx >= 8)) {
    input_transform_avx512(s, ph, lo, hi, pc, plane, ic, v, v_floats, tmp);
    return;
  }
  static const bool avx2 = active_isa() == Isa::avx2;
  if (avx2) {
    input_transform_avx2(s, ph, lo, hi, pc, plane, ic, v, v_floats, tmp);
    return;
  }
#endif
  if (whole)
    input_transform(s, ph, pc, plane, ic, v, v_floats, tmp);
  else
    input_transform_range(s, ph, lo, hi, pc, plane, ic, v, v_floats, tmp);
}

// Input channels [c0, c1) of image xn (planes in_plane apart), tiles [lo, hi) of phase ph,
// by input_transform_tiles, two channels a call where input_transform_pair_avx512 takes the
// rows; pf_off / pf_bytes: the part of the next channels' planes to fetch ahead (0: none).
void input_transform_channels(const ConvShape& s, const Phase& ph, int64_t lo, int64_t hi, bool whole,
                              const PackedColumns& pc, const float* xn, int64_t in_plane, int64_t c0, int64_t c1,
                              float* v, size_t v_floats, float* tmp, int64_t pf_off, int64_t pf_bytes) {
  int64_t c = c0;
#if defined(__x86_64__)
  if (transforms_in_pairs(s, ph))
    for (; c + 1 < c1; c += 2) {
      for (int64_t f = c + 2; f < std::min(c + 4, c1) && pf_bytes > 0; ++f)
        prefetch_run(xn + f * in_plane + pf_off, pf_bytes);
      input_transform_pair_avx512(s, ph, lo, hi, pc, xn + c * in_plane, xn + (c + 1) * in_plane, c, v, v_floats);
    }
#endif
  for (; c < c1; ++c) {
    if (c + 1 < c1 && pf_bytes > 0) prefetch_run(xn + (c + 1) * in_plane + pf_off, pf_bytes);
    input_transform_tiles(s, ph, lo, hi, whole, pc, xn + c * in_plane, c, v, v_floats, tmp);
  }
}

// One output channel, tiles [lo, hi) of one phase: Y = A^T M A for every tile,
// plus bias, residual and clamp, stored into the output plane. m: the 36
// products, operand xi at m + xi * m_floats, this channel's row, tile t at
// column ph.base + t - lo. tmp: 24 * max_tx + 4 * (max_tx * 4) floats. kWhole as
// for input_transform_body.
template <bool kWhole>
inline __attribute__((always_inline)) void output_transform_body(const ConvShape& s, const Phase& ph, int64_t lo,
                                                                  int64_t hi, const float* __restrict m,
                                                                  size_t m_floats, float bias, float* __restrict out,
                                                                  const float* __restrict res,
                                                                  const ConvPostOps& post, float* __restrict tmp) {
  const int64_t OW = s.out_w, wr = ph.tx * kT, dh = s.dil_h, dw = s.dil_w;
  float* sr = tmp;                   // [4 r][6 c][tx]: A^T along the rows
  float* yrow = tmp + 24 * ph.tx;    // [4][wr]: the tile row's output rows (this phase's columns)
  const int64_t n = ph.tx;
  const int64_t ty_begin = kWhole ? 0 : lo / n, ty_end = kWhole ? ph.ty : (hi + n - 1) / n;
  for (int64_t ty = ty_begin; ty < ty_end; ++ty) {
    // This row's tiles [txa, txb).
    const int64_t txa = kWhole ? 0 : std::max<int64_t>(lo - ty * n, 0), txb = kWhole ? n : std::min(hi - ty * n, n);
    const float* mt = m + (ph.base + ty * n - lo + txa);  // tile txa of the row
    for (int64_t c = 0; c < kA; ++c)
      for (int64_t tx = txa; tx < txb; ++tx) {
        const int64_t q = tx - txa;
        float o[4];
        wino_at(mt[size_t(0 * kA + c) * m_floats + q], mt[size_t(1 * kA + c) * m_floats + q],
                mt[size_t(2 * kA + c) * m_floats + q], mt[size_t(3 * kA + c) * m_floats + q],
                mt[size_t(4 * kA + c) * m_floats + q], mt[size_t(5 * kA + c) * m_floats + q], o);
        for (int64_t rr = 0; rr < kT; ++rr) sr[(rr * kA + c) * ph.tx + tx] = o[rr];
      }
    for (int64_t rr = 0; rr < kT; ++rr) {
      const float* srr = sr + rr * kA * ph.tx;
      float* y = yrow + rr * wr;
      for (int64_t tx = txa; tx < txb; ++tx)
        wino_at(srr[tx], srr[ph.tx + tx], srr[2 * ph.tx + tx], srr[3 * ph.tx + tx], srr[4 * ph.tx + tx],
                srr[5 * ph.tx + tx], y + tx * kT);
    }
    for (int64_t rr = 0; rr < kT; ++rr) {
      const int64_t i = ty * kT + rr;
      if (i >= ph.oh) break;
      const int64_t oy = ph.py + dh * i;
      const float* y = yrow + rr * wr;
      float* o = out + oy * OW + ph.px;
      const float* rp = res ? res + oy * OW + ph.px : nullptr;
      for (int64_t j = txa * kT, je = kWhole ? ph.ow : std::min(ph.ow, txb * kT); j < je; ++j) {
        float val = y[j] + bias;
        if (rp) val += rp[j * dw];
        if (post.clamp) {
          val = val < post.lo ? post.lo : val;
          val = val > post.hi ? post.hi : val;
        }
        if (post.hardswish) val = hard_swish(val);
        o[j * dw] = val;
      }
    }
  }
}

NXRT_CLONES
void output_transform(const ConvShape& s, const Phase& ph, const float* __restrict m, size_t m_floats, float bias,
                      float* __restrict out, const float* __restrict res, const ConvPostOps& post,
                      float* __restrict tmp) {
  output_transform_body<true>(s, ph, 0, ph.ty * ph.tx, m, m_floats, bias, out, res, post, tmp);
}

NXRT_CLONES
void output_transform_range(const ConvShape& s, const Phase& ph, int64_t lo, int64_t hi, const float* __restrict m, size_t m_floats, float bias, float* __restrict out,
                            const float* __restrict res, const ConvPostOps& post, float* __restrict tmp) {
  output_transform_body<false>(s, ph, lo, hi, m, m_floats, bias, out, res, post, tmp);
}

#if defined(__x86_64__)
// A^T m over 16 tiles at once (wino_at lane by lane).
__attribute__((target("avx512f"), always_inline)) inline void wino_at16(__m512 m0, __m512 m1, __m512 m2, __m512 m3,
                                                                      __m512 m4, __m512 m5, __m512* o) {
  const __m512 p = _mm512_add_ps(m1, m2), q = _mm512_sub_ps(m1, m2);
  const __m512 r = _mm512_add_ps(m3, m4), t = _mm512_sub_ps(m3, m4);
  o[0] = _mm512_add_ps(_mm512_add_ps(m0, p), r);
  o[1] = _mm512_fmadd_ps(_mm512_set1_ps(2.f), t, q);
  o[2] = _mm512_fmadd_ps(_mm512_set1_ps(4.f), r, p);
  o[3] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(8.f), t, q), m5);
}

// The 4 columns y[0..3] of 16 tiles interleaved: runs[k] holds tiles 4k .. 4k + 3, each as
// its 4 columns. (maskz forms: GCC 12 warns about the undefined pass-through of the plain ones.)
__attribute__((target("avx512f"), always_inline)) inline void interleave_tile_columns(const __m512* y,
                                                                                    __m512* runs) {
  const __m512i pa = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
  const __m512i pd = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
  const __m512i pb = _mm512_set_epi32(23, 22, 21, 20, 19, 18, 17, 16, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i pc = _mm512_set_epi32(31, 30, 29, 28, 27, 26, 25, 24, 15, 14, 13, 12, 11, 10, 9, 8);
  const __m512 ab_lo = _mm512_maskz_unpacklo_ps(0xFFFF, y[0], y[1]), ab_hi = _mm512_maskz_unpackhi_ps(0xFFFF, y[0], y[1]);
  const __m512 cd_lo = _mm512_maskz_unpacklo_ps(0xFFFF, y[2], y[3]), cd_hi = _mm512_maskz_unpackhi_ps(0xFFFF, y[2], y[3]);
  const __m512 e0 = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, _mm512_castps_pd(ab_lo), _mm512_castps_pd(cd_lo)));
  const __m512 e1 = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, _mm512_castps_pd(ab_lo), _mm512_castps_pd(cd_lo)));
  const __m512 e2 = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, _mm512_castps_pd(ab_hi), _mm512_castps_pd(cd_hi)));
  const __m512 e3 = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, _mm512_castps_pd(ab_hi), _mm512_castps_pd(cd_hi)));
  const __m512 f01l = _mm512_permutex2var_ps(e0, pa, e1), f23l = _mm512_permutex2var_ps(e2, pa, e3);
  const __m512 f01h = _mm512_permutex2var_ps(e0, pd, e1), f23h = _mm512_permutex2var_ps(e2, pd, e3);
  runs[0] = _mm512_permutex2var_ps(f01l, pb, f23l);
  runs[1] = _mm512_permutex2var_ps(f01l, pc, f23l);
  runs[2] = _mm512_permutex2var_ps(f01h, pb, f23h);
  runs[3] = _mm512_permutex2var_ps(f01h, pc, f23h);
}

// What the output stores apply, in registers: bias, the clamp's bounds, which post-ops.
struct OutputPost {
  __m512 bias, lo, hi;
  bool clamp, hardswish;
};

// out_row[0, len) = post(run + bias + res_row), under a mask of len (<= 16) lanes.
__attribute__((target("avx512f"), always_inline)) inline void store_output_run(float* orow, const float* rrow,
                                                                             int64_t len, __m512 run,
                                                                             const OutputPost& p) {
  const __mmask16 om = __mmask16(len >= 16 ? 0xFFFF : (1u << len) - 1u);
  __m512 val = _mm512_add_ps(run, p.bias);
  if (rrow) val = _mm512_add_ps(val, avx512_load_lanes(om, rrow));
  if (p.clamp) val = _mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, val, p.lo), p.hi);
  if (p.hardswish) val = hard_swish_avx512(val);
  avx512_store_lanes(orow, om, val);
}

// Whole tile rows [ty, ty + rows) (rows <= 4) of one undilated-column phase with n = ph.tx
// <= 4 tiles each, in one 16-lane pass: tile (ty + r, tx), column r * n + tx of mt, moved to
// lane 4 r + tx, so that after the interleave run r is tile row ty + r's 4n output columns.
__attribute__((target("avx512f"))) void output_transform_rows_avx512(const ConvShape& s, const Phase& ph, int64_t ty,
                                                                    int64_t rows, const float* __restrict mt,
                                                                    size_t m_floats, float bias,
                                                                    float* __restrict out,
                                                                    const float* __restrict res,
                                                                    const ConvPostOps& post) {
  const int64_t OW = s.out_w, n = ph.tx, cnt = rows * n;
  const __mmask16 tm = __mmask16((1u << cnt) - 1u);
  alignas(64) int32_t idx[16];
  for (int64_t k = 0; k < 16; ++k) idx[k] = int32_t(k % 4 < n ? (k / 4) * n + k % 4 : 0);
  const __m512i spread = _mm512_load_si512(idx);
  const OutputPost op{_mm512_set1_ps(bias), _mm512_set1_ps(post.lo), _mm512_set1_ps(post.hi), post.clamp,
                      post.hardswish};
  __m512 sr[kT][kA];  // A^T along the rows: [r][c]
  for (int64_t c = 0; c < kA; ++c) {
    __m512 mv[kA];
    for (int64_t a = 0; a < kA; ++a)
      mv[a] = _mm512_maskz_permutexvar_ps(0xFFFF, spread, _mm512_maskz_loadu_ps(tm, mt + size_t(a * kA + c) * m_floats));
    __m512 o[kT];
    wino_at16(mv[0], mv[1], mv[2], mv[3], mv[4], mv[5], o);
    for (int64_t r = 0; r < kT; ++r) sr[r][c] = o[r];
  }
  for (int64_t rr = 0; rr < kT; ++rr) {
    __m512 y[kT], runs[4];
    wino_at16(sr[rr][0], sr[rr][1], sr[rr][2], sr[rr][3], sr[rr][4], sr[rr][5], y);
    interleave_tile_columns(y, runs);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = (ty + r) * kT + rr;
      if (i >= ph.oh) break;
      const int64_t oy = ph.py + s.dil_h * i;
      store_output_run(out + oy * OW + ph.px, res ? res + oy * OW + ph.px : nullptr, std::min(ph.ow, kT * n), runs[r],
                       op);
    }
  }
}

// output_transform_body for undilated columns (dil_w 1) on AVX-512: 16 tiles
// of a tile row at once, A^T M A in registers, the 4 columns of each tile
// interleaved into runs of 16 output columns, then bias, residual and clamp
// in the store. (The scalar body goes one tile at a time through two buffers.)
__attribute__((target("avx512f"))) void output_transform_avx512(const ConvShape& s, const Phase& ph, int64_t lo,
                                                               int64_t hi, const float* __restrict m, size_t m_floats,
                                                               float bias, float* __restrict out,
                                                               const float* __restrict res, const ConvPostOps& post) {
  const int64_t OW = s.out_w, dh = s.dil_h, n = ph.tx;
  const OutputPost op{_mm512_set1_ps(bias), _mm512_set1_ps(post.lo), _mm512_set1_ps(post.hi), post.clamp,
                      post.hardswish};
  const int64_t ty_begin = lo / n, ty_end = (hi + n - 1) / n;
  for (int64_t ty = ty_begin; ty < ty_end;) {
    // Whole rows of <= 4 tiles: 4 rows a pass, as the input transform takes them (slots of 8
    // lanes for rows of 5..8 tiles ran no faster: 128 channels at 28x28, 49.5 -> 50.2 us).
    if (n <= 4) {
      int64_t rows = 0;
      while (rows < 4 && ty + rows < ty_end && (ty + rows) * n >= lo && (ty + rows + 1) * n <= hi) ++rows;
      if (rows >= 2) {
        output_transform_rows_avx512(s, ph, ty, rows, m + (ph.base + ty * n - lo), m_floats, bias, out, res, post);
        ty += rows;
        continue;
      }
    }
    const int64_t txa = std::max<int64_t>(lo - ty * n, 0), txb = std::min(hi - ty * n, n);
    for (int64_t tx0 = txa; tx0 < txb; tx0 += 16) {
      const int64_t cnt = std::min<int64_t>(16, txb - tx0);
      const __mmask16 tm = __mmask16(cnt >= 16 ? 0xFFFF : (1u << cnt) - 1u);
      const float* mt = m + (ph.base + ty * n - lo + tx0);
      __m512 sr[kT][kA];  // A^T along the rows: [r][c]
      for (int64_t c = 0; c < kA; ++c) {
        __m512 o[kT];
        wino_at16(_mm512_maskz_loadu_ps(tm, mt + size_t(0 * kA + c) * m_floats),
                  _mm512_maskz_loadu_ps(tm, mt + size_t(1 * kA + c) * m_floats),
                  _mm512_maskz_loadu_ps(tm, mt + size_t(2 * kA + c) * m_floats),
                  _mm512_maskz_loadu_ps(tm, mt + size_t(3 * kA + c) * m_floats),
                  _mm512_maskz_loadu_ps(tm, mt + size_t(4 * kA + c) * m_floats),
                  _mm512_maskz_loadu_ps(tm, mt + size_t(5 * kA + c) * m_floats), o);
        for (int64_t r = 0; r < kT; ++r) sr[r][c] = o[r];
      }
      const int64_t j_begin = kT * tx0, j_end = std::min(ph.ow, kT * (tx0 + cnt));
      for (int64_t rr = 0; rr < kT; ++rr) {
        const int64_t i = ty * kT + rr;
        if (i >= ph.oh) break;
        __m512 y[kT];  // y[j]: column j of each of the 16 tiles
        wino_at16(sr[rr][0], sr[rr][1], sr[rr][2], sr[rr][3], sr[rr][4], sr[rr][5], y);
        __m512 runs[4];  // run k: tiles 4k .. 4k + 3, each as its 4 columns
        interleave_tile_columns(y, runs);
        const int64_t oy = ph.py + dh * i;
        float* orow = out + oy * OW + ph.px;
        const float* rrow = res ? res + oy * OW + ph.px : nullptr;
        for (int64_t k = 0; k < 4; ++k) {
          const int64_t j0 = j_begin + 16 * k;
          if (j0 >= j_end) break;
          const int64_t len = std::min<int64_t>(16, j_end - j0);
          store_output_run(orow + j0, rrow ? rrow + j0 : nullptr, len, runs[k], op);
        }
      }
    }
    ++ty;
  }
}

// output_transform_avx512 for two output channels at once where a tile row has 5-7 tiles:
// channel oc's tiles (m0) in lanes 0-7, oc + 1's (m1) in 8-15, so that after the interleave
// runs 0-1 are oc's output columns and runs 2-3 oc + 1's. out, res, bias: the two channels'.
__attribute__((target("avx512f"))) void output_transform_pair_avx512(const ConvShape& s, const Phase& ph,
                                                                    int64_t lo, int64_t hi, const float* m0,
                                                                    const float* m1, size_t m_floats,
                                                                    const float (&bias)[2], float* const (&out)[2],
                                                                    const float* const (&res)[2],
                                                                    const ConvPostOps& post) {
  const int64_t OW = s.out_w, dh = s.dil_h, n = ph.tx;
  const OutputPost op[2] = {
      {_mm512_set1_ps(bias[0]), _mm512_set1_ps(post.lo), _mm512_set1_ps(post.hi), post.clamp, post.hardswish},
      {_mm512_set1_ps(bias[1]), _mm512_set1_ps(post.lo), _mm512_set1_ps(post.hi), post.clamp, post.hardswish}};
  const int64_t ty_begin = lo / n, ty_end = (hi + n - 1) / n;
  for (int64_t ty = ty_begin; ty < ty_end; ++ty) {
    const int64_t txa = std::max<int64_t>(lo - ty * n, 0), txb = std::min(hi - ty * n, n), cnt = txb - txa;
    const __mmask16 tm = __mmask16((1u << cnt) - 1u);
    const int64_t col = ph.base + ty * n - lo + txa;
    // Channel oc + 1's tiles into lanes 8.. by a load 8 floats early (through uintptr_t: it
    // may start before the buffer; the mask keeps the lanes before 8 unread).
    const uintptr_t hi_at = reinterpret_cast<uintptr_t>(m1 + col) - 8 * sizeof(float);
    const float* mt = m0 + col;
    __m512 sr[kT][kA];  // A^T along the rows: [r][c]
    for (int64_t c = 0; c < kA; ++c) {
      __m512 v[kA];
      for (int64_t a = 0; a < kA; ++a) {
        const size_t off = size_t(a * kA + c) * m_floats;
        v[a] = _mm512_mask_loadu_ps(_mm512_maskz_loadu_ps(tm, mt + off), __mmask16(tm << 8),
                                    reinterpret_cast<const float*>(hi_at + off * sizeof(float)));
      }
      __m512 o[kT];
      wino_at16(v[0], v[1], v[2], v[3], v[4], v[5], o);
      for (int64_t r = 0; r < kT; ++r) sr[r][c] = o[r];
    }
    const int64_t j_begin = kT * txa, j_end = std::min(ph.ow, kT * txb);
    for (int64_t rr = 0; rr < kT; ++rr) {
      const int64_t i = ty * kT + rr;
      if (i >= ph.oh) break;
      __m512 y[kT];
      wino_at16(sr[rr][0], sr[rr][1], sr[rr][2], sr[rr][3], sr[rr][4], sr[rr][5], y);
      __m512 runs[4];
      interleave_tile_columns(y, runs);
      const int64_t oy = ph.py + dh * i;
      for (int ch = 0; ch < 2; ++ch) {
        float* orow = out[ch] + oy * OW + ph.px;
        const float* rrow = res[ch] ? res[ch] + oy * OW + ph.px : nullptr;
        for (int64_t k = 0; k < 2; ++k) {
          const int64_t j0 = j_begin + 16 * k;
          if (j0 >= j_end) break;
          const int64_t len = std::min<int64_t>(16, j_end - j0);
          store_output_run(orow + j0, rrow ? rrow + j0 : nullptr, len, runs[2 * ch + k], op[ch]);
        }
      }
    }
  }
}

// A^T m over 8 tiles at once (wino_at lane by lane), AVX2.
__attribute__((target("avx2,fma"), always_inline)) inline void wino_at8(__m256 m0, __m256 m1, __m256 m2, __m256 m3,
                                                                      __m256 m4, __m256 m5, __m256* o) {
  const __m256 p = _mm256_add_ps(m1, m2), q = _mm256_sub_ps(m1, m2);
  const __m256 r = _mm256_add_ps(m3, m4), t = _mm256_sub_ps(m3, m4);
  o[0] = _mm256_add_ps(_mm256_add_ps(m0, p), r);
  o[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.f), t, q);
  o[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.f), r, p);
  o[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.f), t, q), m5);
}

// output_transform_body for undilated columns (dil_w 1) on AVX2: 8 tiles of a tile row at
// once, A^T M A in registers, the 4 columns of each tile interleaved (4x4 transposes in each
// 128-bit lane) into runs of 8 output columns, then bias, residual and clamp in the store.
__attribute__((target("avx2,fma"))) void output_transform_avx2(const ConvShape& s, const Phase& ph, int64_t lo,
                                                              int64_t hi, const float* __restrict m, size_t m_floats,
                                                              float bias, float* __restrict out,
                                                              const float* __restrict res, const ConvPostOps& post) {
  const int64_t OW = s.out_w, dh = s.dil_h, n = ph.tx;
  const __m256 bv = _mm256_set1_ps(bias), lov = _mm256_set1_ps(post.lo), hiv = _mm256_set1_ps(post.hi);
  const int64_t ty_begin = lo / n, ty_end = (hi + n - 1) / n;
  for (int64_t ty = ty_begin; ty < ty_end; ++ty) {
    const int64_t txa = std::max<int64_t>(lo - ty * n, 0), txb = std::min(hi - ty * n, n);
    for (int64_t tx0 = txa; tx0 < txb; tx0 += 8) {
      const int64_t cnt = std::min<int64_t>(8, txb - tx0);
      const __m256i tm = avx2_lane_mask(cnt);
      const float* mt = m + (ph.base + ty * n - lo + tx0);
      __m256 sr[kT][kA];  // A^T along the rows: [r][c]
      for (int64_t c = 0; c < kA; ++c) {
        __m256 mv[kA];
        for (int64_t a = 0; a < kA; ++a) {
          const float* p = mt + size_t(a * kA + c) * m_floats;
          mv[a] = cnt == 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tm);
        }
        __m256 o[kT];
        wino_at8(mv[0], mv[1], mv[2], mv[3], mv[4], mv[5], o);
        for (int64_t r = 0; r < kT; ++r) sr[r][c] = o[r];
      }
      const int64_t j_begin = kT * tx0, j_end = std::min(ph.ow, kT * (tx0 + cnt));
      for (int64_t rr = 0; rr < kT; ++rr) {
        const int64_t i = ty * kT + rr;
        if (i >= ph.oh) break;
        __m256 y[kT];  // y[j]: column j of each of the 8 tiles
        wino_at8(sr[rr][0], sr[rr][1], sr[rr][2], sr[rr][3], sr[rr][4], sr[rr][5], y);
        // u_k: tile k's 4 columns (low lane), tile k + 4's (high lane).
        const __m256 t0 = _mm256_unpacklo_ps(y[0], y[1]), t1 = _mm256_unpackhi_ps(y[0], y[1]);
        const __m256 t2 = _mm256_unpacklo_ps(y[2], y[3]), t3 = _mm256_unpackhi_ps(y[2], y[3]);
        const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
        const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
        const __m256 runs[4] = {_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u2, u3, 0x20),
                                _mm256_permute2f128_ps(u0, u1, 0x31), _mm256_permute2f128_ps(u2, u3, 0x31)};
        const int64_t oy = ph.py + dh * i;
        float* orow = out + oy * OW + ph.px;
        const float* rrow = res ? res + oy * OW + ph.px : nullptr;
        for (int64_t k = 0; k < 4; ++k) {
          const int64_t j0 = j_begin + 8 * k;
          if (j0 >= j_end) break;
          const int64_t len = std::min<int64_t>(8, j_end - j0);
          const __m256i om = avx2_lane_mask(len);
          __m256 val = _mm256_add_ps(runs[k], bv);
          if (rrow) val = _mm256_add_ps(val, len == 8 ? _mm256_loadu_ps(rrow + j0) : _mm256_maskload_ps(rrow + j0, om));
          // max/min return their second operand when either is NaN: NaN propagates.
          if (post.clamp) val = _mm256_min_ps(hiv, _mm256_max_ps(lov, val));
          if (post.hardswish) val = hard_swish_avx2(val);
          avx2_store_first(orow + j0, val, len);
        }
      }
    }
  }
}
#endif

// Tiles [lo, hi) of one phase for one output channel (output_transform_body),
// on AVX-512 or AVX2 when the columns are undilated.
void output_transform_tiles(const ConvShape& s, const Phase& ph, int64_t lo, int64_t hi, bool whole,
                            const float* m, size_t m_floats, float bias, float* out, const float* res,
                            const ConvPostOps& post, float* tmp) {
#if defined(__x86_64__)
  static const bool avx512 = active_isa() == Isa::avx512;
  if (avx512 && s.dil_w == 1) {
    output_transform_avx512(s, ph, lo, hi, m, m_floats, bias, out, res, post);
    return;
  }
  static const bool avx2 = active_isa() == Isa::avx2;
  if (avx2 && s.dil_w == 1) {
    output_transform_avx2(s, ph, lo, hi, m, m_floats, bias, out, res, post);
    return;
  }
#endif
  if (whole)
    output_transform(s, ph, m, m_floats, bias, out, res, post, tmp);
  else
    output_transform_range(s, ph, lo, hi, m, m_floats, bias, out, res, post, tmp);
}

// Output channels [o0, o1) (rows ldm floats apart in each of the 36 products m, planes
// out_plane apart in out and res), tiles [lo, hi) of phase ph, by output_transform_tiles, two
// channels a call where output_transform_pair_avx512 takes the rows.
void output_transform_channels(const ConvShape& s, const Phase& ph, int64_t lo, int64_t hi, bool whole,
                               const float* m, int64_t ldm, size_t m_floats, const float* bias, float* out,
                               int64_t out_plane, const float* res, const ConvPostOps& post, int64_t o0, int64_t o1,
                               float* tmp) {
  int64_t oc = o0;
#if defined(__x86_64__)
  if (transforms_in_pairs(s, ph))
    for (; oc + 1 < o1; oc += 2) {
      const float b[2] = {bias ? bias[oc] : 0.f, bias ? bias[oc + 1] : 0.f};
      float* const o[2] = {out + oc * out_plane, out + (oc + 1) * out_plane};
      const float* const r[2] = {res ? res + oc * out_plane : nullptr, res ? res + (oc + 1) * out_plane : nullptr};
      output_transform_pair_avx512(s, ph, lo, hi, m + oc * ldm, m + (oc + 1) * ldm, m_floats, b, o, r, post);
    }
#endif
  for (; oc < o1; ++oc)
    output_transform_tiles(s, ph, lo, hi, whole, m + oc * ldm, m_floats, bias ? bias[oc] : 0.f, out + oc * out_plane,
                           res ? res + oc * out_plane : nullptr, post, tmp);
}

}  // namespace

bool winograd_shape_ok(const ConvShape& s) {
  return s.group == 1 && s.k_h == 3 && s.k_w == 3 && s.stride_h == 1 && s.stride_w == 1 && s.dil_h >= 1 &&
         s.dil_w >= 1 && s.out_h > 0 && s.out_w > 0;
}

std::optional<ConvShape> winograd_5x5_blocks(const ConvShape& s) {
  if (s.group != 1 || s.k_h != 5 || s.k_w != 5 || s.stride_h != 1 || s.stride_w != 1 || s.dil_h != 1 ||
      s.dil_w != 1 || s.out_h <= 0 || s.out_w <= 0)
    return std::nullopt;
  ConvShape b = s;
  b.in_c = 4 * s.in_c;
  b.in_h = s.out_h + 2;
  b.in_w = s.out_w + 2;
  b.k_h = b.k_w = 3;
  b.pad_top = b.pad_left = 0;
  return b;
}

bool conv_uses_winograd(const ConvShape& s) {
  // 5x5: 9 products an output and input channel instead of 25 (2.8x fewer, against 3x3's 4x),
  // the shifted copies of the input (4x its size) made each run; U is 36 / 25 x 4 = 5.8x the
  // weights. One conv alone, 1 / 2 threads (ms, `nxrt bench`): ocr_crnn's 128 channels at 8x80
  // 2.54 -> 1.52 (in the model 2.62 -> 2.05 / 1.30 -> 1.05: U from memory), 32 at 56x56
  // 0.82 -> 0.62 / 0.44 -> 0.32, 64 at 28x28 0.77 -> 0.57 / 0.38 -> 0.33, 256 at 14x14
  // (U 38 MB) 3.07 -> 2.88 / 1.60 -> 1.41.
  if (const auto b = winograd_5x5_blocks(s)) return s.in_c >= 32 && s.out_c >= 32 && conv_uses_winograd(*b);
  if (!winograd_shape_ok(s) || s.in_c < 16 || s.out_c < 16) return false;
  // The 36 GEMMs run with the tiles as columns: below a panel's worth of tiles
  // most of each B vector is padding, and thin channel counts leave the
  // transforms (O(IC + OC) per tile) as large as the products (O(IC * OC)).
  // (Tiles as rows instead was tried for 7x7 outputs: U, 4x the weights, is then
  // read for 4 rows only and the layer is bound by memory, no faster.)
  // Dilated: small phases leave tiles mostly empty; at least half the tiles'
  // 16 outputs must be real for the 4x fewer products to pay.
  const Tiles tl = tiles_of(s);
  return tl.count >= 16 && 2 * s.out_h * s.out_w >= tl.count * kT * kT;
}

// det_fpn's 64-channel 20x20 convs (25 tiles), conv2d harness, 2 threads: F(4x4) 87 us, the
// direct product 74 (1 thread: 85 against 133); 32-channel 20x20 43 against 21; its
// 128-channel 10x10 F(2x2) 73 against 74. 32 channels at 40x40 (100 tiles, a block each)
// stay F(4x4): 54 against 75.
bool conv_winograd_loses_threaded(const ConvShape& s, const ThreadPool* pool) {
  const int threads = pool ? pool->threads() : 1;
  if (threads < 2 || active_isa() != Isa::avx512 || !conv_uses_direct(s)) return false;
  const double macs = double(s.out_c) * double(s.gemm_k()) * double(s.out_h) * double(s.out_w) * double(s.batch);
  if (macs > double(1 << 24)) return false;
  // (A 5x5 conv by its 3x3 blocks the same: 32 channels at 16x16, 2 threads, 46 us against
  // the direct product's 34; 1 thread 67 against 65.)
  if (conv_uses_winograd(s)) return tiles_of(winograd_5x5_blocks(s).value_or(s)).count < kMinBlockTiles * threads;
  return conv_uses_winograd_2x2(s);
}

// V (or M) operands an odd number of cache lines apart, so that the lines a transform writes
// (reads) for one tile group, one per operand, fall in different L1 sets. Operands a multiple
// of 4 KB apart (every ResNet-18 layer's V: 64 x 5 panels, 128 x 2, 256 x 1) all mapped to
// one 12-way set: the input transform took 38% of a 64-channel 56x56 layer on one thread.
size_t winograd_operand_stride(size_t floats) {
  size_t lines = (floats + 15) / 16;
  if (lines % 2 == 0) ++lines;
  return lines * 16;
}

size_t winograd_packed_floats(const ConvShape& s) {
  if (const auto b = winograd_5x5_blocks(s)) return winograd_packed_floats(*b);
  return size_t(kXi) * packed_a_floats(s.out_c, s.in_c);
}

void winograd_pack_weights(const ConvShape& s, const float* w, float* dst) {
  if (const auto b = winograd_5x5_blocks(s)) {
    // Block (a, b) of the kernel padded to 6x6 with zeros: taps (3a + i, 3b + j), as the
    // weights of input channel (a * 2 + b) * IC + ic of the 3x3 conv.
    const int64_t OC = s.out_c, IC = s.in_c;
    std::vector<float> w3(size_t(OC * 4 * IC * 9), 0.f);
    for (int64_t oc = 0; oc < OC; ++oc)
      for (int64_t q = 0; q < 4; ++q)
        for (int64_t ic = 0; ic < IC; ++ic)
          for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 3; ++j) {
              const int64_t ky = 3 * (q / 2) + i, kx = 3 * (q % 2) + j;
              if (ky < 5 && kx < 5)
                w3[size_t(((oc * 4 + q) * IC + ic) * 9 + i * 3 + j)] = w[((oc * IC + ic) * 5 + ky) * 5 + kx];
            }
    winograd_pack_weights(*b, w3.data(), dst);
    return;
  }
  const int64_t OC = s.out_c, IC = s.in_c;
  std::vector<float> u(size_t(kXi * OC * IC));  // [xi][oc][ic]
  // G (6x3) for points 0, -1, 1, -2, 2 and infinity.
  static const float G[6][3] = {{1.f / 4, 0, 0},
                                {-1.f / 6, -1.f / 6, -1.f / 6},
                                {-1.f / 6, 1.f / 6, -1.f / 6},
                                {1.f / 24, 1.f / 12, 1.f / 6},
                                {1.f / 24, -1.f / 12, 1.f / 6},
                                {0, 0, 1.f}};
  for (int64_t oc = 0; oc < OC; ++oc)
    for (int64_t ic = 0; ic < IC; ++ic) {
      const float* g = w + (oc * IC + ic) * 9;
      double t[6][3];  // G g, in double: the weights are transformed once
      for (int a = 0; a < 6; ++a)
        for (int j = 0; j < 3; ++j) t[a][j] = double(G[a][0]) * g[j] + double(G[a][1]) * g[3 + j] + double(G[a][2]) * g[6 + j];
      for (int a = 0; a < 6; ++a)
        for (int b = 0; b < 6; ++b)
          u[size_t(((a * kA + b) * OC + oc) * IC + ic)] =
              float(t[a][0] * G[b][0] + t[a][1] * G[b][1] + t[a][2] * G[b][2]);
    }
  const size_t per = packed_a_floats(OC, IC);
  for (int64_t xi = 0; xi < kXi; ++xi) pack_a(u.data() + xi * OC * IC, IC, false, OC, IC, 1.f, dst + xi * per);
}

namespace {

// Zeroes the padding columns of the last panel of each of the 36 packed-B
// operands of T tiles: the micro-kernel reads whole vectors.
void zero_panel_padding(float* v, size_t v_floats, int64_t K, int64_t T) {
  if (T % kGemmNR == 0) return;
  const int64_t p = T / kGemmNR, w = gemm_panel_width(T, p), cols = T - p * kGemmNR;
  for (int64_t xi = 0; xi < kXi; ++xi) {
    float* d = v + size_t(xi) * v_floats + p * kGemmNR * K;
    for (int64_t k = 0; k < K; ++k) std::fill(d + k * w + cols, d + k * w + w, 0.f);
  }
}

// Tiles [t0, t1) of an undilated conv, start to end on one thread: input
// transform into this thread's V, the 36 products into its M, output transform.
// No barrier between the steps, and V and M never leave this core.
void winograd_block(const ConvShape& s, const Phase& ph, int64_t t0, int64_t t1, const float* xn, const float* u,
                    size_t u_floats, const float* bias, float* on, const float* rn, const ConvPostOps& post,
                    size_t tmp_floats) {
  const int64_t IC = s.in_c, OC = s.out_c, tb = t1 - t0;
  const int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;
  const PackedColumns pc(IC, tb);
  const size_t v_floats = winograd_operand_stride(packed_b_floats(IC, tb)), m_floats = winograd_operand_stride(size_t(OC * tb));
  float* v = scratch_floats(kScratchA, size_t(kXi) * v_floats);
  float* m = scratch_floats(kScratchB, size_t(kXi) * m_floats);
  float* tmp = scratch_floats(kScratchC, tmp_floats);
  zero_panel_padding(v, v_floats, IC, tb);
  // The input rows this block's tiles read, one run per plane (18 rows of a 28-wide map: 2 KB),
  // the next plane's fetched ahead (prefetch_run).
  const int64_t ty0 = t0 / ph.tx, ty1 = (t1 + ph.tx - 1) / ph.tx;
  const int64_t ra = std::clamp<int64_t>(ph.py + ty0 * kT * s.dil_h - s.pad_top, 0, s.in_h);
  const int64_t rb = std::clamp<int64_t>(ph.py + (ty1 * kT + 2) * s.dil_h - s.pad_top, 0, s.in_h);
  const int64_t run_bytes = (rb - ra) * s.in_w * int64_t(sizeof(float));
  input_transform_channels(s, ph, t0, t1, false, pc, xn, in_plane, 0, IC, v, v_floats, tmp, ra * s.in_w, run_bytes);
  for (int64_t xi = 0; xi < kXi; ++xi)
    gemm_packed_serial(OC, tb, IC, u + size_t(xi) * u_floats, v + size_t(xi) * v_floats, m + size_t(xi) * m_floats,
                       tb, GemmEpilogue{});
  output_transform_channels(s, ph, t0, t1, false, m, tb, m_floats, bias, on, out_plane, rn, post, 0, OC, tmp);
}

}  // namespace

// The input of winograd_5x5_blocks' 3x3 conv: channel (a * 2 + b) * IC + ic, row y, column c
// is x's channel ic at row y + 3a - pad_top, column c + 3b - pad_left (zero outside x).
static void build_5x5_blocks_input(const ConvShape& s, const ConvShape& b, const float* x, float* x4,
                                   ThreadPool* pool) {
  const int64_t IC = s.in_c, H = s.in_h, W = s.in_w, BH = b.in_h, BW = b.in_w;
  parallel_ranges(pool, s.batch * 4 * IC, threads_for(pool, double(s.batch * 4 * IC * BH * BW), 1 << 16),
                  [&](int64_t c0, int64_t c1) {
                    for (int64_t c = c0; c < c1; ++c) {
                      const int64_t n = c / (4 * IC), q = c / IC % 4, ic = c % IC;
                      const int64_t dy = 3 * (q / 2) - s.pad_top, dx = 3 * (q % 2) - s.pad_left;
                      const float* plane = x + (n * IC + ic) * H * W;
                      float* d = x4 + c * BH * BW;
                      // Columns c with 0 <= c + dx < W.
                      const int64_t lo = std::clamp<int64_t>(-dx, 0, BW), hi = std::clamp<int64_t>(W - dx, lo, BW);
                      for (int64_t y = 0; y < BH; ++y, d += BW) {
                        const int64_t sy = y + dy;
                        if (sy < 0 || sy >= H) {
                          std::fill(d, d + BW, 0.f);
                          continue;
                        }
                        std::fill(d, d + lo, 0.f);
                        std::copy(plane + sy * W + lo + dx, plane + sy * W + hi + dx, d + lo);
                        std::fill(d + hi, d + BW, 0.f);
                      }
                    }
                  });
}

void conv2d_winograd(const ConvShape& s, const float* x, const float* u, const float* bias, float* out,
                     ThreadPool* pool, const ConvPostOps& post) {
  if (const auto b = winograd_5x5_blocks(s)) {
    // The shifted copies in a buffer of this thread's own (conv2d_winograd's scratch slots
    // hold V and M): 4x the input, 1.3 MB for ocr_crnn's 5x5 conv.
    thread_local AlignedFloats x4;
    const size_t n4 = size_t(b->batch * b->in_c * b->in_h * b->in_w);
    if (x4.size() < n4) x4.resize(n4);
    build_5x5_blocks_input(s, *b, x, x4.data(), pool);
    conv2d_winograd(*b, x4.data(), u, bias, out, pool, post);
    return;
  }
  const int64_t IC = s.in_c, OC = s.out_c;
  const Tiles tl = tiles_of(s);
  const int64_t T = tl.count;
  const size_t v_floats = winograd_operand_stride(packed_b_floats(IC, T)), m_floats = winograd_operand_stride(size_t(OC * T)),
               u_floats = packed_a_floats(OC, IC);
  const PackedColumns pc(IC, T);
  const size_t in_tmp = size_t(kA * (tl.max_tx * kT + 2) + 2 * kXi * tl.max_tx),
               out_tmp = size_t(24 * tl.max_tx + kT * tl.max_tx * kT);
  const int in_threads = threads_for(pool, double(IC) * double(T) * 400.0);
  const int gemm_threads = threads_for(pool, double(kXi) * double(OC) * double(T) * double(IC));
  const int out_threads = threads_for(pool, double(OC) * double(T) * 300.0);
  // Threaded, with at least kMinBlockTiles tiles per thread: one equal block of
  // tiles per thread, done start to end (transform, 36 products, transform
  // back), so there is no barrier between the steps and V and M never move
  // between cores (measured on 2 vCPUs: ResNet-18's 56x56 layers up to 25% and
  // 28x28 layers about 10% faster; blocks of one panel each, taken in turn,
  // were slower than one block per thread). Fewer tiles:
  // three steps, the products split by operand so that each thread reads only
  // its share of the weights U (a block of few tiles would read all of U for
  // little work: 256 channels at 14x14 have 16 tiles and 9 MB of U). One thread,
  // or a dilated conv (several phases): the three steps.
  if (tl.phases.size() == 1 && gemm_threads > 1 && T >= kMinBlockTiles * gemm_threads) {
    const Phase& ph = tl.phases[0];
    const int64_t blocks = gemm_threads;
    for (int64_t n = 0; n < s.batch; ++n) {
      const float* xn = x + n * IC * s.in_h * s.in_w;
      float* on = out + n * OC * s.out_h * s.out_w;
      const float* rn = post.residual ? post.residual + n * OC * s.out_h * s.out_w : nullptr;
      parallel_for(pool, blocks, [&](int64_t b) {
        // Whole tile rows per block: a block ending inside a tile row shares that row's 4
        // output rows with the next one, whose core then writes the same cache lines (ResNet's
        // 28x28 layers, 7 rows of 7 tiles in blocks of 24 / 25: the output transform took 2x
        // as long on 2 threads). Rows split as evenly as they go (4 / 3 there; the products
        // cost the same for 28 and 21 columns: two 16-lane vectors either way).
        int64_t t0, t1;
        if (ph.ty >= blocks) {
          split_range(ph.ty, blocks, b, t0, t1);
          t0 *= ph.tx;
          t1 *= ph.tx;
        } else {
          split_range(T, blocks, b, t0, t1);
        }
        winograd_block(s, ph, t0, t1, xn, u, u_floats, bias, on, rn, post, std::max(in_tmp, out_tmp));
      });
    }
    return;
  }
  // The calling thread's slots hold V and M for the whole call; tasks take
  // their own slot C (worker threads have their own scratch).
  float* v = scratch_floats(kScratchA, size_t(kXi) * v_floats);
  float* m = scratch_floats(kScratchB, size_t(kXi) * m_floats);
  for (int64_t n = 0; n < s.batch; ++n) {
    const float* xn = x + n * IC * s.in_h * s.in_w;
    float* on = out + n * OC * s.out_h * s.out_w;
    const float* rn = post.residual ? post.residual + n * OC * s.out_h * s.out_w : nullptr;
    zero_panel_padding(v, v_floats, IC, T);
    parallel_for(in_threads <= 1 ? nullptr : pool, in_threads, [&](int64_t i) {
      int64_t c0, c1;
      split_range(IC, in_threads, i, c0, c1);
      float* tmp = scratch_floats(kScratchC, in_tmp);
      if (tl.phases.size() == 1) {
        const Phase& ph = tl.phases[0];
        input_transform_channels(s, ph, 0, ph.ty * ph.tx, true, pc, xn, s.in_h * s.in_w, c0, c1, v, v_floats, tmp, 0,
                                 0);
      } else {
        for (int64_t c = c0; c < c1; ++c)
          for (const Phase& ph : tl.phases)
            input_transform_tiles(s, ph, 0, ph.ty * ph.tx, true, pc, xn + c * s.in_h * s.in_w, c, v, v_floats, tmp);
      }
    });
    parallel_for(gemm_threads <= 1 ? nullptr : pool, kXi, [&](int64_t xi) {
      gemm_packed_serial(OC, T, IC, u + size_t(xi) * u_floats, v + size_t(xi) * v_floats, m + size_t(xi) * m_floats,
                         T, GemmEpilogue{});
    });
    parallel_for(out_threads <= 1 ? nullptr : pool, out_threads, [&](int64_t i) {
      int64_t o0, o1;
      split_range(OC, out_threads, i, o0, o1);
      float* tmp = scratch_floats(kScratchC, out_tmp);
      if (tl.phases.size() == 1) {
        const Phase& ph = tl.phases[0];
        output_transform_channels(s, ph, 0, ph.ty * ph.tx, true, m, T, m_floats, bias, on, s.out_h * s.out_w, rn, post,
                                  o0, o1, tmp);
      } else {
        for (int64_t oc = o0; oc < o1; ++oc)
          for (const Phase& ph : tl.phases)
            output_transform_tiles(s, ph, 0, ph.ty * ph.tx, true, m + oc * T, m_floats, bias ? bias[oc] : 0.f,
                                   on + oc * s.out_h * s.out_w, rn ? rn + oc * s.out_h * s.out_w : nullptr, post,
                                   tmp);
      }
    });
  }
}

}  // namespace nxrt::cpu
