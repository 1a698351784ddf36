// Convolution as one product per kernel tap, each over the rectangle of outputs where that
// tap reads inside the input, for convs whose taps mostly read padding: DeepLab's ASPP (3x3 at
// dilation 6 / 12 on a 16x16 map: 56% / 25% of the tap reads land inside the input).
//
// im2col multiplies the zeros of the padding too; here tap t = (ky, kx) adds W_t x_t to its
// rectangle only (W_t: the OC x IC weights of the tap, x_t: the input it reads there, gathered),
// so the products are exactly the live ones and a tap whose rectangle is empty reads none of
// its weights. The tap that covers every output (the centre of a "same" conv) writes the output
// with the bias; the others add into it; the activation and residual follow in one pass.
#pragma once
#include <cstddef>
#include <cstdint>

#include "conv.hpp"
#include "thread_pool.hpp"

namespace nxrt::cpu {

// The share of a conv's tap reads (output x tap pairs) that land inside the input, 0..1.
double conv_live_tap_share(const ConvShape& s);

// Whether conv2d should run `s` by tap rectangles: group 1, not 1x1, at most 3/4 of the tap
// reads live, and outputs enough for products of useful width (>= 64 per channel). `nxrt
// inspect` shows the choice.
bool conv_uses_tap_rects(const ConvShape& s);

// Floats tap_rects_pack_weights writes: one packed GEMM A (OC x IC) per tap.
size_t tap_rects_packed_floats(const ConvShape& s);
// w ([OC][IC][KH][KW]) packed tap by tap: tap t's A at dst + t * packed_a_floats(OC, IC).
void tap_rects_pack_weights(const ConvShape& s, const float* w, float* dst);

// out = post(conv(x, w) + bias); packed from tap_rects_pack_weights for this shape.
void conv2d_tap_rects(const ConvShape& s, const float* x, const float* packed, const float* bias, float* out,
                      ThreadPool* pool, const ConvPostOps& post);

}  // namespace nxrt::cpu
