// MobileNetV2's inverted-residual block run as one pass over bands of output rows:
//
//   [expand: 1x1 conv + bias + act] -> depthwise KxK (3, 5, 7) + bias + act -> [project:
//   1x1 conv + bias + residual + act], act: clamp and / or HardSwish
//
// Node by node, the expanded tensor (6x the block's channels: 4.8 MB at 112x112x96) is
// written to memory by the expand conv and read back by the depthwise one, and the
// depthwise output once more by the project conv. Here each thread takes a range of output
// rows and walks it in bands: the expanded rows a band needs are made into an L2-sized
// buffer (rows shared with the previous band are kept, not recomputed), the depthwise rows
// go into a second one, and the project GEMM reads them from there. Only the block's input
// and output touch memory.
#pragma once
#include <algorithm>
#include <cstdint>

#include "conv.hpp"
#include "thread_pool.hpp"

namespace nxrt::cpu {

struct InvertedResidual {
  // The depthwise conv (always present): C channels, H x W -> OH x OW; dw_direct_ok.
  ConvShape dw;
  const float* dw_w = nullptr;  // [C][k_h][k_w]
  const float* dw_b = nullptr;  // [C] or null
  ConvPostOps dw_post;          // clamp only (the block's residual is passed to the run)
  // Expand (optional): 1x1, stride 1, no pad, group 1, in_c -> C, weights packed as GEMM A
  // (pack_conv_weights_into).
  bool has_expand = false;
  int64_t expand_in_c = 0;
  const float* expand_w = nullptr;
  const float* expand_b = nullptr;
  ConvPostOps expand_post;
  // Project (optional): 1x1, stride 1, no pad, group 1, C -> project_out_c, packed as GEMM A.
  bool has_project = false;
  int64_t project_out_c = 0;
  const float* project_w = nullptr;
  const float* project_b = nullptr;
  ConvPostOps project_post;

  // The channels-last form (inverted_residual_nhwc_ok; pack_inverted_residual_nhwc makes its
  // weights, and the packed A of expand_w / project_w is then not read): expand and project
  // as pixel-pointer GEMMs against W^T, the depthwise conv with 16 channels as the lanes.
  bool nhwc = false;
  const float* expand_wt = nullptr;   // pack_b panels of the expand W^T (K = in_c, N = C)
  const float* project_wt = nullptr;  // pack_b panels of the project W^T (K = C, N = out_c)
  const float* dw_wn = nullptr;       // [k * k][cs] depthwise weights, tap-major, cs = C rounded to 16
  const float* dw_bn = nullptr;       // [cs] depthwise bias (zero past C)

  int64_t in_c() const { return has_expand ? expand_in_c : dw.in_c; }
  int64_t out_c() const { return has_project ? project_out_c : dw.out_c; }
};

// The input rows [need0, need1) that the depthwise conv's output rows [ob, oe) read (the
// rest of their windows is padding).
inline void inverted_residual_band_input(const ConvShape& d, int64_t ob, int64_t oe, int64_t& need0, int64_t& need1) {
  need0 = std::clamp<int64_t>(ob * d.stride_h - d.pad_top, 0, d.in_h);
  need1 = std::clamp<int64_t>((oe - 1) * d.stride_h - d.pad_top + d.k_h, need0, d.in_h);
}

// Output rows per band when none is forced, with `threads` taking a range of rows each:
// the expanded band (or, without expand, the depthwise band) about 256 KB, or one band per
// thread when the whole intermediate tensor is at most 512 KB.
int64_t inverted_residual_band_rows(const InvertedResidual& b, int threads);

// Whether the block runs channels-last on this CPU: expand and project both present, a
// depthwise conv dw_nhwc_ok takes (3x3, 5x5), the pixel-pointer GEMM tile, the
// input's channel offsets within 32 bits, at least 96 expanded channels (two GEMM panels)
// and (stride 1) output channels in whole 16s. Reads dw, has_expand, expand_in_c,
// has_project, project_out_c.
bool inverted_residual_nhwc_ok(const InvertedResidual& b);
// Floats of the channels-last weights: expand W^T, project W^T (each in the layout
// gemm_pixels_layout gives its GEMM's N), depthwise [k * k][cs], bias [cs].
struct InvertedResidualNhwcSizes {
  size_t expand_wt, project_wt, dw_wn, dw_bn;
};
InvertedResidualNhwcSizes inverted_residual_nhwc_sizes(const InvertedResidual& b);
// Packs them from the nodes' weights (expand [C][in_c], project [out_c][C], depthwise
// [C][k][k], its bias [C] or null) into the four buffers of the sizes above (a null
// destination is skipped).
void pack_inverted_residual_nhwc(const InvertedResidual& b, const float* expand_w, const float* project_w,
                                 const float* dw_w, const float* dw_b, float* expand_wt, float* project_wt,
                                 float* dw_wn, float* dw_bn);

// out[N][out_c][OH][OW] = the block applied to x[N][in_c][H][W] (batch from b.dw), plus
// `residual` (same shape as out, or null) before the last clamp. band_rows > 0 forces the
// band height (tests). out must not overlap x or the residual.
void inverted_residual(const InvertedResidual& b, const float* x, const float* residual, float* out, ThreadPool* pool,
                       int64_t band_rows = 0);
// The channels-last form, which inverted_residual runs when b.nhwc (conv_inverted_residual_nhwc.cpp).
void inverted_residual_nhwc(const InvertedResidual& b, const float* x, const float* residual, float* out,
                            ThreadPool* pool, int64_t band_rows);

}  // namespace nxrt::cpu
