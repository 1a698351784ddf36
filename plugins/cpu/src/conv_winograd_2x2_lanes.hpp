// Winograd F(2x2, 3x3) with the tiles along the AVX-512 lanes, for maps of at most 16 tiles
// (ResNet's 7x7 stage, 8x8 maps): conv_winograd_2x2.cpp picks it.
//
// On such maps each transformed weight serves at most 16 tiles, so the products stream U
// (16/9 of the direct kernel's weights) from memory at 16 multiply-adds a float. The GEMM
// kernel's 8-row tiles read each 48-column panel from memory twice as fast as memory gives
// it (~15 GB/s measured, 14th session); here one vector holds all the tiles, 16 output
// channels accumulate against weights broadcast straight from U, and U is read once, in
// order, fetched 4 KB ahead (~24 GB/s a core, ~100 G multiply-adds/s on one thread) and
// non-temporally (its lines, used once a run, are not kept in L2 and L3).
// Internal to the F(2x2) kernel; the public entry points stay in conv_winograd_2x2.hpp.
#pragma once
#include <cstddef>

#include "conv.hpp"
#include "thread_pool.hpp"

namespace nxrt::cpu {

// AVX-512 and at most 16 tiles of 2x2 outputs.
bool winograd_2x2_lanes_fit(const ConvShape& s);

// Floats the lanes layout takes: 16 points x IC x OC rounded up to 16 output channels.
size_t winograd_2x2_lanes_packed_floats(const ConvShape& s);

// u: U^T per point, [16][IC][OC]. dst: [OC / 16 blocks][16 points][IC][16 channels], the
// channels past OC zero.
void winograd_2x2_lanes_pack(const ConvShape& s, const float* u, float* dst);

// out = post(conv(x, w) + bias) with u from winograd_2x2_lanes_pack.
void conv2d_winograd_2x2_lanes(const ConvShape& s, const float* x, const float* u, const float* bias, float* out,
                               ThreadPool* pool, const ConvPostOps& post);

}  // namespace nxrt::cpu
