// q_conv_winograd (conv_int8_winograd.hpp): the weight transform in C++, the input and output
// transforms in AVX-512 BW (target attributes), the products by q_tile_wide_dpwssd.
#include "conv_int8_winograd.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "cpu_info.hpp"
#include "q_store_fast_avx512.hpp"
#include "scratch.hpp"

namespace nxrt::cpu {
namespace {

// G scaled by row: (S G) with s = (4, 6, 6, 24, 24, 1).
constexpr int kGs[6][3] = {{1, 0, 0}, {-1, -1, -1}, {-1, 1, -1}, {1, 2, 4}, {1, -2, 4}, {0, 0, 1}};

// Where a panel's lanes lie (conv_int8_winograd.hpp): tile rows [ty0, ty0 + rows) of `lanes`
// lanes each (the first ntx used, from tile column tx0); a panel row reads Wr padded columns.
struct PanelGeom {
  int64_t ty0, rows, tx0, ntx, lanes, Wr;
};

struct Geom {
  int64_t tiles_h, tiles_w, pitch, panels;
  explicit Geom(const ConvShape& s) {
    tiles_h = (s.out_h + 3) / 4;
    tiles_w = (s.out_w + 3) / 4;
    pitch = tiles_w <= 4 ? 4 : tiles_w <= 8 ? 8 : (tiles_w + 15) / 16 * 16;
    panels = pitch <= 16 ? (tiles_h + 16 / pitch - 1) / (16 / pitch) : tiles_h * (pitch / 16);
  }
  PanelGeom panel(int64_t P) const {
    if (pitch <= 16) return {P * (16 / pitch), 16 / pitch, 0, tiles_w, pitch, 4 * tiles_w + 2};
    const int64_t per_row = pitch / 16, tx0 = P % per_row * 16;
    return {P / per_row, 1, tx0, std::min<int64_t>(16, tiles_w - tx0), 16, 66};
  }
};

}  // namespace

bool q_winograd_shape_ok(const ConvShape& s) {
  return s.k_h == 3 && s.k_w == 3 && s.stride_h == 1 && s.stride_w == 1 && s.dil_h == 1 && s.dil_w == 1 &&
         s.group == 1 && s.pad_top >= 0 && s.pad_left >= 0 && s.out_h > 0 && s.out_w > 0;
}

bool q_winograd_pays(const ConvShape& s) {
  if (!q_winograd_shape_ok(s) || s.in_c < 32 || s.out_c < 16) return false;
  const double rows = double(q_tiles(s.out_c) * kQMR), pairs = double(q_pairs(s.in_c));
  const double wino = double(kQWinogradPoints) * rows * pairs * double(Geom(s).panels);
  const double direct = double(s.out_h * s.out_w) * double(s.out_c) * double(s.in_c) * 9.0 / 64.0;
  return wino <= 0.75 * direct && double(q_winograd_words(s.out_c, s.in_c)) * 4.0 <= 8.0 * (1 << 20);
}

void q_winograd_pack(const int8_t* w, int64_t oc, int64_t ic, uint32_t* dst) {
  // Per tile of kQMR output channels, U' of its (m, c) into a small buffer (u[p][r][c],
  // int16, by the two 1-D passes), then its words in dst's order: both in sequence, and the
  // buffer is reused (a whole layer's at once took 27-47 ms for 256 x 256 weights, most of it
  // page faults and scattered accesses).
  const int64_t KP = q_pairs(ic), tiles = q_tiles(oc), row = 2 * KP;
  std::vector<int16_t> u(size_t(kQWinogradPoints * kQMR * row));
  for (int64_t t = 0; t < tiles; ++t) {
    std::fill(u.begin(), u.end(), int16_t(0));
    for (int64_t r = 0; r < kQMR && t * kQMR + r < oc; ++r)
      for (int64_t c = 0; c < ic; ++c) {
        const int8_t* g = w + ((t * kQMR + r) * ic + c) * 9;
        int32_t h[6][3];
        for (int i = 0; i < 6; ++i)
          for (int b = 0; b < 3; ++b) h[i][b] = kGs[i][0] * g[b] + kGs[i][1] * g[3 + b] + kGs[i][2] * g[6 + b];
        for (int i = 0; i < 6; ++i)
          for (int j = 0; j < 6; ++j)  // |value| <= 49 * 128
            u[size_t(((i * 6 + j) * kQMR + r) * row + c)] =
                int16_t(h[i][0] * kGs[j][0] + h[i][1] * kGs[j][1] + h[i][2] * kGs[j][2]);
      }
    for (int64_t p = 0; p < kQWinogradPoints; ++p)
      for (int64_t q = 0; q < KP; ++q)
        for (int64_t r = 0; r < kQMR; ++r) {
          const int16_t* ur = u.data() + (p * kQMR + r) * row + 2 * q;
          *dst++ = uint32_t(uint16_t(ur[0])) | uint32_t(uint16_t(ur[1])) << 16;
        }
  }
}

}  // namespace nxrt::cpu

#if defined(__x86_64__)
// GCC 12's AVX-512 headers pass an "undefined" vector to the masked builtins.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

namespace nxrt::cpu {
namespace {

#define NXRT_QW __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi")))

// B^T (points 0, +-1, +-2) on six vectors of int16, r[0..5] -> o[0..5].
NXRT_QW inline void input_1d(const __m512i* r, __m512i* o) {
  const __m512i d42 = _mm512_sub_epi16(r[4], r[2]), d31 = _mm512_sub_epi16(r[3], r[1]);
  o[0] = _mm512_add_epi16(_mm512_slli_epi16(_mm512_sub_epi16(r[0], r[2]), 2), d42);
  o[1] = _mm512_sub_epi16(_mm512_add_epi16(r[3], r[4]), _mm512_slli_epi16(_mm512_add_epi16(r[1], r[2]), 2));
  o[2] = _mm512_add_epi16(_mm512_sub_epi16(r[4], r[3]), _mm512_slli_epi16(_mm512_sub_epi16(r[1], r[2]), 2));
  o[3] = _mm512_add_epi16(d42, _mm512_slli_epi16(d31, 1));
  o[4] = _mm512_sub_epi16(d42, _mm512_slli_epi16(d31, 1));
  o[5] = _mm512_add_epi16(_mm512_slli_epi16(_mm512_sub_epi16(r[1], r[3]), 2), _mm512_sub_epi16(r[5], r[3]));
}

// A'^T = A^T diag(6, 4, 4, 1, 1, 24) on six vectors of int32 (wrapping), m[0..5] -> o[0..3].
NXRT_QW inline void output_1d(const __m512i* m, __m512i* o) {
  const __m512i s12 = _mm512_add_epi32(m[1], m[2]), d12 = _mm512_sub_epi32(m[1], m[2]);
  const __m512i s34 = _mm512_add_epi32(m[3], m[4]), d34 = _mm512_sub_epi32(m[3], m[4]);
  const __m512i m0x6 = _mm512_add_epi32(_mm512_slli_epi32(m[0], 2), _mm512_slli_epi32(m[0], 1));
  const __m512i m5x24 = _mm512_add_epi32(_mm512_slli_epi32(m[5], 4), _mm512_slli_epi32(m[5], 3));
  o[0] = _mm512_add_epi32(_mm512_add_epi32(m0x6, _mm512_slli_epi32(s12, 2)), s34);
  o[1] = _mm512_add_epi32(_mm512_slli_epi32(d12, 2), _mm512_slli_epi32(d34, 1));
  o[2] = _mm512_slli_epi32(_mm512_add_epi32(s12, s34), 2);
  o[3] = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(d12, 2), _mm512_slli_epi32(d34, 3)), m5x24);
}

// A panel's source bytes per input row k of its tiles: for each channel a 128-byte table
// (two zmm) of its tile rows' padded x' rows, segment r (tile row r) from byte r * seg (seg =
// 128 / rows), the padding x_zp'. Lane l (a tile) reads byte e(l) + k' for its column k' of
// the 6 (e(l) = r * seg + 4 t), the pair's first channel into byte 4l (int16 lane 2l) and its
// second into byte 4l + 2, the odd bytes zero: one vpermt2b a channel gives the pair's words
// as int16, and B^T then runs along k' and k on whole vectors.
struct SegmentLoad {
  int half;          // table zmm 0 or 1
  int64_t off;       // x offset (channel 0) of the load's byte 0
  uint64_t mask;     // the bytes it fills
};
struct PanelSource {
  int loads[6] = {};
  SegmentLoad load[6][8];
  alignas(64) uint8_t idx[6][64];  // per column k'
};

PanelSource panel_source(const ConvShape& s, const PanelGeom& pg) {
  PanelSource ps;
  const int64_t seg = 128 / pg.rows;
  for (int k = 0; k < 6; ++k)
    for (int64_t r = 0; r < pg.rows; ++r) {
      const int64_t xr = 4 * (pg.ty0 + r) + k - s.pad_top;
      if (xr < 0 || xr >= s.in_h) continue;
      for (int64_t b0 = r * seg; b0 < (r + 1) * seg && b0 < r * seg + pg.Wr; b0 = (b0 / 64 + 1) * 64) {
        // Table bytes [b0, end) of this half hold segment columns b0 - r * seg on.
        const int64_t end = std::min({(b0 / 64 + 1) * 64, (r + 1) * seg, r * seg + pg.Wr});
        uint64_t mask = 0;
        for (int64_t byte = b0; byte < end; ++byte) {
          const int64_t xc = 4 * pg.tx0 - s.pad_left + byte - r * seg;
          if (xc >= 0 && xc < s.in_w) mask |= 1ull << (byte % 64);
        }
        if (!mask) continue;
        SegmentLoad& l = ps.load[k][ps.loads[k]++];
        l.half = int(b0 / 64);
        l.off = xr * s.in_w + 4 * pg.tx0 - s.pad_left - r * seg + (b0 / 64) * 64;  // byte 0 of the half
        l.mask = mask;
      }
    }
  for (int kk = 0; kk < 6; ++kk)
    for (int l = 0; l < 16; ++l) {
      const int64_t r = l / pg.lanes, t = l % pg.lanes;
      const int64_t e = r < pg.rows && t < pg.ntx ? r * seg + 4 * t : 0;  // idle lanes read byte 0
      ps.idx[kk][4 * l] = ps.idx[kk][4 * l + 2] = uint8_t(e + kk);
      ps.idx[kk][4 * l + 1] = ps.idx[kk][4 * l + 3] = 0;
    }
  return ps;
}

// The lines from one (point, panel) B slice of V to the next: an odd count, so the 36 x nv
// slices the input transform writes side by side do not share an L1 set (KP lines each, a
// multiple of 4 KB for 64 or 128 input channels: 64@56's transform 1.9x slower).
int64_t v_stride(int64_t ic) { return q_pairs(ic) | 1; }

// V of panel P for input channels [0, ic) of image x (plane in_h x in_w, uint8; flip 0x80 for
// int8) into vg's panel `slot` of nv: word (point p, pair q, lane l) at ((p * nv + slot) *
// v_stride(ic) + q) * 16 + l.
NXRT_QW void input_transform(const ConvShape& s, const Geom& g, int64_t P, const uint8_t* x, int64_t ic, uint8_t flip,
                             uint8_t zp, uint32_t* vg, int64_t nv, int64_t slot) {
  const int64_t vstride = v_stride(ic);
  const PanelGeom pg = g.panel(P);
  const PanelSource ps = panel_source(s, pg);
  const int64_t KP = q_pairs(ic), plane = s.in_h * s.in_w;
  const __m512i zpv = _mm512_set1_epi8(char(zp ^ flip)), flipv = _mm512_set1_epi8(char(flip));
  __m512i idx[6];
#pragma GCC unroll 6
  for (int k = 0; k < 6; ++k) idx[k] = _mm512_load_si512(ps.idx[k]);
  const __mmask64 first = 0x1111111111111111ull, second = 0x4444444444444444ull;
  alignas(64) __m512i h[6][6];  // after B^T along the columns: [input row k][j]
  // The rows of x the panel reads: [xr0, xr1) x columns [xc0, xc1) of each channel.
  const int64_t xr0 = std::max<int64_t>(0, 4 * pg.ty0 - s.pad_top);
  const int64_t xr1 = std::min<int64_t>(s.in_h, 4 * (pg.ty0 + pg.rows) + 2 - s.pad_top);
  const int64_t xc0 = std::max<int64_t>(0, 4 * pg.tx0 - s.pad_left);
  const int64_t xc1 = std::min<int64_t>(s.in_w, 4 * pg.tx0 + pg.Wr - s.pad_left);
  for (int64_t q = 0; q < KP; ++q) {
    const uint8_t* x0 = x + 2 * q * plane;
    const bool has1 = 2 * q + 1 < ic;
    // The pair two ahead fetched meanwhile: its lines often lie in the other core's cache (a QDQ
    // Add before the conv splits the channels between the threads) and the loads wait on them.
    // A harness writing x from both threads by channel halves before each run: 64@56 on 2
    // threads 145 -> 129 us, 128@28 139 -> 125 (the direct product, which fetches ahead, 160).
    if (xc1 > xc0)
      for (int64_t c = 2 * (q + 2); c < std::min(2 * (q + 2) + 2, ic); ++c)
        for (int64_t xr = xr0; xr < xr1; ++xr) {
          const uint8_t* row = x + c * plane + xr * s.in_w;
          _mm_prefetch(reinterpret_cast<const char*>(row + xc0), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(row + xc1 - 1), _MM_HINT_T0);
        }
    for (int k = 0; k < 6; ++k) {
      __m512i t0a = zpv, t0b = zpv, t1a = zpv, t1b = zpv;
      for (int i = 0; i < ps.loads[k]; ++i) {
        const SegmentLoad& l = ps.load[k][i];
        if (l.half == 0) {
          t0a = _mm512_mask_loadu_epi8(t0a, l.mask, x0 + l.off);
          if (has1) t1a = _mm512_mask_loadu_epi8(t1a, l.mask, x0 + plane + l.off);
        } else {
          t0b = _mm512_mask_loadu_epi8(t0b, l.mask, x0 + l.off);
          if (has1) t1b = _mm512_mask_loadu_epi8(t1b, l.mask, x0 + plane + l.off);
        }
      }
      t0a = _mm512_xor_si512(t0a, flipv);
      t0b = _mm512_xor_si512(t0b, flipv);
      t1a = _mm512_xor_si512(t1a, flipv);
      t1b = _mm512_xor_si512(t1b, flipv);
      const __mmask64 m1 = has1 ? second : 0;  // an odd last channel: its int16 lanes 0
      __m512i col[6];
#pragma GCC unroll 6
      for (int kk = 0; kk < 6; ++kk)
        col[kk] = _mm512_or_si512(_mm512_maskz_permutex2var_epi8(first, t0a, idx[kk], t0b),
                                  _mm512_maskz_permutex2var_epi8(m1, t1a, idx[kk], t1b));
      input_1d(col, h[k]);
    }
#pragma GCC unroll 6
    for (int j = 0; j < 6; ++j) {
      __m512i rows[6], o[6];
#pragma GCC unroll 6
      for (int k = 0; k < 6; ++k) rows[k] = h[k][j];
      input_1d(rows, o);
#pragma GCC unroll 6
      for (int i = 0; i < 6; ++i) _mm512_store_si512(vg + (((i * 6 + j) * nv + slot) * vstride + q) * kQNR, o[i]);
    }
  }
}

// The output transform of one row m of the products (mb: point p's row m of panel slot at
// mb + p * point_stride + slot * kQMR * kQNR + m * kQNR) into ybuf: output row a of the tile,
// pixel vector v (lanes 4v .. 4v + 3) at ybuf + (a * 4 + v) * kQMR * kQNR + m * kQNR.
NXRT_QW void output_transform(const int32_t* mb, int64_t point_stride, int64_t m, int32_t* ybuf) {
  __m512i t[4][6];
  #pragma GCC unroll 6
  for (int j = 0; j < 6; ++j) {
    __m512i col[6], o[4];
    #pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) col[i] = _mm512_load_si512(mb + (i * 6 + j) * point_stride + m * kQNR);
    output_1d(col, o);
    #pragma GCC unroll 4
    for (int a = 0; a < 4; ++a) t[a][j] = o[a];
  }
  const __m512i inv9 = _mm512_set1_epi32(int32_t(0x38E38E39u));  // 9 * inv9 = 1 mod 2^32
  #pragma GCC unroll 4
  for (int a = 0; a < 4; ++a) {
    __m512i yv[4];
    output_1d(t[a], yv);
    #pragma GCC unroll 4
    for (int b = 0; b < 4; ++b) yv[b] = _mm512_srai_epi32(_mm512_mullo_epi32(yv[b], inv9), 6);
    // Lanes x 4 pixels -> pixel order: vector v = the 4 pixels of lanes 4v .. 4v + 3.
    const __m512i t0 = _mm512_unpacklo_epi32(yv[0], yv[1]), t1 = _mm512_unpackhi_epi32(yv[0], yv[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(yv[2], yv[3]), t3 = _mm512_unpackhi_epi32(yv[2], yv[3]);
    const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
    const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
    const __m512i x0 = _mm512_shuffle_i32x4(u0, u1, 0x88), x1 = _mm512_shuffle_i32x4(u2, u3, 0x88);
    const __m512i x2 = _mm512_shuffle_i32x4(u0, u1, 0xdd), x3 = _mm512_shuffle_i32x4(u2, u3, 0xdd);
    int32_t* ya = ybuf + a * 4 * kQMR * kQNR + m * kQNR;
    _mm512_store_si512(ya, _mm512_shuffle_i32x4(x0, x1, 0x88));
    _mm512_store_si512(ya + kQMR * kQNR, _mm512_shuffle_i32x4(x2, x3, 0x88));
    _mm512_store_si512(ya + 2 * kQMR * kQNR, _mm512_shuffle_i32x4(x0, x1, 0xdd));
    _mm512_store_si512(ya + 3 * kQMR * kQNR, _mm512_shuffle_i32x4(x2, x3, 0xdd));
  }
}

// The kept-column store's masks for panel P, tile output row a: pixel vector v holds lanes 4v
// .. 4v + 3 (one tile row, since pitch >= 4), 16 pixels from column 4 tx of output row 4 ty + a.
void store_masks(const ConvShape& s, const Geom& g, int64_t P, int a, uint16_t* keep, int64_t* col_at) {
  const PanelGeom pg = g.panel(P);
  for (int v = 0; v < 4; ++v) {
    const int64_t r = 4 * v / pg.lanes, t = 4 * v % pg.lanes;
    const int64_t ty = pg.ty0 + r, tx = pg.tx0 + t, orow = 4 * ty + a;
    keep[v] = 0;
    col_at[v] = 0;
    if (r >= pg.rows || ty >= g.tiles_h || orow >= s.out_h || t >= pg.ntx) continue;
    const int64_t n = std::min<int64_t>(16, std::min<int64_t>(4 * (pg.ntx - t), s.out_w - 4 * tx));
    keep[v] = uint16_t(n >= 16 ? 0xffff : (1u << n) - 1u);
    col_at[v] = orow * s.out_w + 4 * tx;
  }
}

// The QOutput store's float shortcut (q_fast_path, as conv_int8_nhwc.cpp's store_tile_fast)
// for one output row of a channel tile: channels ch0 + r, r in [0, rows), at acc + (v * kQMR +
// r) * kQNR for pixel vector v, whose lanes keep[v] (a run from lane 0) go to y + r * plane +
// col_at[v]. A vector with a lane too near a half-integer goes through `exact` (the kept store
// for it alone). The kept store, generic in its kinds and masks, took 15% of a 64@56 layer.
NXRT_QW void store_rows_fast(const QEpilogue& e, QStoreKeptFn exact, const int32_t* acc, int64_t rows,
                             const uint16_t* keep, const int64_t* col_at, int64_t ch0, char* y, int64_t plane) {
  const QFastConsts k = q_fast_consts(e);
  for (int64_t r = 0; r < rows; ++r) {
    const size_t c = size_t(ch0 + r);
    const __m512i bias = e.bias.empty() ? _mm512_setzero_si512() : _mm512_set1_epi32(e.bias[c]);
    const __m512 fm = _mm512_set1_ps(e.fast_m[c]), fb = _mm512_set1_ps(e.fast_b[c]);
    const __m512 lim = _mm512_set1_ps(e.fast_lim[c]);
    char* yr = y + r * plane;
    for (int v = 0; v < 4; ++v) {
      if (!keep[v]) continue;
      __m128i out;
      const __m512i sum = _mm512_add_epi32(_mm512_loadu_si512(acc + (v * kQMR + r) * kQNR), bias);  // wraps
      if (q_fast_bytes(k, sum, fm, fb, lim, __mmask16(keep[v]), out)) [[likely]]
        _mm_mask_storeu_epi8(yr + col_at[v], __mmask16(keep[v]), out);
      else
        exact(e, acc + v * kQMR * kQNR, 0, r, r + 1, 1, keep + v, col_at + v, ch0 + r, yr, plane);
    }
  }
}

bool has_bw_vnni() {
  static const bool ok = active_isa() >= Isa::avx512 && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                         __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
  return ok;
}

}  // namespace

bool q_winograd_available() { return has_bw_vnni() && q_tile_wide_dpwssd(1) && q_store_kept_avx512(); }

void q_conv_winograd(const ConvShape& s, const void* x, bool x_signed, int32_t xq_zp, const uint32_t* u,
                     const QEpilogue& ep, void* y, ThreadPool* pool) {
  if (!q_winograd_available() || !q_winograd_shape_ok(s)) throw std::logic_error("q_conv_winograd: not for this shape or CPU");
  const Geom g(s);
  const int64_t ic = s.in_c, oc = s.out_c, KP = q_pairs(ic), otiles = q_tiles(oc), plane = s.out_h * s.out_w;
  const int64_t vstride = v_stride(ic), kcb = q_k_block(KP, kQKCWide);
  const uint8_t flip = x_signed ? 0x80 : 0;
  static const QStoreKeptFn store = q_store_kept_avx512();
  const size_t esize = ep.type == QType::U8 || ep.type == QType::S8 ? 1 : 4;
  const bool fast = !ep.fast_m.empty();  // 8-bit outputs with the store's float shortcut
  // The threads split the panels, a range of whole groups each (the 56x56 map's 14 panels: 7
  // and 7, not 8 and 6); with fewer than 2 panels a thread, they split the output channels too,
  // and each transforms the input of its panels itself.
  const int t = threads_for(pool, double(oc) * double(plane) * double(ic) * 4.0);
  const int64_t panel_parts = std::max<int64_t>(1, std::min<int64_t>(t, g.panels / 2));
  const int64_t co_parts = std::min<int64_t>(otiles, (t + panel_parts - 1) / panel_parts);
  const int64_t point_stride = kQWide * kQMR * kQNR;  // int32 per point in the products' buffer
  // Panels [P0, P1) (one group: at most kQWide) x output channel tiles [ct0, ct1) of one image.
  auto run_group = [&](const uint8_t* xn, char* yn, int64_t P0, int64_t P1, int64_t ct0, int64_t ct1) {
    const int64_t nv = P1 - P0;
    uint32_t* vg = reinterpret_cast<uint32_t*>(scratch_floats(kScratchA, size_t(kQWinogradPoints * nv * vstride * kQNR)));
    int32_t* mb = reinterpret_cast<int32_t*>(scratch_floats(kScratchC, size_t(kQWinogradPoints * point_stride)));
    alignas(64) int32_t ybuf[4 * 4 * kQMR * kQNR];
    for (int64_t P = P0; P < P1; ++P) input_transform(s, g, P, xn, ic, flip, uint8_t(xq_zp), vg, nv, P - P0);
    uint16_t keep[4][4][4];
    int64_t col_at[4][4][4];
    for (int64_t P = P0; P < P1; ++P)
      for (int a = 0; a < 4; ++a) store_masks(s, g, P, a, keep[P - P0][a], col_at[P - P0][a]);
    const QTileWideFn fn = q_tile_wide_dpwssd(int(nv));
    for (int64_t ct = ct0; ct < ct1; ++ct) {
      // The 36 points' products of output channels [6 ct, 6 ct + 6), then their transform.
      for (int64_t p = 0; p < kQWinogradPoints; ++p) {
        const uint32_t* up = u + (ct * kQWinogradPoints + p) * kQMR * KP;
        const uint32_t* next = ct + 1 < ct1 || p + 1 < kQWinogradPoints ? up + kQMR * KP : up;
        for (int64_t k0 = 0; k0 < KP; k0 += kcb) {
          const int64_t kc = std::min(kcb, KP - k0);
          const uint32_t* bs[kQWide];
          for (int64_t j = 0; j < nv; ++j) bs[j] = vg + ((p * nv + j) * vstride + k0) * kQNR;
          fn(kc, up + k0 * kQMR, bs, mb + p * point_stride, k0 > 0, k0 + kc < KP ? up + (k0 + kc) * kQMR : next);
        }
      }
      const int64_t rows = std::min(kQMR, oc - ct * kQMR);
      for (int64_t j = 0; j < nv; ++j) {
        for (int64_t m = 0; m < rows; ++m) output_transform(mb + j * kQMR * kQNR, point_stride, m, ybuf);
        for (int a = 0; a < 4; ++a) {
          char* yt = yn + size_t(ct * kQMR * plane) * esize;
          if (fast)  // (store_masks' keeps are runs from lane 0)
            store_rows_fast(ep, store, ybuf + a * 4 * kQMR * kQNR, rows, keep[j][a], col_at[j][a], ct * kQMR, yt, plane);
          else
            store(ep, ybuf + a * 4 * kQMR * kQNR, 0, 0, rows, 4, keep[j][a], col_at[j][a], ct * kQMR, yt, plane);
        }
      }
    }
  };
  for (int64_t n = 0; n < s.batch; ++n) {
    const uint8_t* xn = static_cast<const uint8_t*>(x) + n * ic * s.in_h * s.in_w;
    char* yn = static_cast<char*>(y) + size_t(n * oc * plane) * esize;
    parallel_for(pool, panel_parts * co_parts, [&](int64_t item) {
      int64_t Pa, Pb, ct0, ct1;
      split_range(g.panels, panel_parts, item / co_parts, Pa, Pb);
      split_range(otiles, co_parts, item % co_parts, ct0, ct1);
      const int64_t groups = (Pb - Pa + kQWide - 1) / kQWide;
      for (int64_t grp = 0; grp < groups; ++grp) {
        int64_t P0, P1;
        split_range(Pb - Pa, groups, grp, P0, P1);
        P0 += Pa;
        P1 += Pa;
        run_group(xn, yn, P0, P1, ct0, ct1);
      }
    });
  }
}

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
bool q_winograd_available() { return false; }
void q_conv_winograd(const ConvShape&, const void*, bool, int32_t, const uint32_t*, const QEpilogue&, void*,
                     ThreadPool*) {
  throw std::logic_error("q_conv_winograd: not for this CPU");
}
}  // namespace nxrt::cpu
#endif
