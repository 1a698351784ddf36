// The 8-bit 3x3 stride-1 convolution by Winograd F(4x4, 3x3) in integers, with the exact
// sums of the direct product (conv_int8.cpp): 36 products per 16 outputs instead of 144, at
// half vpdpbusd's rate (int16 pairs by vpdpwssd, the same instructions a cycle), so half the
// product instructions.
//
// Why it is exact. With points 0, +-1, +-2 the input transform V = B^T d B of x' (uint8, the
// padding x_zp') is an integer within +-12750, and the weight transform with its rows scaled
// by s = (4, 6, 6, 24, 24, 1), U' = (S G) w' (S G)^T, an integer within +-49 * 128: both int16.
// The products sum in wrapping int32, so M' = sum U' V is exact mod 2^32, and with A' = A
// diag(24 / s) the output transform A'^T M' A' is 576 Y mod 2^32 (Y the direct sum). 576 = 64 *
// 9 and 9 is odd: times 9^-1 mod 2^32 it is 64 Y mod 2^32, which is 64 Y itself when |Y| < 2^25,
// and an arithmetic shift by 6 leaves Y. Since x' lies in [0, 255], Y lies within 255 times the
// sums of the channel's positive and of its negative weights: a conv takes this path only when
// those bounds hold for every channel (q_winograd_exact). ResNet-18's 8-bit layers all do (its
// 512-channel ones at about 1.9e7 of 3.4e7).
//
// Layout: tiles ride the vector lanes. A panel is 16 lanes: whole tile rows of 4 or 8 lanes
// each (maps up to 8 tiles wide), 16 tiles of one row, or 16 tiles in raster order (a panel
// holding the end of one tile row and the start of the next), whichever leaves the fewest idle
// lanes (the .cpp's Geom). Per point, V is a B slice of the 8-bit GEMM ([pairs of input
// channels][16 lanes] words) and U' its A tiles ([output channel tile][pairs][6]), so the
// products are q_tile_wide_dpwssd's 6 x 64 tiles; a last panel of one or two tiles takes its
// products with the output channels along the lanes instead. The output transform turns each
// channel's 36 vectors into 4 x 4 pixels per lane and hands rows of 16 pixels to the QOutput
// store.
#pragma once
#include <cstdint>
#include <cstdlib>

#include "conv.hpp"
#include "gemm_int8.hpp"
#include "thread_pool.hpp"

namespace nxrt::cpu {

constexpr int64_t kQWinogradPoints = 36;

// Whether this CPU runs it: AVX-512 BW and VNNI (the vpdpwssd tiles) and the kept-column store.
bool q_winograd_available();
// 3x3, stride 1, undilated, one group.
bool q_winograd_shape_ok(const ConvShape& s);
// The cost model: F(4x4)'s product instructions (36 per 16 lanes of tiles, output channel and
// input channel pair, idle lanes included: the layout's unused lanes, the last tile row and
// column; a panel of one or two tiles at 0.35 of a panel a tile) at most 3/4 of the direct
// product's (64 multiply-adds each; the transforms cost about a quarter of the products), U' at
// most 8 MB (ResNet's 256-channel 14x14 layer streams its 4.75 MB a run at the pace of its
// products; 512 channels, 19 MB, would not), and 32+ input channels.
bool q_winograd_pays(const ConvShape& s);
// Whether every output channel's sum stays within [-2^25, 2^25) for any x' in [0, 255]: with
// P and N the sums of w'(c, k) > 0 and of |w'(c, k)| < 0 over k in [0, K), the sum lies in
// [-255 N, 255 P].
template <typename WQ>
bool q_winograd_exact(int64_t channels, int64_t K, WQ&& wq) {
  for (int64_t c = 0; c < channels; ++c) {
    int64_t pos = 0, neg = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t v = wq(c, k);
      if (v > 0) pos += v;
      else neg -= v;
    }
    if (255 * pos >= (int64_t(1) << 25) || 255 * neg > (int64_t(1) << 25)) return false;
  }
  return true;
}
// Words q_winograd_pack writes for OC x IC weights.
inline size_t q_winograd_words(int64_t oc, int64_t ic) {
  return size_t(kQWinogradPoints * q_tiles(oc) * kQMR * q_pairs(ic));
}
// U' of w' ([OC][IC][3][3], the s8 operand: w - 128 for uint8 weights) into dst: per tile of
// kQMR output channels and point p = 6 i + j, a q_pack_a tile over IC/2 pairs ([pairs][kQMR]
// words at (t * 36 + p) * kQMR * q_pairs(ic)): one stream in the order the products read it
// (a layer's U' comes from memory; by point, tile t's 36 slices lay a point apart and the 64@56
// layer ran 56 us slower with cold caches, the direct product 14); the odd last channel pairs
// with zeros.
void q_winograd_pack(const int8_t* w, int64_t oc, int64_t ic, uint32_t* dst);
// y = the QOutput of conv(x', w') for q_winograd_shape_ok shapes: x of s.batch images (uint8,
// or int8 read as x ^ 0x80 when x_signed), padding x' = xq_zp, u from q_winograd_pack, ep with
// the quads' correction folded into its bias (QConv's). Only where q_winograd_available.
void q_conv_winograd(const ConvShape& s, const void* x, bool x_signed, int32_t xq_zp, const uint32_t* u,
                     const QEpilogue& ep, void* y, ThreadPool* pool);

}  // namespace nxrt::cpu
