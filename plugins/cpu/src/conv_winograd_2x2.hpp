// 3x3 stride-1 convolution by Winograd F(2x2, 3x3) for small maps with many channels
// (ResNet's 7x7 stage), NCHW in and out.
//
// F(4x4, 3x3) needs enough 4x4 tiles to fill its GEMM columns and reads 4x the weights;
// on a 7x7 map it has 4 tiles. F(2x2, 3x3) cuts the 7x7 map into 16 tiles of 2x2 from 4x4
// input tiles: 16 products per (output, input) channel pair and tile instead of 36 for 4
// outputs, so 256 per pair instead of the direct conv's 441, from 16/9 of the weights.
// The 16 GEMMs run with the tiles as rows (M = tiles) and the output channels along the
// packed-B panels (the weights U^T, packed at kernel creation), so each weight streamed
// from memory serves every tile and the 4 x 24 AVX2 blocks stay full.
// Points 0, +-1 (Lavin & Gray): the transforms are exact in float32 except for the
// weights' halves, so the result differs from the direct conv by rounding only.
#pragma once
#include <cstddef>
#include <cstdint>

#include "conv.hpp"
#include "thread_pool.hpp"

namespace nxrt::cpu {

// Whether conv2d should run `s` as F(2x2, 3x3): 3x3, stride 1, undilated, group 1, where
// F(4x4, 3x3) does not have the tiles (conv_uses_winograd is false), with channels thick
// enough (>= 64 in and out) that the products outweigh the transforms and at least half the
// tiles' outputs real. `nxrt inspect` shows the choice.
bool conv_uses_winograd_2x2(const ConvShape& s);

// Floats winograd_2x2_pack_weights writes: 16 packed GEMM B operands of IC x OC.
size_t winograd_2x2_packed_floats(const ConvShape& s);
// U = G w G^T for every (oc, ic), packed as U^T (w: [OC][IC][3][3]).
void winograd_2x2_pack_weights(const ConvShape& s, const float* w, float* dst);

// out = post(conv(x, w) + bias); u from winograd_2x2_pack_weights for this OC x IC.
void conv2d_winograd_2x2(const ConvShape& s, const float* x, const float* u, const float* bias, float* out,
                         ThreadPool* pool, const ConvPostOps& post);

}  // namespace nxrt::cpu
