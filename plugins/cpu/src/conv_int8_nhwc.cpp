// q_conv_nhwc (conv_int8_nhwc.hpp): the weights' pack in C++; the channels-last copy, the
// vpdpbusd tiles and the transposing store in AVX-512 (target attributes).
#include "conv_int8_nhwc.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "cpu_info.hpp"
#include "q_store_fast_avx512.hpp"
#include "scratch.hpp"
#include "transpose_bytes_avx512.hpp"

namespace nxrt::cpu {

bool q_nhwc_shape_ok(const ConvShape& s) {
  const bool channels = s.in_c % 16 == 0, rows = s.in_c == 3 && s.dil_w == 1;
  return s.group == 1 && (channels || rows) && s.out_c % 16 == 0 && s.in_c > 0 && s.out_c > 0 && s.pad_top >= 0 &&
         s.pad_left >= 0 && s.out_h > 0 && s.out_w > 0 && s.k_h > 0 && s.k_w > 0;
}

bool q_nhwc_pays(const ConvShape& s) {
  if (!q_nhwc_shape_ok(s)) return false;
  if (s.in_c == 3) return s.k_h * s.k_w > 1;  // the stems: their im2col pack was a fifth of them
  // Not 1x1: ResNet's downsamples with their sampled pixels copied dense ran 10-30% faster on
  // 1 thread but 1.3-2x slower on 2 in cnn_int8 (their x left split between the cores by the
  // QDQ Add before them), a copy shared by the threads no better.
  return s.k_h * s.k_w > 1 && (s.stride_h > 1 || s.stride_w > 1 || s.out_h * s.out_w <= 64);
}

NhwcK q_nhwc_k(int64_t ic, int64_t k_h, int64_t k_w) {
  if (ic % 16 == 0) return {k_h * k_w, ic / 4, false};
  return {k_h, (k_w * ic + 3) / 4, true};
}

void q_nhwc_pack(const int8_t* w, int64_t oc, int64_t ic, int64_t k_h, int64_t k_w, uint32_t* dst) {
  const NhwcK k = q_nhwc_k(ic, k_h, k_w);
  const int64_t taps = k_h * k_w;
  // Byte i of quad q at step t: weight (c, kh, kw) of the output channel, or 0 past the row.
  auto weight = [&](int64_t o, int64_t t, int64_t q, int i) -> uint8_t {
    if (!k.rows) return uint8_t(w[(o * ic + 4 * q + i) * taps + t]);
    const int64_t j = 4 * q + i;
    if (j >= k_w * ic) return 0;
    return uint8_t(w[((o * ic + j % ic) * k_h + t) * k_w + j / ic]);
  };
  for (int64_t o0 = 0; o0 < oc; o0 += 64) {
    const int64_t width = std::min<int64_t>(64, oc - o0);
    uint32_t* d = dst + o0 * k.steps * k.quads;
    for (int64_t t = 0; t < k.steps; ++t)
      for (int64_t q = 0; q < k.quads; ++q)
        for (int64_t l = 0; l < width; ++l) {
          uint32_t word = 0;
          for (int i = 0; i < 4; ++i) word |= uint32_t(weight(o0 + l, t, q, i)) << (8 * i);
          d[(t * k.quads + q) * width + l] = word;
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

#define NXRT_QN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

constexpr int kRows = 6;      // pixels a tile
constexpr int kChunk = 48;    // pixels a store: 8 tiles, 3 transposes of 16
constexpr int kTileInts = 4 * kRows * 16;  // a tile's sums: [4 vectors][6 rows][16 lanes]

// Whether some tap reads padded row r (a strided conv whose kernel is shorter than its
// stride skips rows: the copies leave those as they are).
bool row_read(const ConvShape& s, int64_t r) {
  for (int64_t kh = 0; kh < s.k_h; ++kh) {
    const int64_t o = r - kh * s.dil_h;
    if (o >= 0 && o % s.stride_h == 0 && o / s.stride_h < s.out_h) return true;
  }
  return false;
}

// Padded rows [r_lo, r_hi) of image xn (C planes of in_h x in_w bytes, ^ flip) channels-last:
// dst[((r - r_lo) * Wp + col) * C + c], x_zp' outside the input; only the rows some tap reads.
NXRT_QN void copy_nhwc(const ConvShape& s, const uint8_t* xn, uint8_t flip, uint8_t zp, int64_t r_lo, int64_t r_hi,
                       int64_t Wp, uint8_t* dst) {
  const int64_t C = s.in_c, in_plane = s.in_h * s.in_w, row_bytes = Wp * C;
  const __m512i vflip = _mm512_set1_epi8(char(flip));
  for (int64_t r = r_lo; r < r_hi; ++r) {
    if (!row_read(s, r)) continue;
    uint8_t* dr = dst + (r - r_lo) * row_bytes;
    const int64_t ih = r - s.pad_top;
    if (ih < 0 || ih >= s.in_h) {
      std::fill(dr, dr + row_bytes, zp);
      continue;
    }
    std::fill(dr, dr + s.pad_left * C, zp);
    std::fill(dr + (s.pad_left + s.in_w) * C, dr + row_bytes, zp);
    for (int64_t w0 = 0; w0 < s.in_w; w0 += 64) {
      const int64_t n = std::min<int64_t>(64, s.in_w - w0);
      const __mmask64 m = n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1;
      for (int64_t c0 = 0; c0 < C; c0 += 16) {
        __m512i v[16];
        const uint8_t* src = xn + c0 * in_plane + ih * s.in_w + w0;
        for (int i = 0; i < 16; ++i) v[i] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src + i * in_plane), vflip);
        avx512::transpose16x16_lanes(v);  // lane L of v[k]: pixel w0 + 16 L + k, channels c0 .. c0 + 15
        uint8_t* d = dr + (s.pad_left + w0) * C + c0;
        for (int k = 0; k < 16; ++k) {
          if (k < n) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + k * C), _mm512_extracti32x4_epi32(v[k], 0));
          if (16 + k < n) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + (16 + k) * C), _mm512_extracti32x4_epi32(v[k], 1));
          if (32 + k < n) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + (32 + k) * C), _mm512_extracti32x4_epi32(v[k], 2));
          if (48 + k < n) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + (48 + k) * C), _mm512_extracti32x4_epi32(v[k], 3));
        }
      }
    }
  }
}

// The same for 3 channels (the stems' row mode): dst[((r - r_lo) * Wp + col) * 3 + c], 64
// pixels at a time by byte permutes (VBMI) of the three planes' rows.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi"))) void copy_nhwc3(
    const ConvShape& s, const uint8_t* xn, uint8_t flip, uint8_t zp, int64_t r_lo, int64_t r_hi, int64_t Wp,
    uint8_t* dst) {
  const int64_t in_plane = s.in_h * s.in_w, row_bytes = Wp * 3;
  const __m512i vflip = _mm512_set1_epi8(char(flip));
  // Output vector k, byte j: pixel (64 k + j) / 3 of plane (64 k + j) % 3; planes 0 and 1 by
  // one two-source permute, plane 2 by a one-source permute blended in.
  alignas(64) uint8_t idx01[3][64], idx2[3][64];
  __mmask64 from2[3] = {};
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 64; ++j) {
      const int g = 64 * k + j, px = g / 3, c = g % 3;
      idx01[k][j] = uint8_t(c == 1 ? 64 + px : px);
      idx2[k][j] = uint8_t(px);
      if (c == 2) from2[k] |= __mmask64(1) << j;
    }
  for (int64_t r = r_lo; r < r_hi; ++r) {
    if (!row_read(s, r)) continue;
    uint8_t* dr = dst + (r - r_lo) * row_bytes;
    const int64_t ih = r - s.pad_top;
    std::fill(dr, dr + row_bytes, zp);
    if (ih < 0 || ih >= s.in_h) continue;
    for (int64_t w0 = 0; w0 < s.in_w; w0 += 64) {
      const int64_t n = std::min<int64_t>(64, s.in_w - w0);
      const __mmask64 m = n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1;
      const uint8_t* src = xn + ih * s.in_w + w0;
      const __m512i a = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src), vflip);
      const __m512i b = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src + in_plane), vflip);
      const __m512i c = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src + 2 * in_plane), vflip);
      uint8_t* d = dr + (s.pad_left + w0) * 3;
      for (int k = 0; k < 3; ++k) {
        const int64_t bytes = std::clamp<int64_t>(3 * n - 64 * k, 0, 64);
        if (bytes == 0) break;
        const __m512i v = _mm512_mask_blend_epi8(
            from2[k], _mm512_permutex2var_epi8(a, _mm512_load_si512(idx01[k]), b),
            _mm512_permutexvar_epi8(_mm512_load_si512(idx2[k]), c));
        _mm512_mask_storeu_epi8(d + 64 * k, bytes >= 64 ? ~__mmask64(0) : (__mmask64(1) << bytes) - 1, v);
      }
    }
  }
}

// R pixels (their words at px[r] + tap offset + 4 q) x NV vectors of 16 output channels over
// every tap and quad; the sums to acc[(j * kRows + r) * 16 + lane]. Meanwhile the 64-byte
// lines [pf, pf + 64 pf_lines) are fetched to L2, one a quad step: the next block's weights,
// which come from memory in a model (a 512-channel layer's 2.4 MB; on demand they cost the
// 7x7 layers what the lanes gained).
template <int R, int NV>
NXRT_QN void tile(const uint8_t* const* px, const int64_t* offs, int64_t steps, const uint32_t* w, int32_t* acc,
                  const char* pf, int64_t pf_lines) {
  __m512i c[R][NV];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) c[r][j] = _mm512_setzero_si512();
  const uint8_t* p[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) p[r] = px[r];
  for (int64_t k = 0; k < steps; ++k) {
    if (pf_lines > 0) {
      _mm_prefetch(pf, _MM_HINT_T1);
      pf += 64;
      --pf_lines;
    }
    const int64_t o = offs[k];
    __m512i wv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) wv[j] = _mm512_loadu_si512(w + 16 * j);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m512i xb = _mm512_set1_epi32(*reinterpret_cast<const int32_t*>(p[r] + o));
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) c[r][j] = _mm512_dpbusd_epi32(c[r][j], xb, wv[j]);
    }
    w += 16 * NV;
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) _mm512_storeu_si512(acc + (j * kRows + r) * 16, c[r][j]);
}

using TileFn = void (*)(const uint8_t* const*, const int64_t*, int64_t, const uint32_t*, int32_t*, const char*, int64_t);

template <int NV>
TileFn tile_for_rows(int rows) {
  switch (rows) {
    case 1: return &tile<1, NV>;
    case 2: return &tile<2, NV>;
    case 3: return &tile<3, NV>;
    case 4: return &tile<4, NV>;
    case 5: return &tile<5, NV>;
    default: return &tile<6, NV>;
  }
}
TileFn tile_for(int rows, int nv) {
  switch (nv) {
    case 1: return tile_for_rows<1>(rows);
    case 2: return tile_for_rows<2>(rows);
    case 3: return tile_for_rows<3>(rows);
    default: return tile_for_rows<4>(rows);
  }
}

// The QOutput store's float shortcut (q_fast_path, gemm_int8_avx512.cpp) for one tile: rows
// [0, rows) of sums ([nv][kRows][16], channels ch0 + 16 j + lane) to bytes (a row a pixel,
// `pitch` apart), the same steps as the store's; a vector with a lane too near a half-integer goes
// through `exact` (the store itself, which takes the exact steps there). Why not the store
// for all: called per 16 channels and 48 pixels, its generic loop took 17% of a 64 -> 128
// stride-2 layer (harness), twice the tiles' share of the store elsewhere.
NXRT_QN void store_tile_fast(const QEpilogue& e, QStorePanelsFn exact, const int32_t* sums, int rows, int nv,
                             int64_t ch0, uint8_t* bytes, int64_t pitch) {
  const QFastConsts k = q_fast_consts(e);
  for (int j = 0; j < nv; ++j) {
    const int64_t c = ch0 + 16 * j;
    const __m512i bias = e.bias.empty() ? _mm512_setzero_si512() : _mm512_loadu_si512(e.bias.data() + c);
    const __m512 fm = _mm512_loadu_ps(e.fast_m.data() + c), fb = _mm512_loadu_ps(e.fast_b.data() + c);
    const __m512 lim = _mm512_loadu_ps(e.fast_lim.data() + c);
    for (int r = 0; r < rows; ++r) {
      __m128i out;
      const __m512i v = _mm512_add_epi32(_mm512_loadu_si512(sums + (j * kRows + r) * 16), bias);  // wraps
      if (q_fast_bytes(k, v, fm, fb, lim, 0xffff, out)) [[likely]]
        _mm_storeu_si128(reinterpret_cast<__m128i*>(bytes + r * pitch + 16 * j), out);
      else
        exact(e, sums + j * kRows * 16, kTileInts, r, r + 1, 1, 16, false, c, bytes + r * pitch + 16 * j, pitch);
    }
  }
}

// bytes [n <= kChunk pixels][64] (nv * 16 channels used) to y's planes: channel c's pixels at
// y + c * plane, 16 pixels a transpose.
NXRT_QN void store_transposed(const uint8_t* bytes, int64_t n, int nv, char* y, int64_t plane) {
  for (int64_t g = 0; g < n; g += 16)
    avx512::store_pixels_transposed(bytes + g * 64, 64, std::min<int64_t>(16, n - g), nv, y + g, plane);
}

bool has_isa() {
  static const bool ok = avx512bw_active() && cpu_info().avx512vnni;
  return ok;
}

}  // namespace

bool q_nhwc_available() { return has_isa() && q_store_panels_avx512(); }
bool q_nhwc_runs(const ConvShape& s) {
  // The row mode's copy permutes bytes (VBMI).
  return q_nhwc_available() && q_nhwc_shape_ok(s) && (cpu_info().avx512vbmi || s.in_c % 16 == 0);
}

void q_conv_nhwc(const ConvShape& s, const void* x, bool x_signed, int32_t xq_zp, const uint32_t* w,
                 const QEpilogue& ep, void* y, bool y_channels_last, ThreadPool* pool) {
  if (!q_nhwc_runs(s) || (ep.type != QType::U8 && ep.type != QType::S8))
    throw std::logic_error("q_conv_nhwc: not for this shape, output or CPU");
  static const QStorePanelsFn store = q_store_panels_avx512();
  const int64_t ic = s.in_c, oc = s.out_c, plane = s.out_h * s.out_w;
  const NhwcK k = q_nhwc_k(ic, s.k_h, s.k_w);
  const int64_t KQ = k.quads, taps = k.steps;
  const int64_t Wp = s.padded_w(), blocks = (oc + 63) / 64, in_plane = s.in_h * s.in_w;
  const uint8_t flip = x_signed ? 0x80 : 0;
  const bool fast = !ep.fast_m.empty();
  // Rows of the padded input output rows [oh0, oh1) read.
  auto rows_for = [&](int64_t oh0, int64_t oh1, int64_t& r_lo, int64_t& r_hi) {
    r_lo = oh0 * s.stride_h;
    r_hi = (oh1 - 1) * s.stride_h + (s.k_h - 1) * s.dil_h + 1;
  };
  // The threads split the pixels (each copies the input rows its pixels read and reads all
  // the weights) unless the weights pass 512 KB, then the output channel blocks (each copies
  // the whole input). In cnn_int8 on 2 threads, where the layer before split x's channels
  // between the cores: 64 -> 128 @56 s2 (73 KB of weights) 130-140 us by blocks, 102-104 by
  // pixels; 128 -> 256 @28 s2 (295 KB) 111-123 / 101-107; 256 -> 512 @14 s2 (1.2 MB) 97-107 /
  // 110-117; 512 @7 (2.4 MB) 164-176 / 196-209.
  const int t = threads_for(pool, double(oc) * double(plane) * double(ic * taps));
  const bool by_blocks = oc * taps * ic > (int64_t(1) << 19) && blocks >= t;
  const int64_t pieces = t <= 1 ? 1 : by_blocks ? std::min<int64_t>(blocks, t) : std::min<int64_t>(plane, t);
  // Each quad step's byte offset from a pixel's word: step t's tap (a kernel position, or a
  // kernel row whose k_w * 3 bytes lie together) plus 4 q; one loop over all of them.
  std::vector<int64_t> offs(size_t(taps * KQ));
  for (int64_t kh = 0, step = 0; kh < s.k_h; ++kh)
    for (int64_t kw = 0; kw < (k.rows ? 1 : s.k_w); ++kw, ++step)
      for (int64_t q = 0; q < KQ; ++q) offs[size_t(step * KQ + q)] = (kh * s.dil_h * Wp + kw * s.dil_w) * ic + 4 * q;
  for (int64_t n = 0; n < s.batch; ++n) {
    const uint8_t* xn = static_cast<const uint8_t*>(x) + n * ic * in_plane;
    char* yn = static_cast<char*>(y) + n * oc * plane;
    auto piece = [&](int64_t i) {
      int64_t p_begin = 0, p_end = plane, b0 = 0, b1 = blocks;
      if (pieces > 1) {
        if (by_blocks) split_range(blocks, pieces, i, b0, b1);
        else split_range(plane, pieces, i, p_begin, p_end);
      }
      if (p_begin == p_end || b0 == b1) return;
      int64_t r_lo, r_hi;
      rows_for(p_begin / s.out_w, (p_end - 1) / s.out_w + 1, r_lo, r_hi);
      // 64 bytes of slack: a row step's last quad reads up to 3 bytes past its row (weights 0).
      const int64_t copy_bytes = (r_hi - r_lo) * Wp * ic;
      uint8_t* copy = reinterpret_cast<uint8_t*>(scratch_floats(kScratchA, size_t((copy_bytes + 64) / 4)));
      std::fill(copy + copy_bytes, copy + copy_bytes + 64, uint8_t(xq_zp));
      if (k.rows) copy_nhwc3(s, xn, flip, uint8_t(xq_zp), r_lo, r_hi, Wp, copy);
      else copy_nhwc(s, xn, flip, uint8_t(xq_zp), r_lo, r_hi, Wp, copy);
      int32_t* sums = reinterpret_cast<int32_t*>(scratch_floats(kScratchC, size_t(kChunk / kRows * kTileInts)));
      uint8_t* bytes = reinterpret_cast<uint8_t*>(scratch_floats(kScratchB, size_t(kChunk * 64 / 4)));
      // The piece's pixels in tiles of 6 and 5 (49: four of 6 and five of 5, not eight of 6 and
      // a lone pixel, whose tile ran at half the rate: 1% of cnn_int8 in perf).
      const int64_t cnt = p_end - p_begin, tiles = (cnt + kRows - 1) / kRows;
      auto tile_start = [&](int64_t tile) { return tile * (cnt / tiles) + std::min(tile, cnt % tiles); };
      for (int64_t b = b0; b < b1; ++b) {
        const int nv = int(std::min<int64_t>(4, (oc - 64 * b) / 16));
        const uint32_t* wb = w + 64 * b * taps * KQ;
        // The next block's weights, fetched a share a tile.
        const int64_t next_lines = b + 1 < b1 ? std::min<int64_t>(64, oc - 64 * (b + 1)) * taps * KQ / 16 : 0;
        const char* next = reinterpret_cast<const char*>(wb + 64 * taps * KQ);
        for (int64_t g0 = 0; g0 < tiles; g0 += kChunk / kRows) {
          const int64_t g1 = std::min(tiles, g0 + kChunk / kRows);
          const int64_t c0 = p_begin + tile_start(g0), cn = tile_start(g1) - tile_start(g0);
          for (int64_t ti = g0; ti < g1; ++ti) {
            const int64_t t0 = tile_start(ti) - tile_start(g0);
            const int64_t l0 = next_lines * ti / tiles, l1 = next_lines * (ti + 1) / tiles;
            const int rows = int(tile_start(ti + 1) - tile_start(ti));
            const uint8_t* px[kRows];
            int64_t oh = (c0 + t0) / s.out_w, ow = (c0 + t0) % s.out_w;
            for (int r = 0; r < rows; ++r) {
              px[r] = copy + ((oh * s.stride_h - r_lo) * Wp + ow * s.stride_w) * ic;
              if (++ow == s.out_w) {
                ow = 0;
                ++oh;
              }
            }
            int32_t* ts = sums + (ti - g0) * kTileInts;
            tile_for(rows, nv)(px, offs.data(), taps * KQ, wb, ts, next + 64 * l0, l1 - l0);
            // Channels-last y: the tile's pixels straight to their rows of oc bytes.
            uint8_t* out = y_channels_last ? reinterpret_cast<uint8_t*>(yn) + (c0 + t0) * oc + 64 * b : bytes + t0 * 64;
            const int64_t pitch = y_channels_last ? oc : 64;
            if (fast) {
              store_tile_fast(ep, store, ts, rows, nv, 64 * b, out, pitch);
              continue;
            }
            for (int j = 0; j < nv; ++j)
              store(ep, ts + j * kRows * 16, kTileInts, 0, rows, 1, 16, false, 64 * b + 16 * j, out + 16 * j, pitch);
          }
          if (!y_channels_last) store_transposed(bytes, cn, nv, yn + 64 * b * plane + c0, plane);
        }
      }
    };
    parallel_for(pool, pieces, piece);
  }
}

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
bool q_nhwc_available() { return false; }
bool q_nhwc_runs(const ConvShape&) { return false; }
void q_conv_nhwc(const ConvShape&, const void*, bool, int32_t, const uint32_t*, const QEpilogue&, void*, bool,
                 ThreadPool*) {
  throw std::logic_error("q_conv_nhwc: not for this CPU");
}
}  // namespace nxrt::cpu
#endif
