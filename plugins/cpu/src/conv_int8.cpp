// QConv::run: the quantized convolution as the 8-bit GEMM (gemm_int8.hpp) per image and
// group, rows = output channels (the weights, packed at construction), columns = output
// pixels. The B panels are im2col of x packed per K block straight into the micro-kernel's
// pair layout: from x itself for 1x1 stride-1 unpadded convs, else from a copy of the
// group's channels widened to int16, minus x's zero point, with the padding around them
// (zeros: a padding tap stands for x_zp), so no tap needs a bounds check. Where VNNI runs the
// weights take channel-quad order and x a channel-interleaved copy; stride-1 layers on wide
// maps read their B vectors straight from that copy (conv_run_direct), no panels packed.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "conv_int8_nhwc.hpp"
#include "conv_int8_winograd.hpp"
#include "gemm_int8.hpp"
#include "qlinear.hpp"
#include "simd.hpp"

namespace nxrt::cpu {
namespace {

// Source of the B panels: x[ic * chan + ...] minus zp (in place), or the padded int16 copy (zp 0).
template <typename T>
struct PanelSource {
  const T* base;
  int32_t zp;
  const int64_t* koff;  // element offset of each k's (ic, kh, kw) tap
  int64_t K, pixels, out_w, stride_h, stride_w, row_pitch;
};

// Panel p's columns (of `pixels` output pixels, out_w to a row) as runs along output rows:
// pixel (oh, ow) at (oh * stride_h - row0) * row_pitch + ow * stride_w of the source.
QPanelRuns output_row_runs(int64_t p, int64_t pixels, int64_t out_w, int64_t stride_h, int64_t stride_w,
                           int64_t row_pitch, int64_t row0 = 0) {
  QPanelRuns runs;
  runs.stride = int(stride_w);
  const int64_t px0 = p * kQNR, cols = std::min(kQNR, pixels - px0);
  for (int64_t j = 0; j < cols;) {
    const int64_t px = px0 + j, oh = px / out_w, ow = px % out_w, len = std::min(cols - j, out_w - ow);
    runs.col[runs.n] = int(j);
    runs.off[runs.n++] = (oh * stride_h - row0) * row_pitch + ow * stride_w;
    j += len;
  }
  runs.col[runs.n] = int(cols);
  return runs;
}

// Panel p's pairs [k0, k0 + kc) into dst ([kc][kQNR] words).
template <typename T>
const uint32_t* pack_panel(const PanelSource<T>& s, int64_t p, int64_t k0, int64_t kc, uint32_t* dst) {
  int64_t off[kQNR];
  const int64_t px0 = p * kQNR, cols = std::min(kQNR, s.pixels - px0);
  if (std::is_same_v<T, int16_t> ? s.stride_w <= 2 : s.stride_w == 1) {
    // Runs along output rows: the padded copy at stride 1 or 2, or x in place.
    const QPanelRuns runs = output_row_runs(p, s.pixels, s.out_w, s.stride_h, s.stride_w, s.row_pitch);
    if constexpr (std::is_same_v<T, int16_t>) {
      static const QPackRunsFn pack_runs = q_pack_runs_active();
      pack_runs(s.base, s.koff, s.K, runs, k0, kc, dst);
    } else {
      static const QPackRuns8Fn pack_runs8 = q_pack_runs8_active();
      pack_runs8(s.base, std::is_signed_v<T>, s.zp, s.koff, s.K, runs, k0, kc, dst);
    }
    return dst;
  }
  bool contiguous = cols == kQNR;
  for (int64_t j = 0; j < cols; ++j) {
    const int64_t px = px0 + j, oh = px / s.out_w, ow = px % s.out_w;
    off[j] = oh * s.stride_h * s.row_pitch + ow * s.stride_w;
    if (j && off[j] != off[j - 1] + 1) contiguous = false;
  }
  const int32_t zp = s.zp;
  for (int64_t i = 0; i < kc; ++i) {
    const int64_t ka = 2 * (k0 + i), kb = ka + 1;
    const T* r0 = s.base + s.koff[ka];
    const T* r1 = kb < s.K ? s.base + s.koff[kb] : nullptr;
    uint32_t* d = dst + i * kQNR;
    if (contiguous && r1) {
      r0 += off[0];
      r1 += off[0];
      for (int64_t j = 0; j < kQNR; ++j) d[j] = q_pair(int32_t(r0[j]) - zp, int32_t(r1[j]) - zp);
      continue;
    }
    for (int64_t j = 0; j < cols; ++j) d[j] = q_pair(int32_t(r0[off[j]]) - zp, r1 ? int32_t(r1[off[j]]) - zp : 0);
    for (int64_t j = cols; j < kQNR; ++j) d[j] = 0;
  }
  return dst;
}

// The output rows of group g of image n, by q_gemm_rect over KP words (pairs, or quads when
// quads != 0) of packed weights pw; each piece of the work (panels [p0, p1), some rows) takes
// its B slices from make_slice(p0, p1), called on the thread that runs the piece.
template <typename MakeSlice>
void conv_rows(const ConvShape& s, int64_t K, int64_t KP, MakeSlice&& make_slice, const uint32_t* pw,
               const QEpilogue& ep, int64_t n, int64_t g, void* y, ThreadPool* pool, int quads,
               const QZpTerm& zp_term = {}, const QQuadRest* rest = nullptr) {
  const int64_t plane = s.out_h * s.out_w, ocg = s.ocg(), panels = q_panels(plane);
  const int64_t row0 = g * ocg, row1 = row0 + ocg, tiles = (row1 + kQMR - 1) / kQMR - row0 / kQMR;
  const int64_t out_c = s.out_c;
  auto y_at = [=](int64_t row, int64_t n0) { return (n * out_c + row) * plane + n0; };
  const int t = threads_for(pool, double(ocg) * double(plane) * double(K));
  // Each piece reads all the weights of its rows once per block of panels and packs its own
  // panels once for all its rows. So split the pixels while the weights are the smaller
  // operand (every piece re-reads them), else the rows (every piece re-packs the panels):
  // ResNet's 14x14 and 7x7 layers hold 0.6-2.4 MB of weights against 0.1-0.5 MB of pixels.
  // One row piece per thread: each piece packs every panel, so more pieces (for balance) cost
  // more packing than they gain. The rows split in whole groups of kQTileGroup tiles for the
  // int16 pairs' kernel (a call takes that many), in tiles for the quads' (one a call: a
  // 256@14 layer on 2 threads gets 132 / 124 rows, not 144 / 112).
  const int64_t tile_group = quads ? 1 : kQTileGroup;
  const int64_t groups = (tiles + tile_group - 1) / tile_group;
  const bool by_rows = t > 1 && ocg > plane && groups >= t;
  // Pixel pieces in whole groups of the wide kernels' kQWide panels; a lone last panel rides
  // with the group before it (q_gemm_rect runs a narrow one beside that group).
  int64_t units = (panels + kQWide - 1) / kQWide;
  if (units > 1 && panels % kQWide == 1) --units;
  const int64_t tn = t <= 1 || by_rows ? 1 : std::min(units, int64_t(t) * 4);
  const int64_t tm = by_rows ? std::min(groups, int64_t(t)) : tn >= t ? 1 : std::min(tiles, (int64_t(t) + tn - 1) / tn);
  auto piece = [&](int64_t i) {
    int64_t u0, u1, ta, tb;
    split_range(units, tn, i % tn, u0, u1);
    const int64_t p0 = u0 * kQWide, p1 = u1 == units ? panels : u1 * kQWide;
    if (by_rows) {  // whole groups of tiles
      split_range(groups, tm, i / tn, ta, tb);
      ta *= tile_group;
      tb = std::min(tiles, tb * tile_group);
    } else {
      split_range(tiles, tm, i / tn, ta, tb);
    }
    const int64_t t0 = row0 / kQMR;
    const int64_t r0 = std::max(row0, (t0 + ta) * kQMR), r1 = std::min(row1, (t0 + tb) * kQMR);
    auto b_slice = make_slice(p0, p1);
    q_gemm_rect(r0, r1, plane, KP, pw, p0, p1, b_slice, ep, true, y_at, plane, y, quads, zp_term, rest);
  };
  parallel_for(pool, tn * tm, piece);
}

template <typename T>
void conv_group(const ConvShape& s, const PanelSource<T>& src, const uint32_t* pw, const QEpilogue& ep, int64_t n,
                int64_t g, void* y, ThreadPool* pool) {
  auto b_slice = [&](int64_t p, int64_t k0, int64_t kc, uint32_t* scratch) { return pack_panel(src, p, k0, kc, scratch); };
  conv_rows(s, src.K, q_pairs(src.K), [&](int64_t, int64_t) { return b_slice; }, pw, ep, n, g, y, pool, 0);
}

// The quad panels of x' (uint8) by `pack`: runs along output rows at the conv's stride.
void conv_group_quads(const ConvShape& s, QPackQuadsFn pack, const uint8_t* base, const int64_t* koff, int64_t K,
                      int64_t row_pitch, const uint32_t* pw, const QEpilogue& ep, const QZpTerm& zp_term,
                      const QQuadRest* rest, int64_t n, int64_t g, void* y, ThreadPool* pool) {
  const int64_t pixels = s.out_h * s.out_w;
  auto b_slice = [&](int64_t p, int64_t q0, int64_t qc, uint32_t* dst) {
    pack(base, koff, K, output_row_runs(p, pixels, s.out_w, s.stride_h, s.stride_w, row_pitch), q0, qc, dst);
    return static_cast<const uint32_t*>(dst);
  };
  conv_rows(s, K, q_quads(K), [&](int64_t, int64_t) { return b_slice; }, pw, ep, n, g, y, pool, 1, zp_term, rest);
}

bool unit_conv(const ConvShape& s) {
  return s.k_h == 1 && s.k_w == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_top == 0 && s.pad_left == 0 &&
         s.out_h == s.in_h && s.out_w == s.in_w;
}

// Where the panels read x: in place (Hp x Wp = the input plane) or the padded copy, whose rows
// and columns reach the last tap any output reads; koff[j] is the offset of the tap at
// position j, tap order[j] (the weights' order; null: j itself).
struct TapLayout {
  int64_t Hp, Wp;
  std::vector<int64_t> koff;
};
TapLayout tap_layout(const ConvShape& s, bool in_place, const int32_t* order) {
  TapLayout t;
  t.Hp = in_place ? s.in_h : s.padded_h();
  t.Wp = in_place ? s.in_w : s.padded_w();
  const int64_t K = s.gemm_k(), khw = s.k_h * s.k_w;
  t.koff.resize(size_t(K));
  for (int64_t j = 0; j < K; ++j) {
    const int64_t k = order ? order[j] : j, ic = k / khw, r = k % khw;
    t.koff[size_t(j)] = ic * t.Hp * t.Wp + (r / s.k_w) * s.dil_h * t.Wp + (r % s.k_w) * s.dil_w;
  }
  return t;
}

// The u8 x s8 path: x' = x + add as uint8 (add 128 for int8 x), read in place (uint8 x of a
// 1x1 stride-1 conv, when the packer reads only the taps) or from a padded uint8 copy whose
// padding holds x_zp' (0 after the correction folded into ep's bias), with kQRunSlack bytes
// around it for the packer's whole-vector loads.
template <typename TX>
void conv_run_quads(const ConvShape& s, const TX* x, int32_t xq_zp, const uint32_t* pw, const QEpilogue& ep,
                    const QZpTerm& zp_term, const QQuadRest* rest, const int32_t* k_order, void* y, ThreadPool* pool) {
  const int64_t icg = s.icg(), K = s.gemm_k(), in_plane = s.in_h * s.in_w;
  static const bool slack = q_pack_quads_reads_slack();
  const bool in_place = std::is_same_v<TX, uint8_t> && unit_conv(s) && !slack;
  const TapLayout taps = tap_layout(s, in_place, k_order);
  const int64_t Hp = taps.Hp, Wp = taps.Wp;
  const std::vector<int64_t>& koff = taps.koff;
  static const QPackQuadsFn pack = q_pack_quads_active();
  // Masked stride-2 loads may span 32 bytes from a run's first tap: slack after the copy
  // (and before it for the AVX2 packer).
  uint8_t* padded = in_place ? nullptr
                             : reinterpret_cast<uint8_t*>(scratch_floats(
                                   kScratchA, size_t((icg * Hp * Wp + 2 * kQRunSlack + 64) / 4 + 1))) + kQRunSlack;
  const uint8_t add = std::is_same_v<TX, int8_t> ? 128 : 0;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t g = 0; g < s.group; ++g) {
      const TX* xg = x + (n * s.in_c + g * icg) * in_plane;
      if (in_place) {
        conv_group_quads(s, pack, reinterpret_cast<const uint8_t*>(xg), koff.data(), K, s.in_w, pw, ep, zp_term, rest, n,
                         g, y, pool);
        continue;
      }
      const int parts = threads_for(pool, double(icg * Hp * Wp), 1 << 18);
      parallel_ranges(pool, icg, parts, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          uint8_t* dp = padded + c * Hp * Wp;
          std::fill(dp, dp + Hp * Wp, uint8_t(xq_zp));
          for (int64_t ih = 0; ih < s.in_h; ++ih) {
            const TX* sr = xg + c * in_plane + ih * s.in_w;
            uint8_t* dr = dp + (ih + s.pad_top) * Wp + s.pad_left;
            if constexpr (std::is_same_v<TX, uint8_t>) std::copy(sr, sr + s.in_w, dr);
            else for (int64_t iw = 0; iw < s.in_w; ++iw) dr[iw] = uint8_t(uint8_t(sr[iw]) + add);
          }
        }
      });
      conv_group_quads(s, pack, padded, koff.data(), K, Wp, pw, ep, zp_term, rest, n, g, y, pool);
    }
}

// The channel quads' copy of x's group xg: plane q holds channels [4 q, 4 q + 4) (x' = x ^
// flip) as words over padded rows [r_lo, r_hi), `pitch` words a row (>= in_w + pad_left), row
// r's first column at word (r - r_lo) * pitch + pad_left; every other word holds x_zp' (before
// the first row, after each row's data up to the next one's, whole padding rows). Each word is
// written once; plane q starts at word q * quad_plane_words(s, r_lo, r_hi, pitch).
int64_t quad_plane_words(const ConvShape& s, int64_t r_lo, int64_t r_hi, int64_t pitch) {
  return (r_hi - r_lo) * pitch + s.pad_left;
}
void copy_quad_rows(const ConvShape& s, const uint8_t* xg, uint8_t flip, uint8_t zp, int64_t r_lo, int64_t r_hi,
                    int64_t pitch, uint32_t* dst) {
  const int64_t in_plane = s.in_h * s.in_w, plane_bytes = 4 * quad_plane_words(s, r_lo, r_hi, pitch);
  const int64_t gap = 4 * (pitch - s.in_w);  // the bytes of padding after each row's data
  // The rows of x read, one run of (rows x in_w) bytes a plane (16 rows of a 56-wide map: 900
  // bytes), the next quad's 4 fetched ahead (prefetch_run).
  const int64_t x_lo = std::max(r_lo, s.pad_top), x_hi = std::min(r_hi, s.pad_top + s.in_h);
  const int64_t run = std::max<int64_t>(0, x_hi - x_lo) * s.in_w;
  for (int64_t q = 0; q < s.icg() / 4; ++q) {
    if (run > 0 && q + 1 < s.icg() / 4)
      for (int i = 0; i < 4; ++i) prefetch_run(xg + (4 * (q + 1) + i) * in_plane + (x_lo - s.pad_top) * s.in_w, run);
    uint8_t* dq = reinterpret_cast<uint8_t*>(dst) + q * plane_bytes;
    std::fill(dq, dq + 4 * s.pad_left, zp);
    for (int64_t r = r_lo; r < r_hi; ++r) {
      uint8_t* dr = dq + 4 * ((r - r_lo) * pitch + s.pad_left);
      if (r < s.pad_top || r >= s.pad_top + s.in_h) {
        std::fill(dr, dr + 4 * pitch, zp);
        continue;
      }
      q_interleave_channels4(xg + 4 * q * in_plane + (r - s.pad_top) * s.in_w, in_plane, s.in_w, flip, dr);
      std::fill(dr + 4 * s.in_w, dr + 4 * s.in_w + gap, zp);
    }
  }
}

// The channel quads (the weights in channel-quad order, IC/g % 4 == 0): x' copied as
// [IC/g/4][rows][Wp][4] bytes around which the padding holds x_zp'; tap k = ic * KH * KW + r at
// byte (ic / 4) * rows * Wp * 4 + (its pixel offset) * 4 + ic % 4. Each piece of conv_rows
// copies the padded rows its pixels read into its own thread's scratch: a copy shared by the
// threads was read back from the other core (the pack's share of a 64@56 layer doubled).
template <typename TX>
void conv_run_channel_quads(const ConvShape& s, const TX* x, int32_t xq_zp, const uint32_t* pw, const QEpilogue& ep,
                            const QZpTerm& zp_term, void* y, ThreadPool* pool) {
  const int64_t icg = s.icg(), K = s.gemm_k(), in_plane = s.in_h * s.in_w, pixels = s.out_h * s.out_w;
  const int64_t Wp = s.padded_w(), out_w = s.out_w;
  const uint8_t flip = std::is_same_v<TX, int8_t> ? 0x80 : 0;
  static const QPackQuadsFn pack = q_pack_channel_quads();
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t g = 0; g < s.group; ++g) {
      const uint8_t* xg = reinterpret_cast<const uint8_t*>(x + (n * s.in_c + g * icg) * in_plane);
      auto make_slice = [&](int64_t p0, int64_t p1) {
        // Padded rows [r_lo, r_hi) hold every tap of pixels [p0, p1) panels.
        const int64_t px0 = p0 * kQNR, px1 = std::min(pixels, p1 * kQNR);
        const int64_t r_lo = px0 / out_w * s.stride_h;
        const int64_t r_hi = (px1 - 1) / out_w * s.stride_h + (s.k_h - 1) * s.dil_h + 1;
        const int64_t quad_plane = 4 * quad_plane_words(s, r_lo, r_hi, Wp);  // bytes
        uint32_t* words = reinterpret_cast<uint32_t*>(scratch_floats(kScratchA, size_t(icg / 4 * quad_plane / 4 + 16)));
        copy_quad_rows(s, xg, flip, uint8_t(xq_zp), r_lo, r_hi, Wp, words);
        const uint8_t* copy = reinterpret_cast<const uint8_t*>(words);
        // Position j = (q * KH * KW + r) * 4 + i holds tap r of channel 4 q + i (QConv's order).
        std::vector<int64_t> koff(static_cast<size_t>(K));
        for (int64_t q = 0, j = 0; q < icg / 4; ++q)
          for (int64_t kh = 0; kh < s.k_h; ++kh)
            for (int64_t kw = 0; kw < s.k_w; ++kw)
              for (int64_t i = 0; i < 4; ++i, ++j) koff[size_t(j)] = q * quad_plane + 4 * (kh * s.dil_h * Wp + kw * s.dil_w) + i;
        return [&s, copy, r_lo, Wp, K, pixels, koff = std::move(koff)](int64_t p, int64_t q0, int64_t qc,
                                                                       uint32_t* dst) {
          // Offsets in the copy's pixels, its first row r_lo.
          const QPanelRuns runs = output_row_runs(p, pixels, s.out_w, s.stride_h, s.stride_w, Wp, r_lo);
          pack(copy, koff.data(), K, runs, q0, qc, dst);
          return static_cast<const uint32_t*>(dst);
        };
      };
      conv_rows(s, K, q_quads(K), make_slice, pw, ep, n, g, y, pool, 1, zp_term);
    }
}

// The row pitch of conv_run_direct's copy: the right padding of a row and the left padding of
// the next share their words (both hold x_zp'), so a row needs in_w + max(left, right) words
// (ResNet's 3x3 pad 1: in_w + 1, one column past out_w), and at least out_w.
int64_t shared_pad_pitch(const ConvShape& s) {
  const int64_t right = std::max<int64_t>(0, s.padded_w() - s.in_w - s.pad_left);
  return std::max(s.out_w, s.in_w + std::max(s.pad_left, right));
}

// Whether the stride-1 channel quads read B in place (conv_run_direct): the columns each
// output row carries past out_w through the tiles cost less than the pack they save (11-12%
// of a 64@56 layer) up to ~5% of them: in one process, alternated, a 64@56 layer (1 column of
// 57) runs 5-10% faster, a 128@28 one (1 of 29) 2-3% faster on 1 thread and 0.97-1.03x on 2;
// 14x14 maps (1 of 15) keep the panels. The pixels must outnumber the group's channels (the
// pieces split the pixels) and the weights be symmetric (no column sums for zp_term).
bool direct_pays(const ConvShape& s, const QZpTerm& zp_term) {
  const int64_t pitch = shared_pad_pitch(s);
  return s.stride_h == 1 && s.stride_w == 1 && !zp_term.row_zp && (pitch - s.out_w) * 20 <= pitch &&
         s.ocg() <= s.out_h * s.out_w && q_tile_direct_dpbusd(1) && q_store_kept_avx512();
}

// The stride-1 channel quads without packing B. A piece of output rows [oh0, oh1) copies its
// padded rows (copy_quad_rows) at shared_pad_pitch Wp; there
// output pixel (oh, ow) reads tap (kh, kw) of quad q at word q * quad_plane + (oh - oh0 + kh *
// dil_h) * Wp + ow + kw * dil_w, so "virtual" column v = (oh - oh0) * Wp + ow steps through
// every tap's words at unit stride and the panels of 16 virtual columns are read where they
// lie (q_tile_direct_dpbusd). The columns with ow >= out_w are computed and dropped by the
// store (q_store_kept_avx512).
template <typename TX>
void conv_run_direct(const ConvShape& s, const TX* x, int32_t xq_zp, const uint32_t* pw, const QEpilogue& ep, void* y,
                     ThreadPool* pool) {
  const int64_t icg = s.icg(), ocg = s.ocg(), K = s.gemm_k(), KQ = K / 4, in_plane = s.in_h * s.in_w;
  const int64_t plane = s.out_h * s.out_w, Wp = shared_pad_pitch(s), out_w = s.out_w;
  const uint8_t flip = std::is_same_v<TX, int8_t> ? 0x80 : 0;
  static const QStoreKeptFn store = q_store_kept_avx512();
  const size_t esize = ep.type == QType::U8 || ep.type == QType::S8 ? 1 : 4;
  const int64_t kcb = q_k_block(KQ, kQKCWide);
  const int t = threads_for(pool, double(ocg) * double(plane) * double(K));
  const int64_t pieces = t <= 1 ? 1 : std::min(s.out_h, int64_t(t) * 2);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t g = 0; g < s.group; ++g) {
      const uint8_t* xg = reinterpret_cast<const uint8_t*>(x + (n * s.in_c + g * icg) * in_plane);
      const int64_t row0 = g * ocg, row1 = row0 + ocg, t0 = row0 / kQMR, t1 = (row1 + kQMR - 1) / kQMR;
      auto piece = [&](int64_t i) {
        int64_t oh0, oh1;
        split_range(s.out_h, pieces, i, oh0, oh1);
        if (oh0 == oh1) return;
        // Padded rows [oh0, r_hi) hold every tap of these output rows; 16 words of slack
        // after them for the last panel's columns past the outputs.
        const int64_t r_hi = oh1 + (s.k_h - 1) * s.dil_h, quad_plane = quad_plane_words(s, oh0, r_hi, Wp);
        uint32_t* copy = reinterpret_cast<uint32_t*>(scratch_floats(kScratchA, size_t(icg / 4 * quad_plane + kQNR)));
        copy_quad_rows(s, xg, flip, uint8_t(xq_zp), oh0, r_hi, Wp, copy);
        std::fill(copy + icg / 4 * quad_plane, copy + icg / 4 * quad_plane + kQNR, 0u);
        // Quad j = q * KH * KW + (kh * KW + kw): QConv's channel-quad order.
        std::vector<int64_t> koff(static_cast<size_t>(KQ));
        for (int64_t q = 0, j = 0; q < icg / 4; ++q)
          for (int64_t kh = 0; kh < s.k_h; ++kh)
            for (int64_t kw = 0; kw < s.k_w; ++kw, ++j) koff[size_t(j)] = q * quad_plane + kh * s.dil_h * Wp + kw * s.dil_w;
        const int64_t V = (oh1 - oh0 - 1) * Wp + out_w, panels = (V + kQNR - 1) / kQNR;
        int32_t* cbuf = reinterpret_cast<int32_t*>(scratch_floats(kScratchC, size_t((t1 - t0) * kQWide * kQMR * kQNR)));
        for (int64_t g0 = 0; g0 < panels; g0 += kQWide) {
          const int nv = int(std::min<int64_t>(kQWide, panels - g0));
          const QTileDirectFn fn = q_tile_direct_dpbusd(nv);
          uint16_t keep[kQWide];
          int64_t col_at[kQWide];
          for (int j = 0; j < nv; ++j) {  // q_store_kept_avx512's masks and columns
            keep[j] = 0;
            col_at[j] = 0;
            for (int c = kQNR - 1; c >= 0; --c) {
              const int64_t v = (g0 + j) * kQNR + c;
              if (v >= V || v % Wp >= out_w) continue;
              keep[j] = uint16_t(keep[j] | 1u << c);
              col_at[j] = (oh0 + v / Wp) * out_w + v % Wp;  // the first kept column's, at the end
            }
          }
          const uint32_t* b = copy + g0 * kQNR;
          for (int64_t k0 = 0; k0 < KQ; k0 += kcb) {
            const int64_t kc = std::min(kcb, KQ - k0);
            const bool first = k0 == 0, final = k0 + kcb >= KQ;
            for (int64_t tt = t0; tt < t1; ++tt) {
              int32_t* acc = cbuf + (tt - t0) * kQWide * kQMR * kQNR;
              const int64_t tn = tt + 1 < t1 ? tt + 1 : t0, kn = tt + 1 < t1 || final ? k0 : k0 + kcb;
              fn(kc, pw + (tt * KQ + k0) * kQMR, b, koff.data() + k0, acc, !first, pw + (tn * KQ + kn) * kQMR);
            }
            // The group's rows in one store call once every tile has its sums (one call a tile
            // set the store's constants up 11 times for ResNet's 64 channels: 64@56 layer
            // 331-336 -> 324-328 us with the shortcut's loop below, harness, 1 thread).
            if (final)
              store(ep, cbuf, kQWide * kQMR * kQNR, row0 - t0 * kQMR, row1 - t0 * kQMR, nv, keep, col_at, row0,
                    static_cast<char*>(y) + size_t((n * s.out_c + row0) * plane) * esize, plane);
          }
        }
      };
      parallel_for(pool, pieces, piece);
    }
}

template <typename TX>
void conv_run(const ConvShape& s, const TX* x, int32_t x_zp, const uint32_t* pw, const QEpilogue& ep, void* y,
              ThreadPool* pool) {
  const int64_t icg = s.icg(), K = s.gemm_k(), in_plane = s.in_h * s.in_w, plane = s.out_h * s.out_w;
  const bool in_place = unit_conv(s);
  const TapLayout taps = tap_layout(s, in_place, nullptr);
  const int64_t Hp = taps.Hp, Wp = taps.Wp;
  const std::vector<int64_t>& koff = taps.koff;
  // kQRunSlack readable elements on both sides of the copy for pack_runs' loads.
  int16_t* padded = in_place ? nullptr
                             : reinterpret_cast<int16_t*>(scratch_floats(
                                   kScratchA, size_t((icg * Hp * Wp + 2 * kQRunSlack + 1) / 2))) + kQRunSlack;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t g = 0; g < s.group; ++g) {
      const TX* xg = x + (n * s.in_c + g * icg) * in_plane;
      if (in_place) {
        const PanelSource<TX> src{xg, x_zp, koff.data(), K, plane, s.out_w, 1, 1, s.in_w};
        conv_group(s, src, pw, ep, n, g, y, pool);
        continue;
      }
      const int parts = threads_for(pool, double(icg * Hp * Wp), 1 << 18);
      parallel_ranges(pool, icg, parts, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          int16_t* dp = padded + c * Hp * Wp;
          std::fill(dp, dp + Hp * Wp, int16_t(0));
          for (int64_t ih = 0; ih < s.in_h; ++ih) {
            const TX* sr = xg + c * in_plane + ih * s.in_w;
            int16_t* dr = dp + (ih + s.pad_top) * Wp + s.pad_left;
            for (int64_t iw = 0; iw < s.in_w; ++iw) dr[iw] = int16_t(int32_t(sr[iw]) - x_zp);
          }
        }
      });
      const PanelSource<int16_t> src{padded, 0, koff.data(), K, plane, s.out_w, s.stride_h, s.stride_w, Wp};
      conv_group(s, src, pw, ep, n, g, y, pool);
    }
}

}  // namespace

bool QConv::uses_winograd(const ConvShape& s) const {
  return !winograd_.empty() && q_winograd_pays(s) && s.in_c * 9 == k_ && s.out_c == oc_;
}

bool QConv::reads_b_in_place(const ConvShape& s) const {
  const QZpTerm zp_term{wq_zp_.empty() ? nullptr : wq_zp_.data(), nullptr, nullptr};
  return quads_ && channel_quads_ && !nhwc_ && s.k_h * s.k_w == taps_ && !(x_type_ == QType::U8 && unit_conv(s)) &&
         direct_pays(s, zp_term);
}

void QConv::check_shape(const ConvShape& s) const {
  if (s.out_c != oc_ || s.gemm_k() != k_ || s.in_c != s.icg() * s.group)
    throw std::invalid_argument("QConv: the shape has " + std::to_string(s.out_c) + " channels of " +
                                std::to_string(s.gemm_k()) + " weights, the weights " + std::to_string(oc_) + " of " +
                                std::to_string(k_));
  if (s.pad_top < 0 || s.pad_left < 0) throw std::invalid_argument("QConv: negative pads");
  if (channel_quads_ && s.k_h * s.k_w != taps_)
    throw std::invalid_argument("QConv: the shape has a kernel of " + std::to_string(s.k_h * s.k_w) + " taps, the weights " +
                                std::to_string(taps_));
  if (nhwc_ && (!q_nhwc_runs(s) || s.k_h * s.k_w != taps_))
    throw std::invalid_argument("QConv: the channels-last path needs one group, channels in 16s (or 3 in) and the "
                                "weights' kernel; the shape has " + std::to_string(s.group) + " groups of " +
                                std::to_string(s.icg()) + " -> " + std::to_string(s.ocg()) + " channels, " +
                                std::to_string(s.k_h * s.k_w) + " taps");
}

void QConv::run_channels_last(const ConvShape& s, const void* x, void* y, ThreadPool* pool) const {
  if (!nhwc_) throw std::logic_error("QConv::run_channels_last: this conv does not take the channels-last path");
  if (s.batch * s.out_c * s.out_h * s.out_w == 0) return;
  check_shape(s);
  q_conv_nhwc(s, x, x_type_ == QType::S8, xq_zp_, packed_w_.data(), *ep_, y, true, pool);
}

void QConv::run(const ConvShape& s, const void* x, void* y, ThreadPool* pool) const {
  if (s.batch * s.out_c * s.out_h * s.out_w == 0) return;
  check_shape(s);
  const uint32_t* pw = packed_w_.data();
  if (quads_) {
    const QZpTerm zp_term{wq_zp_.empty() ? nullptr : wq_zp_.data(), nullptr, nullptr};
    const QQuadRest rest{rest_index_.data(), rest_entries_.data()};
    const QQuadRest* r = rest_index_.empty() ? nullptr : &rest;
    const int32_t* order = k_order_.empty() ? nullptr : k_order_.data();
    if (nhwc_) {
      q_conv_nhwc(s, x, x_type_ == QType::S8, xq_zp_, pw, *ep_, y, false, pool);
      return;
    }
    if (uses_winograd(s)) {
      q_conv_winograd(s, x, x_type_ == QType::S8, xq_zp_, winograd_.data(), *ep_, y, pool);
      return;
    }
    // 1x1 stride-1 convs read uint8 x in place (the channel-quad order is k itself there).
    if (channel_quads_ && !(x_type_ == QType::U8 && unit_conv(s))) {
      if (reads_b_in_place(s)) {
        if (x_type_ == QType::U8) conv_run_direct(s, static_cast<const uint8_t*>(x), xq_zp_, pw, *ep_, y, pool);
        else conv_run_direct(s, static_cast<const int8_t*>(x), xq_zp_, pw, *ep_, y, pool);
        return;
      }
      if (x_type_ == QType::U8)
        conv_run_channel_quads(s, static_cast<const uint8_t*>(x), xq_zp_, pw, *ep_, zp_term, y, pool);
      else conv_run_channel_quads(s, static_cast<const int8_t*>(x), xq_zp_, pw, *ep_, zp_term, y, pool);
      return;
    }
    if (x_type_ == QType::U8) conv_run_quads(s, static_cast<const uint8_t*>(x), xq_zp_, pw, *ep_, zp_term, r, order, y, pool);
    else conv_run_quads(s, static_cast<const int8_t*>(x), xq_zp_, pw, *ep_, zp_term, r, order, y, pool);
    return;
  }
  if (x_type_ == QType::U8) conv_run(s, static_cast<const uint8_t*>(x), x_zp_, pw, *ep_, y, pool);
  else conv_run(s, static_cast<const int8_t*>(x), x_zp_, pw, *ep_, y, pool);
}

}  // namespace nxrt::cpu
