// 3x3 stride-1 convolution (dilated too) by Winograd F(4x4, 3x3), NCHW in and out.
//
// Each 4x4 output tile is computed from a 6x6 input tile with 36 products per
// (output, input) channel pair instead of 144: the weights are transformed
// once (U = G g G^T, 6x6 per channel pair, packed as 36 GEMM A operands), the
// input per run (V = B^T d B, written straight into 36 packed-B operands, one
// column per tile), then 36 GEMMs M = U V and the output transform
// Y = A^T M A with bias, residual and clamp applied as Y is stored.
// Points 0, +-1, +-2 (Lavin & Gray): the result differs from the direct conv by
// rounding only (a few ulp of sum |x||w| in float32; tests bound it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "conv.hpp"
#include "thread_pool.hpp"

namespace nxrt::cpu {

constexpr int64_t kWinogradTile = 4;  // output tile edge
constexpr int64_t kWinogradAlpha = 6;  // input tile edge: kWinogradTile + 3 - 1

// Whether `s` can run as F(4x4, 3x3) (3x3, stride 1, group 1; a dilated conv runs
// as one undilated conv per phase of its dilation grid).
bool winograd_shape_ok(const ConvShape& s);
// A 5x5 stride-1 undilated conv as F(4x4, 3x3) over the four 3x3 blocks of its kernel padded
// to 6x6: the 3x3 conv (no padding, 4 x IC channels, output of s's size) whose input channel
// (a * 2 + b) * IC + ic is x's channel ic moved up 3a rows and left 3b columns (its padding
// included); nullopt for other shapes. conv_uses_winograd, winograd_packed_floats,
// winograd_pack_weights and conv2d_winograd take the 5x5 shape and run this one.
std::optional<ConvShape> winograd_5x5_blocks(const ConvShape& s);
// Whether conv2d should: winograd_shape_ok and enough tiles and channels that the
// 4x fewer multiplications outweigh the transforms (the cost model; `nxrt inspect`
// shows the choice).
bool conv_uses_winograd(const ConvShape& s);
// Whether a conv that conv_uses_winograd or conv_uses_winograd_2x2 names runs the direct
// product instead on `pool` (the session's threads, known at kernel creation): small layers
// (at most 2^24 direct multiply-adds) on 2+ threads, AVX-512, where F(4x4) would split its
// three steps across the threads (too few tiles for a block each) or F(2x2) runs: their
// transforms and the operands handed between cores then cost more than the products saved.
bool conv_winograd_loses_threaded(const ConvShape& s, const ThreadPool* pool);

// The distance to put between consecutive Winograd operands (V, M) of `floats` each: the
// next odd number of 64-byte lines (a multiple of 4 KB shares one L1 set).
size_t winograd_operand_stride(size_t floats);
// Floats winograd_pack_weights writes: 36 packed GEMM A operands of OC x IC.
size_t winograd_packed_floats(const ConvShape& s);
// U = G w G^T for every (oc, ic), packed (w: [OC][IC][3][3]).
void winograd_pack_weights(const ConvShape& s, const float* w, float* dst);

// out = conv(x, w) + bias, then post-ops; u from winograd_pack_weights for this OC x IC.
void conv2d_winograd(const ConvShape& s, const float* x, const float* u, const float* bias, float* out,
                     ThreadPool* pool, const ConvPostOps& post);

}  // namespace nxrt::cpu
