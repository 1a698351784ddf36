// The 8-bit convolution with the output channels along the vector lanes and the output pixels
// as the broadcast rows: x copied channels-last (uint8 x', the padding x_zp'), so the 4 input
// channels of a quad at one tap of one pixel are one word, broadcast against 4 vectors of the
// weights' 64 output channels (vpdpbusd: 6 pixels x 64 channels in 24 accumulators, the whole
// K of a tile in registers). No im2col: strides, padding and dilation only move the words'
// addresses. It fits where the pixel-lanes product (conv_int8.cpp) idles lanes or packs
// panels: 7x7 maps (49 pixels: three panels of 16 and a lone column) and strided convs (their
// im2col panels). The sums are the direct product's, so the outputs are the same bytes.
//
// Per piece of work (output rows x blocks of 64 output channels): the piece's input rows are
// copied channels-last into the thread's scratch; per block, chunks of up to 48 pixels run
// through the tiles, the QOutput store writes their bytes pixel by pixel (channels along the
// lanes), and a 16 x 16 byte transpose per 16 pixels puts them in y's planes (or, for a
// channels-last consumer such as the stem's pool, the bytes go straight to y's pixel rows).
#pragma once
#include <cstddef>
#include <cstdint>

#include "conv.hpp"
#include "gemm_int8.hpp"
#include "thread_pool.hpp"

namespace nxrt::cpu {

// Whether this CPU runs it: AVX-512 BW/VL/DQ and VNNI, not capped below avx512; and whether it
// runs shape s (q_nhwc_shape_ok; the row mode's copy needs VBMI too).
bool q_nhwc_available();
bool q_nhwc_runs(const ConvShape& s);
// One group and output channels in 16s; input channels in 16s (a step is a kernel position,
// its quads 4 channels each), or 3 undilated in width (the row mode of RGB stems: a step is
// a kernel row, whose k_w x 3 bytes lie together in the copy, read as ceil(3 k_w / 4) quads,
// the weights 0 past the row).
bool q_nhwc_shape_ok(const ConvShape& s);
// The cost model: where the pixel-lanes product loses lanes or packs panels (conv_int8_nhwc.cpp):
// 7x7 maps, strided convs other than 1x1, RGB stems.
bool q_nhwc_pays(const ConvShape& s);
// The K loop: `steps` taps (channel mode) or kernel rows (row mode) of `quads` quads each.
struct NhwcK {
  int64_t steps, quads;
  bool rows;
};
NhwcK q_nhwc_k(int64_t ic, int64_t k_h, int64_t k_w);
// Words q_nhwc_pack writes: steps * quads per output channel.
inline size_t q_nhwc_words(int64_t oc, int64_t ic, int64_t k_h, int64_t k_w) {
  const NhwcK k = q_nhwc_k(ic, k_h, k_w);
  return size_t(oc * k.steps * k.quads);
}
// w' ([OC][IC][k_h][k_w], the s8 operand: w - 128 for uint8 weights) into dst: per block of
// 64 output channels (the last 16, 32 or 48 wide), [step][quad][width] words, each word the 4
// weights its quad's bytes meet for one output channel.
void q_nhwc_pack(const int8_t* w, int64_t oc, int64_t ic, int64_t k_h, int64_t k_w, uint32_t* dst);
// y = the QOutput of conv(x', w') for q_nhwc_shape_ok shapes: x of s.batch images (uint8, or
// int8 read as x ^ 0x80 when x_signed), padding x' = xq_zp, w from q_nhwc_pack, ep with the
// quads' correction folded into its bias (QConv's) and an 8-bit output type. y in NCHW planes,
// or channels-last ([batch][out_h][out_w][out_c] bytes, no transposes) when y_channels_last.
// Only where q_nhwc_available.
void q_conv_nhwc(const ConvShape& s, const void* x, bool x_signed, int32_t xq_zp, const uint32_t* w,
                 const QEpilogue& ep, void* y, bool y_channels_last, ThreadPool* pool);

}  // namespace nxrt::cpu
