// Depthwise convolution kernels picked by ISA (conv.cpp, conv_inverted_residual.cpp): the
// direct 3x3 plane kernels and the tap accumulation of the phase-plane path.
#pragma once
#include <cstdint>

#include "conv.hpp"

namespace nxrt::cpu {

// The direct 3x3 kernels keep per-chunk load masks for one output row on the stack.
constexpr int64_t kDw3x3MaxWidth = 1024;

// Whether dw_planes runs `s` on this CPU: a depthwise conv with one channel per group that
// has a direct kernel here (3x3, 5x5, 7x7, dilation 1, strides 1 or 2, small pads, out_w <=
// kDw3x3MaxWidth; AVX2 or better; false elsewhere).
bool dw_direct_ok(const ConvShape& s);
// `count` planes of such a depthwise conv, plane c reading in + c * in_stride with weights
// w + c k_h k_w and bias[c] (bias may be null), writing out + c * out_stride, adding res + c *
// res_stride (res may be null): out = clamp(conv + bias + res). Rows outside [0, s.in_h)
// are padding, so a band of rows runs as planes of s.in_h rows with pad_top moved
// (conv_inverted_residual). The best kernel of this CPU (AVX-512 or AVX2).
struct DwPlanes {
  int64_t count = 0;
  const float* in = nullptr;
  int64_t in_stride = 0;
  const float* w = nullptr;
  const float* bias = nullptr;
  float* out = nullptr;
  int64_t out_stride = 0;
  const float* res = nullptr;
  int64_t res_stride = 0;
  // Stride 2 only, where dw_split_cols_ok(s): each input row holds its even columns, then its
  // odd ones ((in_w + 1) / 2 and in_w / 2 floats), so every tap is a plain load (an expand
  // GEMM writes its rows that way at no cost: conv_inverted_residual).
  bool split_cols = false;
  // The planes come from memory, not from a cache-sized buffer: fetch each next plane's rows
  // while this one computes (AVX-512 kernel).
  bool prefetch_next = false;
};
void dw_planes(const ConvShape& s, const DwPlanes& p, const ConvPostOps& post);
// Whether dw_planes takes split_cols input for `s` (dw_direct_ok(s), stride_w 2, and this
// CPU's kernel for it has the split form: AVX2's).
bool dw_split_cols_ok(const ConvShape& s);

// The channels-last form (the inverted-residual block's, conv_inverted_residual.cpp): whether
// dw_nhwc_rows runs `s` on this CPU (AVX-512 or AVX2; 3x3 or 5x5, dilation 1, strides 1 or 2,
// pad_left <= k / 2 + 1).
bool dw_nhwc_ok(const ConvShape& s);
// out_rows output rows of `s` (its kernel, in_w, out_w, stride, pad_left; not its rows),
// output row r reading input rows rows[r * stride + ky] (null: a padding row). Rows and
// outputs are [W][cs] floats, pixel after pixel, cs a multiple of 16, every row 64-byte
// aligned; wt: [k * k][cs] weights (tap-major), bias: [cs]. All cs channels are computed
// (padding channels included).
void dw_nhwc_rows(const ConvShape& s, const float* const* rows, int64_t cs, const float* wt, const float* bias,
                  float* out, int64_t out_rows, const ConvPostOps& post);

#if defined(__x86_64__)
// dw_nhwc_rows' kernels: 16 channels a vector (AVX-512F) and 8 (AVX2 + FMA).
void dw_nhwc_rows_avx512(const ConvShape& s, const float* const* rows, int64_t cs, const float* wt,
                         const float* bias, float* out, int64_t out_rows, const ConvPostOps& post);
void dw_nhwc_rows_avx2(const ConvShape& s, const float* const* rows, int64_t cs, const float* wt, const float* bias,
                       float* out, int64_t out_rows, const ConvPostOps& post);
#endif

#if defined(__x86_64__)
// One output plane of a 3x3 depthwise conv (dilation 1, stride_w 1 or 2, out_w <=
// kDw3x3MaxWidth) straight from the input plane: padding by masked loads, bias,
// residual and clamp in the store. AVX2 + FMA.
void dw3x3_plane_avx2(const ConvShape& s, const float* in, const float* wk, float bias, float* o, const float* res,
                      const ConvPostOps& post, bool split_cols = false);
// The same for 5x5 and 7x7 kernels (dilation 1, stride_w 1 or 2), one output row at a time.
void dwkxk_plane_avx2(const ConvShape& s, const float* in, const float* wk, float bias, float* o, const float* res,
                      const ConvPostOps& post, bool split_cols = false);
// Small planes (out_w <= 8: ResNet-like 7x7 stages; on AVX-512 out_w <= 16) with the
// channels as the vector lanes: 8 (16) planes at a time, transposed into a zero-padded
// [rows][cols][8 or 16] buffer of at most kDwLanesMaxPadded positions, every tap one vector
// FMA per output, transposed back per output row (the per-plane kernels spend most of a 7x7
// or 14x14 plane on row and mask setup). 3x3 / 5x5 / 7x7, dilation 1, strides 1 or 2 (the
// kernel; dw_lanes_ok says which run). AVX2 + FMA.
constexpr int64_t kDwLanesMaxPadded = 512;
// max_stride: AVX2's 8-lane kernel takes stride 1 only (at stride 2 the per-plane kernel was
// faster on Zen 3: 576 planes of 14x14 -> 7x7, 71 us against 86), AVX-512's 16-lane one
// strides 1 and 2 (Zen 5: MobileNetV3's 5x5 stride-2 block 242 -> 201 us). max_out_w: 8 for
// AVX2's, kDwLanes16MaxWidth for AVX-512's.
constexpr int64_t kDwLanes16MaxWidth = 16;
bool dw_lanes_ok(const ConvShape& s, int64_t max_stride = 1, int64_t max_out_w = 8);
// Planes [0, 8) of p (p.count is not read; p.bias, when set, holds 8 values).
void dw_planes8_avx2(const ConvShape& s, const DwPlanes& p, const ConvPostOps& post);
// The same with 16 planes as the AVX-512 lanes, out_w <= kDwLanes16MaxWidth (p.bias, when set,
// holds 16 values). AVX-512 F.
void dw_planes16_avx512(const ConvShape& s, const DwPlanes& p, const ConvPostOps& post);
// One row of W floats into the split_cols layout (DwPlanes): its even columns, then its odd
// ones. dst must not overlap src. AVX2.
void dw_split_row_avx2(const float* src, int64_t W, float* dst);
// out[j] = bias + sum_t w[t] * src[t][j] for j < n. AVX2 + FMA.
void dw_accumulate_avx2(float* out, int64_t n, const float* const* src, const float* w, int64_t taps, float bias);
#endif

}  // namespace nxrt::cpu
