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

// A run of one tile row's tiles in a panel: tiles [tx0, tx0 + n) of tile row ty in lanes
// [lane0, lane0 + n); their source bytes lie in the panel's 128-byte table from byte0 (4 n + 2
// columns of x' a row).
struct Segment {
  int64_t ty, tx0, n, lane0, byte0;
};
struct PanelGeom {
  int count = 0;
  Segment seg[5];
  int64_t tiles() const {
    int64_t n = 0;
    for (int i = 0; i < count; ++i) n += seg[i].n;
    return n;
  }
};

// A panel of at most this many tiles takes the few-tile products (few_tile_products).
constexpr int64_t kFewTiles = 2;

// Where the tiles of tile rows [row0, row1) lie in their panels, in one of three layouts:
// - pitch (maps up to 8 tiles wide): whole tile rows at `pitch` lanes each (4 or 8), so a
//   pixel vector's 4 lanes never leave a tile row;
// - rows (9+ tiles wide): 16 tiles of one row a panel, per_row panels a row;
// - raster (4+ tiles wide): the tiles in row order, 16 a panel, a panel holding the end of one
//   tile row and the start of the next (at most 5 rows; a pixel vector at most 2).
// Each costs its panels; a last panel of at most kFewTiles tiles ~0.35 of a panel a tile (the
// few-tile products), and a raster panel 1.05 (its two to five runs of tiles: more loads in the
// input transform, two stores for a split pixel vector; 64@56, 7 rows of 14 tiles, 7 panels
// either way, 4% slower in raster order). The cheapest is taken: ResNet's 56x56 map on 1
// thread takes 13 raster panels instead of 14 rows (64@56 242 -> 232 us in a harness), its
// 28x28 map 3 and one tile instead of 4 panels of 2 rows. Threads take ranges of whole tile
// rows (a row shared by two cores' panels puts both on its output lines).
struct Geom {
  enum class Layout { pitch, rows, raster };
  int64_t tiles_h, tiles_w, row0, row1, pitch = 0, per_row = 0, panels = 0;
  Layout layout = Layout::pitch;
  double cost = 0;  // in full panels
  Geom(const ConvShape& s, int64_t first_row, int64_t end_row) : row0(first_row), row1(end_row) {
    tiles_h = (s.out_h + 3) / 4;
    tiles_w = (s.out_w + 3) / 4;
    if (row1 < 0) row1 = tiles_h;
    const int64_t rows = row1 - row0, tiles = rows * tiles_w;
    auto cost_of = [](int64_t full, int64_t last, double per) {  // full panels, then one of `last` tiles
      return per * double(full) + (last == 0 ? 0.0 : last <= kFewTiles ? 0.35 * double(last) : per);
    };
    if (tiles_w <= 8) {
      pitch = tiles_w <= 4 ? 4 : 8;
      const int64_t rp = 16 / pitch;
      panels = (rows + rp - 1) / rp;
      cost = cost_of(rows / rp, rows % rp * tiles_w, 1.0);
    } else {
      layout = Layout::rows;
      per_row = (tiles_w + 15) / 16;
      panels = rows * per_row;
      cost = double(panels);
    }
    if (tiles_w >= 4) {
      const double raster = cost_of(tiles / 16, tiles % 16, 1.05);
      if (raster < cost) {
        layout = Layout::raster;
        panels = (tiles + 15) / 16;
        cost = raster;
      }
    }
  }
  explicit Geom(const ConvShape& s) : Geom(s, 0, -1) {}
  // Tile rows a panel of this map holds whole (0: a row's own panels, or raster order).
  int64_t rows_per_panel() const { return layout == Layout::pitch ? 16 / pitch : 0; }
  PanelGeom panel(int64_t P) const {
    PanelGeom pg;
    if (layout == Layout::pitch) {
      const int64_t rows = 16 / pitch;
      for (int64_t r = 0; r < rows && row0 + P * rows + r < row1; ++r)
        pg.seg[pg.count++] = {row0 + P * rows + r, 0, tiles_w, r * pitch, r * (128 / rows)};
    } else if (layout == Layout::rows) {
      const int64_t tx0 = P % per_row * 16;
      pg.seg[pg.count++] = {row0 + P / per_row, tx0, std::min<int64_t>(16, tiles_w - tx0), 0, 0};
    } else {
      const int64_t t0 = row0 * tiles_w + P * 16, t1 = std::min(t0 + 16, row1 * tiles_w);
      int64_t byte = 0;
      for (int64_t t = t0; t < t1;) {
        const int64_t tx = t % tiles_w, n = std::min(tiles_w - tx, t1 - t);
        pg.seg[pg.count++] = {t / tiles_w, tx, n, t - t0, byte};
        byte += 4 * n + 2;
        t += n;
      }
    }
    return pg;
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
  const double wino = double(kQWinogradPoints) * rows * pairs * Geom(s).cost;
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
// (two zmm) of its segments' padded x' rows, each from its byte0, the padding x_zp'. Lane l (a
// tile) reads byte e(l) + k' for its column k' of the 6 (e(l) = byte0 + 4 t for the segment's
// t-th tile), the pair's first channel into byte 4l (int16 lane 2l) and its second into byte
// 4l + 2, the odd bytes zero: one vpermt2b a channel gives the pair's words as int16, and B^T
// then runs along k' and k on whole vectors.
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
  for (int k = 0; k < 6; ++k)
    for (int i = 0; i < pg.count; ++i) {
      const Segment& sg = pg.seg[i];
      const int64_t xr = 4 * sg.ty + k - s.pad_top, B = sg.byte0, E = B + 4 * sg.n + 2;
      if (xr < 0 || xr >= s.in_h) continue;
      for (int64_t b0 = B; b0 < E; b0 = (b0 / 64 + 1) * 64) {
        // Table bytes [b0, end) of this half hold the segment's columns b0 - B on.
        const int64_t end = std::min((b0 / 64 + 1) * 64, E);
        uint64_t mask = 0;
        for (int64_t byte = b0; byte < end; ++byte) {
          const int64_t xc = 4 * sg.tx0 - s.pad_left + byte - B;
          if (xc >= 0 && xc < s.in_w) mask |= 1ull << (byte % 64);
        }
        if (!mask) continue;
        SegmentLoad& l = ps.load[k][ps.loads[k]++];
        l.half = int(b0 / 64);
        l.off = xr * s.in_w + 4 * sg.tx0 - s.pad_left - B + (b0 / 64) * 64;  // byte 0 of the half
        l.mask = mask;
      }
    }
  for (int kk = 0; kk < 6; ++kk) {
    for (int l = 0; l < 64; ++l) ps.idx[kk][l] = 0;  // idle lanes read byte 0
    for (int i = 0; i < pg.count; ++i) {
      const Segment& sg = pg.seg[i];
      for (int64_t j = 0; j < sg.n; ++j) {
        const int64_t l = sg.lane0 + j;
        ps.idx[kk][4 * l] = ps.idx[kk][4 * l + 2] = uint8_t(sg.byte0 + 4 * j + kk);
      }
    }
  }
  return ps;
}

// The lines from one (point, panel) B slice of V to the next: an odd count, so the 36 x nv
// slices the input transform writes side by side do not share an L1 set (KP lines each, a
// multiple of 4 KB for 64 or 128 input channels: 64@56's transform 1.9x slower).
int64_t v_stride(int64_t ic) { return q_pairs(ic) | 1; }

// V of panel pg for input channels [0, ic) of image x (plane in_h x in_w, uint8; flip 0x80 for
// int8) into vg's panel `slot` of nv: word (point p, pair q, lane l) at ((p * nv + slot) *
// v_stride(ic) + q) * 16 + l.
NXRT_QW void input_transform(const ConvShape& s, const PanelGeom& pg, const uint8_t* x, int64_t ic, uint8_t flip,
                             uint8_t zp, uint32_t* vg, int64_t nv, int64_t slot) {
  const int64_t vstride = v_stride(ic);
  const PanelSource ps = panel_source(s, pg);
  const int64_t KP = q_pairs(ic), plane = s.in_h * s.in_w;
  const __m512i zpv = _mm512_set1_epi8(char(zp ^ flip)), flipv = _mm512_set1_epi8(char(flip));
  __m512i idx[6];
#pragma GCC unroll 6
  for (int k = 0; k < 6; ++k) idx[k] = _mm512_load_si512(ps.idx[k]);
  const __mmask64 first = 0x1111111111111111ull, second = 0x4444444444444444ull;
  alignas(64) __m512i h[6][6];  // after B^T along the columns: [input row k][j]
  // The rows of x the panel reads: [xr0, xr1) x columns [xc0, xc1) of each channel.
  const Segment &top = pg.seg[0], &bottom = pg.seg[pg.count - 1];
  int64_t xc0 = s.in_w, xc1 = 0;
  for (int i = 0; i < pg.count; ++i) {
    xc0 = std::min(xc0, std::max<int64_t>(0, 4 * pg.seg[i].tx0 - s.pad_left));
    xc1 = std::max(xc1, std::min<int64_t>(s.in_w, 4 * (pg.seg[i].tx0 + pg.seg[i].n) + 2 - s.pad_left));
  }
  const int64_t xr0 = std::max<int64_t>(0, 4 * top.ty - s.pad_top);
  const int64_t xr1 = std::min<int64_t>(s.in_h, 4 * bottom.ty + 6 - s.pad_top);
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

// The products of a panel of few tiles (tiles <= kFewTiles) with one A tile of U' (kQMR rows,
// [KP][kQMR] words at a): the panel's 16 lanes would cost a full panel's instructions for one
// or two tiles (ResNet's 28x28 map: 49 tiles, 3 panels and one tile). Here the output channels
// ride the lanes instead: per two pairs (q, q + 1), the 12 words of U' rows 0-5 of both (lanes
// 0-5 and 6-11) against each tile's two words of V in the same lanes (one vpermd of vc, the
// panel's V compacted to [KP][tiles] words: the full slices are 16 lanes a row, 1-2 used);
// lanes 0-5 plus 6-11 are its row sums, written to lane l of rows 0-5 at m (kQNR words a row).
template <int kTiles>
NXRT_QW void few_tile_products_n(int64_t KP, const uint32_t* a, const uint32_t* vc, int32_t* m) {
  // Four sums a tile, one per couple of pairs in a block of 8 (one chain of vpdpwssd would wait
  // on its latency each step), all in registers: tile and chain are compile-time indices.
  __m512i acc[kTiles][4], idx[kTiles][4];
#pragma GCC unroll 2
  for (int l = 0; l < kTiles; ++l)
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      acc[l][c] = _mm512_setzero_si512();
      const int w0 = 2 * c * kTiles + l, w1 = w0 + kTiles;  // pair 2c's word, pair 2c + 1's
      idx[l][c] = _mm512_setr_epi32(w0, w0, w0, w0, w0, w0, w1, w1, w1, w1, w1, w1, w0, w0, w0, w0);
    }
  for (int64_t q = 0; q < KP; q += 8) {
    const int64_t n = std::min<int64_t>(8, KP - q);  // pairs in this block
    const __m512i v = _mm512_maskz_loadu_epi32(__mmask16((1u << (n * kTiles)) - 1u), vc + q * kTiles);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      if (2 * c >= n) break;
      const __mmask16 lanes = 2 * c + 1 < n ? 0x0fff : 0x003f;  // an odd last pair: lanes 0-5 alone
      const __m512i u = _mm512_maskz_loadu_epi32(lanes, a + (q + 2 * c) * kQMR);
#pragma GCC unroll 2
      for (int l = 0; l < kTiles; ++l)
        acc[l][c] = _mm512_dpwssd_epi32(acc[l][c], _mm512_permutexvar_epi32(idx[l][c], v), u);
    }
  }
  const __m512i up6 = _mm512_setr_epi32(6, 7, 8, 9, 10, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
#pragma GCC unroll 2
  for (int l = 0; l < kTiles; ++l) {
    const __m512i t = _mm512_add_epi32(_mm512_add_epi32(acc[l][0], acc[l][1]), _mm512_add_epi32(acc[l][2], acc[l][3]));
    alignas(64) int32_t sum[16];
    _mm512_store_si512(sum, _mm512_add_epi32(t, _mm512_permutexvar_epi32(up6, t)));
    for (int64_t r = 0; r < kQMR; ++r) m[r * kQNR + l] = sum[r];
  }
}

NXRT_QW void few_tile_products(int64_t KP, const uint32_t* a, const uint32_t* vc, int64_t tiles, int32_t* m) {
  static_assert(kFewTiles == 2);
  if (tiles == 1) few_tile_products_n<1>(KP, a, vc, m);
  else few_tile_products_n<2>(KP, a, vc, m);
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

// Where output row a of a panel's tiles goes: pixel vector v holds lanes 4v .. 4v + 3, 16
// pixels, in at most two pieces (in raster order the end of one tile row and the start of the
// next). Piece i of vector v: its pixel lanes keep[i][v] and the output offset of the vector's
// lane 0 for it, base[i][v] (lane p goes to base + p); keep 0 where there is none.
struct RowPieces {
  uint16_t keep[2][4];
  int64_t base[2][4];
  bool split() const { return keep[1][0] | keep[1][1] | keep[1][2] | keep[1][3]; }  // any piece 1
  // The kept store's form (q_store_kept_avx512: the first kept lane to col_at) of piece i.
  void col_at(int i, int64_t* out) const {
    for (int v = 0; v < 4; ++v) out[v] = keep[i][v] ? base[i][v] + __builtin_ctz(keep[i][v]) : 0;
  }
};

RowPieces row_pieces(const ConvShape& s, const PanelGeom& pg, int a) {
  RowPieces rp{};
  int owner[4] = {-1, -1, -1, -1};  // the segment holding piece 0 of vector v
  for (int i = 0; i < pg.count; ++i) {
    const Segment& sg = pg.seg[i];
    const int64_t orow = 4 * sg.ty + a;
    if (orow >= s.out_h) continue;
    for (int64_t j = 0; j < sg.n; ++j) {
      const int64_t l = sg.lane0 + j, v = l / 4, cols = std::min<int64_t>(4, s.out_w - 4 * (sg.tx0 + j));
      if (cols <= 0) continue;
      if (owner[v] < 0) owner[v] = i;
      const int piece = owner[v] == i ? 0 : 1;
      rp.keep[piece][v] = uint16_t(rp.keep[piece][v] | ((1u << cols) - 1u) << (4 * (l % 4)));
      rp.base[piece][v] = orow * s.out_w + 4 * (sg.tx0 - sg.lane0) + 16 * v;
    }
  }
  return rp;
}

// The QOutput store's float shortcut (q_fast_path, as conv_int8_nhwc.cpp's store_tile_fast)
// for one output row of a channel tile: channels ch0 + r, r in [0, rows), at acc + (v * kQMR +
// r) * kQNR for pixel vector v, whose pieces' lanes go to y + r * plane + the piece's base. A
// vector with a kept lane too near a half-integer goes through `exact` (the kept store for its
// pieces alone). The kept store, generic in its kinds and masks, took 15% of a 64@56 layer.
NXRT_QW void store_rows_fast(const QEpilogue& e, QStoreKeptFn exact, const int32_t* acc, int64_t rows,
                             const RowPieces& rp, int64_t ch0, char* y, int64_t plane) {
  const QFastConsts k = q_fast_consts(e);
  for (int64_t r = 0; r < rows; ++r) {
    const size_t c = size_t(ch0 + r);
    const __m512i bias = e.bias.empty() ? _mm512_setzero_si512() : _mm512_set1_epi32(e.bias[c]);
    const __m512 fm = _mm512_set1_ps(e.fast_m[c]), fb = _mm512_set1_ps(e.fast_b[c]);
    const __m512 lim = _mm512_set1_ps(e.fast_lim[c]);
    char* yr = y + r * plane;
    for (int v = 0; v < 4; ++v) {
      const uint16_t k0 = rp.keep[0][v], k1 = rp.keep[1][v];
      if (!k0) continue;  // (piece 1 only beside a piece 0)
      __m128i out;
      const __m512i sum = _mm512_add_epi32(_mm512_loadu_si512(acc + (v * kQMR + r) * kQNR), bias);  // wraps
      if (q_fast_bytes(k, sum, fm, fb, lim, __mmask16(k0 | k1), out)) [[likely]] {
        _mm_mask_storeu_epi8(yr + rp.base[0][v], __mmask16(k0), out);
        if (k1) _mm_mask_storeu_epi8(yr + rp.base[1][v], __mmask16(k1), out);
        continue;
      }
      for (int i = 0; i < 2 && rp.keep[i][v]; ++i) {
        const int64_t at = rp.base[i][v] + __builtin_ctz(rp.keep[i][v]);
        exact(e, acc + v * kQMR * kQNR, 0, r, r + 1, 1, &rp.keep[i][v], &at, ch0 + r, yr, plane);
      }
    }
  }
}

bool has_bw_vnni() {
  static const bool ok = avx512bw_active() && cpu_info().avx512vnni && cpu_info().avx512vbmi;
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
  // The threads split the tile rows (whole panels of whole rows where a panel holds several),
  // each its own panels over them (the 56x56 map's 14 rows: 7 and 7, 7 panels each); with fewer
  // than 2 panels a thread, they split the output channels too, and each transforms the input
  // of its panels itself.
  const int t = threads_for(pool, double(oc) * double(plane) * double(ic) * 4.0);
  const int64_t panel_parts = std::max<int64_t>(1, std::min<int64_t>({int64_t(t), g.panels / 2, g.tiles_h}));
  const int64_t co_parts = std::min<int64_t>(otiles, (t + panel_parts - 1) / panel_parts);
  const int64_t point_stride = kQWide * kQMR * kQNR;  // int32 per point in the products' buffer
  // Panels [P0, P1) of pg (one group: at most kQWide) x output channel tiles [ct0, ct1) of one image.
  auto run_group = [&](const Geom& pg, const uint8_t* xn, char* yn, int64_t P0, int64_t P1, int64_t ct0,
                       int64_t ct1) {
    const int64_t nv = P1 - P0;
    uint32_t* vg = reinterpret_cast<uint32_t*>(scratch_floats(kScratchA, size_t(kQWinogradPoints * nv * vstride * kQNR)));
    int32_t* mb = reinterpret_cast<int32_t*>(scratch_floats(kScratchC, size_t(kQWinogradPoints * point_stride)));
    alignas(64) int32_t ybuf[4 * 4 * kQMR * kQNR];
    PanelGeom panels[kQWide];
    RowPieces pieces[kQWide][4];
    for (int64_t j = 0; j < nv; ++j) {
      panels[j] = pg.panel(P0 + j);
      input_transform(s, panels[j], xn, ic, flip, uint8_t(xq_zp), vg, nv, j);
      for (int a = 0; a < 4; ++a) pieces[j][a] = row_pieces(s, panels[j], a);
    }
    // The group's last panel by the few-tile products where it holds at most kFewTiles tiles,
    // its V compacted to [point][pair][tile] words.
    const int64_t last_tiles = panels[nv - 1].tiles(), few = last_tiles <= kFewTiles ? last_tiles : 0;
    const int64_t full = few ? nv - 1 : nv;
    uint32_t* vc = nullptr;
    if (few) {
      vc = reinterpret_cast<uint32_t*>(scratch_floats(kScratchB, size_t(kQWinogradPoints * KP * few)));
      for (int64_t p = 0; p < kQWinogradPoints; ++p)
        for (int64_t q = 0; q < KP; ++q)
          for (int64_t l = 0; l < few; ++l)
            vc[(p * KP + q) * few + l] = vg[((p * nv + full) * vstride + q) * kQNR + l];
    }
    const QTileWideFn fn = full ? q_tile_wide_dpwssd(int(full)) : nullptr;
    for (int64_t ct = ct0; ct < ct1; ++ct) {
      // The 36 points' products of output channels [6 ct, 6 ct + 6), then their transform.
      for (int64_t p = 0; p < kQWinogradPoints; ++p) {
        const uint32_t* up = u + (ct * kQWinogradPoints + p) * kQMR * KP;
        const uint32_t* next = ct + 1 < ct1 || p + 1 < kQWinogradPoints ? up + kQMR * KP : up;
        for (int64_t k0 = 0; full && k0 < KP; k0 += kcb) {
          const int64_t kc = std::min(kcb, KP - k0);
          const uint32_t* bs[kQWide];
          for (int64_t j = 0; j < full; ++j) bs[j] = vg + ((p * nv + j) * vstride + k0) * kQNR;
          fn(kc, up + k0 * kQMR, bs, mb + p * point_stride, k0 > 0, k0 + kc < KP ? up + (k0 + kc) * kQMR : next);
        }
        if (few)
          few_tile_products(KP, up, vc + p * KP * few, few, mb + p * point_stride + full * kQMR * kQNR);
      }
      const int64_t rows = std::min(kQMR, oc - ct * kQMR);
      for (int64_t j = 0; j < nv; ++j) {
        for (int64_t m = 0; m < rows; ++m) output_transform(mb + j * kQMR * kQNR, point_stride, m, ybuf);
        for (int a = 0; a < 4; ++a) {
          char* yt = yn + size_t(ct * kQMR * plane) * esize;
          const RowPieces& rp = pieces[j][a];
          if (fast) {
            store_rows_fast(ep, store, ybuf + a * 4 * kQMR * kQNR, rows, rp, ct * kQMR, yt, plane);
            continue;
          }
          for (int i = 0; i < (rp.split() ? 2 : 1); ++i) {
            int64_t col_at[4];
            rp.col_at(i, col_at);
            store(ep, ybuf + a * 4 * kQMR * kQNR, 0, 0, rows, 4, rp.keep[i], col_at, ct * kQMR, yt, plane);
          }
        }
      }
    }
  };
  for (int64_t n = 0; n < s.batch; ++n) {
    const uint8_t* xn = static_cast<const uint8_t*>(x) + n * ic * s.in_h * s.in_w;
    char* yn = static_cast<char*>(y) + size_t(n * oc * plane) * esize;
    parallel_for(pool, panel_parts * co_parts, [&](int64_t item) {
      int64_t r0, r1, ct0, ct1;
      if (const int64_t rows = g.rows_per_panel()) {
        split_range(g.panels, panel_parts, item / co_parts, r0, r1);
        r0 *= rows;
        r1 = std::min(r1 * rows, g.tiles_h);
      } else {
        split_range(g.tiles_h, panel_parts, item / co_parts, r0, r1);
      }
      split_range(otiles, co_parts, item % co_parts, ct0, ct1);
      const Geom pg(s, r0, r1);
      const int64_t groups = (pg.panels + kQWide - 1) / kQWide;
      for (int64_t grp = 0; grp < groups; ++grp) {
        int64_t P0, P1;
        split_range(pg.panels, groups, grp, P0, P1);
        run_group(pg, xn, yn, P0, P1, ct0, ct1);
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
