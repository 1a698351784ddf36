// The inverted-residual block channels-last (conv_inverted_residual.hpp): the same bands of
// output rows as the planar form, with the expanded and depthwise rows held as [pixel][channel].
//
//   expand:    e^T = x^T We^T, a pixel-pointer GEMM (gemm_pixels_serial) reading x's NCHW rows
//              in place (pixel m: x + m, channel k: + k H W) and writing [pixel][cs] rows;
//   depthwise: dw_nhwc_rows, 16 channels per vector, every tap one load and one multiply-add;
//   project:   out^T = d^T Wp^T, the same GEMM over the depthwise rows (channel k: + k), then
//              one transposing store with the residual and the activation into NCHW.
//
// The planar form's depthwise kernel works one plane of a band at a time: on a band of 2-6
// rows most of its time goes to per-plane setup, row masks and (stride 2) even / odd permutes
// (20-45 G multiply-adds/s on MobileNetV2's shapes); channels-last it has none of those.
#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "conv_depthwise.hpp"
#include "conv_inverted_residual.hpp"
#include "gemm.hpp"
#include "scratch.hpp"

namespace nxrt::cpu {

namespace {
int64_t channel_stride(const InvertedResidual& b) { return (b.dw.in_c + 15) / 16 * 16; }
}  // namespace

bool inverted_residual_nhwc_ok(const InvertedResidual& b) {
  const ConvShape& d = b.dw;
  // The project GEMM's panels are 16 channels wide: with 24 output channels a quarter of its
  // multiply-adds are padding, which at stride 1 costs more than the depthwise conv gains
  // (MobileNetV2's 56x56 block 24 -> 144 -> 24: 307 us planar, 328 channels-last; its stride-2
  // blocks, 16 -> 96 -> 24 at 112x112 and 24 -> 144 -> 32 at 56x56: 427 -> 406, 194 -> 170).
  if (d.stride_h == 1 && b.project_out_c % 16 != 0) return false;
  // The expand GEMM likewise wants at least two full panels: MobileNetV3's 16 -> 64 -> 24
  // stride-2 block at 112x112 (one 48-wide panel and one 16-wide) ran 258 us planar, 293
  // channels-last.
  if (d.in_c < 2 * kGemmNR) return false;
  return b.has_expand && b.has_project && dw_nhwc_ok(d) && gemm_pixels_panel_active() && d.in_c > 0 &&
         double(b.expand_in_c) * double(d.in_h) * double(d.in_w) < double(INT32_MAX) &&
         double(channel_stride(b)) < double(INT32_MAX);
}

InvertedResidualNhwcSizes inverted_residual_nhwc_sizes(const InvertedResidual& b) {
  const int64_t C = b.dw.in_c, cs = channel_stride(b), CI = b.expand_in_c, CO = b.project_out_c;
  const int64_t taps = b.dw.k_h * b.dw.k_w;
  return {gemm_pixels_packed_floats(gemm_pixels_layout(C), CI, C),
          gemm_pixels_packed_floats(gemm_pixels_layout(CO), C, CO), size_t(taps * cs),
          size_t(cs)};
}

void pack_inverted_residual_nhwc(const InvertedResidual& b, const float* expand_w, const float* project_w,
                                 const float* dw_w, const float* dw_b, float* expand_wt, float* project_wt,
                                 float* dw_wn, float* dw_bn) {
  const int64_t C = b.dw.in_c, cs = channel_stride(b), CI = b.expand_in_c, CO = b.project_out_c;
  // B(k, n) = W[n][k]: pack_b's transposed read of the [out][in] weights.
  // (Each GEMM's layout from its output channels: gemm_pixels_layout.)
  if (expand_wt) gemm_pixels_pack(gemm_pixels_layout(C), expand_w, CI, true, CI, C, expand_wt);
  if (project_wt) gemm_pixels_pack(gemm_pixels_layout(CO), project_w, C, true, C, CO, project_wt);
  if (dw_wn) {
    const int64_t taps = b.dw.k_h * b.dw.k_w;
    std::fill(dw_wn, dw_wn + taps * cs, 0.f);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t t = 0; t < taps; ++t) dw_wn[t * cs + c] = dw_w[c * taps + t];
  }
  if (dw_bn) {
    std::fill(dw_bn, dw_bn + cs, 0.f);
    if (dw_b) std::copy(dw_b, dw_b + C, dw_bn);
  }
}

void inverted_residual_nhwc(const InvertedResidual& b, const float* x, const float* residual, float* out,
                            ThreadPool* pool, int64_t band_rows) {
  const ConvShape& d = b.dw;
  const int64_t C = d.in_c, H = d.in_h, W = d.in_w, OH = d.out_h, OW = d.out_w, S = d.stride_h, KH = d.k_h;
  const int64_t CI = b.expand_in_c, CO = b.project_out_c, cs = channel_stride(b);
  if (OH <= 0 || OW <= 0 || C <= 0) return;
  const double work = double(C) * (double(OH * OW) * double(KH * d.k_w + CO) + double(CI) * double(H * W));
  const int t = int(std::min<int64_t>(threads_for(pool, work), OH));
  const int64_t B = band_rows > 0 ? band_rows : inverted_residual_band_rows(b, t);
  const int64_t cap = std::min(H, B * S + KH - S);  // expanded rows a band can hold
  const GemmEpilogue expand_ep = conv_epilogue_cols(b.expand_b, b.expand_post);
  const GemmEpilogue project_ep = conv_epilogue_cols(b.project_b, {});  // the residual and activation come in the store
  const PixelsLayout expand_layout = gemm_pixels_layout(C), project_layout = gemm_pixels_layout(CO);
  for (int64_t n = 0; n < d.batch; ++n) {
    const float* xn = x + n * CI * H * W;
    float* on = out + n * CO * OH * OW;
    const float* rn = residual ? residual + n * CO * OH * OW : nullptr;
    parallel_for(t <= 1 ? nullptr : pool, t, [&](int64_t i) {
      int64_t o0, o1;
      split_range(OH, t, i, o0, o1);
      if (o0 >= o1) return;
      float* e = scratch_floats(kScratchA, size_t(cap * W * cs));  // [row][W][cs]
      float* db = scratch_floats(kScratchB, size_t(B * OW * cs));  // [pixel][cs]
      float* ct = scratch_floats(kScratchC, size_t(B * OW * CO));  // [pixel][CO]
      // The expand GEMM writes channels [0, C) only: the rest of each pixel stays zero.
      if (cs != C)
        for (int64_t p = 0; p < cap * W; ++p) std::fill(e + p * cs + C, e + (p + 1) * cs, 0.f);
      std::vector<const float*> xp(size_t(cap * W)), dp(size_t(B * OW)), rows(size_t((B - 1) * S + KH));
      std::vector<int32_t> xoff(static_cast<size_t>(CI)), doff(static_cast<size_t>(C));
      for (int64_t k = 0; k < CI; ++k) xoff[size_t(k)] = int32_t(k * H * W);
      for (int64_t k = 0; k < C; ++k) doff[size_t(k)] = int32_t(k);
      for (int64_t m = 0; m < B * OW; ++m) dp[size_t(m)] = db + m * cs;
      int64_t have0 = 0, have1 = 0;  // expanded rows [have0, have1) held in e
      for (int64_t ob = o0; ob < o1; ob += B) {
        const int64_t oe = std::min(o1, ob + B);
        int64_t need0, need1;
        inverted_residual_band_input(d, ob, oe, need0, need1);
        // Bands only move down, so have0 <= need0: keep the overlap, move it to the front.
        const int64_t keep = std::max<int64_t>(0, have1 - need0);
        if (keep > 0 && need0 != have0)
          std::memmove(e, e + (need0 - have0) * W * cs, size_t(keep * W * cs) * sizeof(float));
        const int64_t from = need0 + keep;
        if (need1 > from) {
          const int64_t P = (need1 - from) * W;
          for (int64_t m = 0; m < P; ++m) xp[size_t(m)] = xn + from * W + m;
          gemm_pixels_run(expand_layout, P, C, CI, xp.data(), xoff.data(), b.expand_wt, e + (from - need0) * W * cs,
                          cs, expand_ep);
        }
        have0 = need0;
        have1 = need1;
        const int64_t nrows = (oe - ob - 1) * S + KH;
        for (int64_t r = 0; r < nrows; ++r) {
          const int64_t iy = ob * S - d.pad_top + r;
          rows[size_t(r)] = iy >= need0 && iy < need1 ? e + (iy - need0) * W * cs : nullptr;
        }
        dw_nhwc_rows(d, rows.data(), cs, b.dw_wn, b.dw_bn, db, oe - ob, b.dw_post);
        const int64_t M = (oe - ob) * OW;
        gemm_pixels_run(project_layout, M, CO, C, dp.data(), doff.data(), b.project_wt, ct, CO, project_ep);
        transpose_store(ct, CO, 0, ob * OW, oe * OW, OH * OW, on, rn, b.project_post, 0, CO);
      }
    });
  }
}

}  // namespace nxrt::cpu
