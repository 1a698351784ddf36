// A stride-2 7x7 stem on few input channels (ResNet's 3 -> 64) by Winograd F(4x4, 4x4) over
// the input's stride phases, channels-last rows for the fused max pool (conv2d_max_pool).
//
// Splitting the input into its four stride phases (rows and columns even / odd) makes the
// stride-2 7x7 conv a stride-1 4x4 conv over 4 x IC phase channels (the kernel's phase taps,
// 4x4 / 4x3 / 3x4 / 3x3, padded to 4x4 with zeros). F(4x4, 4x4) makes each 4x4 output tile
// from a 7x7 input tile with 49 products per (output channel, phase channel): 37 multiply-adds
// an output on 3 input channels instead of the direct product's 147. With 12 phase channels
// the products have K = 12: a 6-tile x 64-channel register block, U (49 x 12 x 64, 150 KB)
// from L2, the 49 points' sums kept for the output transform in a block of L2.
// Points 0, +-1, +-2, 1/2 (F(3x3, 4x4) on 0, +-1, +-2 took 20% longer: 2% of its tiles
// padding, 12% more products, its transforms per output no cheaper): the result differs from
// the direct conv by rounding (a few ulp of sum |x||w|; tests bound it).
#pragma once
#include <cstddef>
#include <cstdint>

#include "conv.hpp"

namespace nxrt::cpu {

// Whether conv2d_max_pool makes the rows of `s` this way: AVX-512, group 1, 16, 32, 48 or 64
// output channels, at most 4 input channels, a 7x7 or 8x8 kernel at stride 2, undilated.
bool conv_stem_winograd_ok(const ConvShape& s);
// Conv rows a block should hold (a multiple of the tile's 4).
constexpr int64_t kStemWinogradBlockRows = 8;

// Floats stem_winograd_pack_weights writes: U, 49 points x (4 x IC) phase channels x OC.
size_t stem_winograd_packed_floats(const ConvShape& s);
// U = G w' G^T for every (oc, phase channel), w' the phase kernels of w ([OC][IC][KH][KW]).
void stem_winograd_pack_weights(const ConvShape& s, const float* w, float* dst);

// Conv rows [r0, r1) of image xn (NCHW, [IC][H][W]) into dst as [row - r0][OW][OC] with bias
// (or null) and post's clamp / HardSwish (no residual); u from stem_winograd_pack_weights.
// One thread; scratch slot A.
void stem_winograd_rows(const ConvShape& s, const float* xn, const float* u, const float* bias, const ConvPostOps& post,
                        int64_t r0, int64_t r1, float* dst);

}  // namespace nxrt::cpu
