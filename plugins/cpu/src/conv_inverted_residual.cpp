#include "conv_inverted_residual.hpp"

#include <algorithm>
#include <cstring>

#include "conv_depthwise.hpp"
#include "gemm.hpp"
#include "scratch.hpp"

namespace nxrt::cpu {

namespace {
constexpr int64_t kBandBytes = 256 << 10;
constexpr int64_t kWholeBytes = 512 << 10;
constexpr int64_t kMinBandColumns = 4 * 48;  // four GEMM panels
}

int64_t inverted_residual_band_rows(const InvertedResidual& b, int threads) {
  const ConvShape& d = b.dw;
  const int64_t S = d.stride_h, halo = d.k_h - S;
  const int64_t per_thread = (d.out_h + threads - 1) / std::max(1, threads);
  // A block whose intermediate tensor fits in L2 as a whole: one band per thread (smaller
  // bands only shorten the GEMMs' rows and repeat the per-plane setup).
  const int64_t whole = (b.has_expand ? d.in_c * d.in_h * d.in_w : d.out_c * d.out_h * d.out_w) * 4;
  if (whole <= kWholeBytes) return std::max<int64_t>(1, per_thread);
  int64_t band = 0;
  if (b.has_expand) {
    const int64_t rows = std::max<int64_t>(d.k_h, kBandBytes / std::max<int64_t>(1, d.in_c * d.in_w * 4));
    band = (rows - halo) / S;
  } else {
    band = kBandBytes / std::max<int64_t>(1, d.out_c * d.out_w * 4);
  }
  // At least kMinBandColumns new columns for each GEMM of a band: on narrow maps with many
  // channels (14 wide, 672 channels) 256 KB is one row, and GEMMs of 28 columns ran the
  // block 20% slower than node by node.
  const int64_t min_band = (kMinBandColumns + S * d.in_w - 1) / std::max<int64_t>(1, S * d.in_w);
  return std::clamp<int64_t>(std::max(band, min_band), 1, std::max<int64_t>(1, per_thread));
}

void inverted_residual(const InvertedResidual& b, const float* x, const float* residual, float* out, ThreadPool* pool,
                       int64_t band_rows) {
  const ConvShape& d = b.dw;
  const int64_t C = d.in_c, H = d.in_h, W = d.in_w, OH = d.out_h, OW = d.out_w, S = d.stride_h, KH = d.k_h;
  const int64_t CI = b.in_c(), CO = b.out_c();
  if (OH <= 0 || OW <= 0 || C <= 0) return;
  if (b.nhwc) return inverted_residual_nhwc(b, x, residual, out, pool, band_rows);
  double work = double(C) * double(OH * OW) * double(d.k_h * d.k_w);
  if (b.has_expand) work += double(C) * double(CI) * double(H * W);
  if (b.has_project) work += double(CO) * double(C) * double(OH * OW);
  const int t = int(std::min<int64_t>(threads_for(pool, work), OH));
  const int64_t B = band_rows > 0 ? band_rows : inverted_residual_band_rows(b, t);
  const int64_t cap = B * S + KH - S;  // expanded rows a band can hold
  // Stride 2 after an expand: the GEMM reads x's rows with their columns split into even and
  // odd ones, so it writes the expanded rows that way and every depthwise tap is a plain load
  // (no shuffles; 64 channels 112x112 -> 56x56 3x3: see the commit).
  const bool split = b.has_expand && dw_split_cols_ok(d);
  for (int64_t n = 0; n < d.batch; ++n) {
    const float* xn = x + n * CI * H * W;
    float* on = out + n * CO * OH * OW;
    const float* rn = residual ? residual + n * CO * OH * OW : nullptr;
    parallel_for(t <= 1 ? nullptr : pool, t, [&](int64_t i) {
      int64_t o0, o1;
      split_range(OH, t, i, o0, o1);
      float* e = b.has_expand ? scratch_floats(kScratchA, size_t(C * cap * W)) : nullptr;
      float* db = b.has_project ? scratch_floats(kScratchB, size_t(C * B * OW)) : nullptr;
      int64_t have0 = 0, have1 = 0;  // expanded rows [have0, have1) held in e
      for (int64_t ob = o0; ob < o1; ob += B) {
        const int64_t oe = std::min(o1, ob + B);
        int64_t need0, need1;
        inverted_residual_band_input(d, ob, oe, need0, need1);
        const float* src = xn + need0 * W;
        int64_t src_stride = H * W;
        if (b.has_expand) {
          // Bands only move down, so have0 <= need0: keep the overlap, move it to the front.
          const int64_t keep = std::max<int64_t>(0, have1 - need0);
          if (keep > 0 && need0 != have0)
            for (int64_t c = 0; c < C; ++c)
              std::memmove(e + c * cap * W, e + c * cap * W + (need0 - have0) * W, size_t(keep * W) * sizeof(float));
          const int64_t from = need0 + keep;
          if (need1 > from) {
            const int64_t rows = need1 - from;
            const float* bx = xn + from * W;
            int64_t ldb = H * W;
#if defined(__x86_64__)
            if (split) {
              float* xs = scratch_floats(kScratchC, size_t(CI * rows * W));
              for (int64_t ci = 0; ci < CI; ++ci)
                for (int64_t r = 0; r < rows; ++r) dw_split_row_avx2(bx + ci * H * W + r * W, W, xs + (ci * rows + r) * W);
              bx = xs;
              ldb = rows * W;
            }
#endif
            gemm_packed_a(C, rows * W, CI, b.expand_w, bx, ldb, e + (from - need0) * W, cap * W,
                          conv_epilogue(b.expand_b, b.expand_post), nullptr);
          }
          have0 = need0;
          have1 = need1;
          src = e;
          src_stride = cap * W;
        }
        // The band as a plane of its own: rows [need0, need1), pad_top moved to match.
        ConvShape sd = d;
        sd.batch = 1;
        sd.in_h = need1 - need0;
        sd.out_h = oe - ob;
        sd.pad_top = d.pad_top + need0 - ob * S;
        float* dst = b.has_project ? db : on + ob * OW;
        const int64_t dst_stride = b.has_project ? B * OW : OH * OW;
        const float* dres = !b.has_project && rn ? rn + ob * OW : nullptr;
        DwPlanes p;
        p.count = C;
        p.in = src;
        p.in_stride = src_stride;
        p.w = b.dw_w;
        p.bias = b.dw_b;
        p.out = dst;
        p.out_stride = dst_stride;
        p.res = dres;
        p.res_stride = OH * OW;
        p.split_cols = split;
        p.prefetch_next = !b.has_expand;
        dw_planes(sd, p, b.dw_post);
        if (b.has_project) {
          const GemmEpilogue ep =
              conv_epilogue(b.project_b, b.project_post, rn ? rn + ob * OW : nullptr, OH * OW);
          gemm_packed_a(CO, (oe - ob) * OW, C, b.project_w, db, B * OW, on + ob * OW, OH * OW, ep, nullptr);
        }
      }
    });
  }
}

}  // namespace nxrt::cpu
