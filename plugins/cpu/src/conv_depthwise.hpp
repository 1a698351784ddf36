// Depthwise convolution kernels picked by ISA (internal to conv.cpp): the
// direct 3x3 plane kernels and the tap accumulation of the phase-plane path.
#pragma once
#include <cstdint>

#include "conv.hpp"

namespace nxrt::cpu {

// The direct 3x3 kernels keep per-chunk load masks for one output row on the stack.
constexpr int64_t kDw3x3MaxWidth = 1024;

#if defined(__x86_64__)
// One output plane of a 3x3 depthwise conv (dilation 1, stride_w 1 or 2, out_w <=
// kDw3x3MaxWidth) straight from the input plane: padding by masked loads, bias,
// residual and clamp in the store. AVX2 + FMA.
void dw3x3_plane_avx2(const ConvShape& s, const float* in, const float* wk, float bias, float* o, const float* res,
                      const ConvPostOps& post);
// The same for 5x5 and 7x7 kernels (dilation 1, stride_w 1 or 2), one output row at a time.
void dwkxk_plane_avx2(const ConvShape& s, const float* in, const float* wk, float bias, float* o, const float* res,
                      const ConvPostOps& post);
// out[j] = bias + sum_t w[t] * src[t][j] for j < n. AVX2 + FMA.
void dw_accumulate_avx2(float* out, int64_t n, const float* const* src, const float* w, int64_t taps, float bias);
#endif

}  // namespace nxrt::cpu
