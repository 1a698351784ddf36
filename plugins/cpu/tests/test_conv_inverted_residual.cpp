#include <doctest/doctest.h>

#include "conv.hpp"
#include "conv_case.hpp"
#include "conv_depthwise.hpp"
#include "conv_inverted_residual.hpp"
#include "cpu_info.hpp"
#include "util.hpp"

using namespace nxrt::cpu;
using namespace nxrt::cpu::test;

namespace {

ConvShape pointwise(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc) {
  ConvShape s;
  s.batch = n; s.in_c = c; s.in_h = h; s.in_w = w; s.out_c = oc; s.out_h = h; s.out_w = w;
  return s;
}

ConvShape depthwise(int64_t n, int64_t c, int64_t h, int64_t w, int64_t stride, int64_t pad_top, int64_t pad_bottom,
                    int64_t k) {
  ConvShape s;
  s.batch = n; s.in_c = c; s.in_h = h; s.in_w = w; s.out_c = c; s.group = c;
  s.k_h = s.k_w = k;
  s.stride_h = s.stride_w = stride;
  s.pad_top = s.pad_left = pad_top;
  s.out_h = (h + pad_top + pad_bottom - k) / stride + 1;
  s.out_w = (w + 2 * pad_top - k) / stride + 1;
  return s;
}

// The block node by node with conv2d_reference against inverted_residual with `band` rows.
void check_block(int64_t n, int64_t ci, int64_t c, int64_t co, int64_t h, int64_t w, int64_t stride, int64_t pad_top,
                 int64_t pad_bottom, bool expand, bool project, bool residual, ThreadPool* pool, int64_t band,
                 int64_t k = 3) {
  if (!expand) ci = c;
  const ConvShape d = depthwise(n, c, h, w, stride, pad_top, pad_bottom, k);
  if (!dw_direct_ok(d)) {
    MESSAGE("no direct depthwise kernel for this shape on this CPU / ISA: the block is not fused here");
    return;
  }
  const ConvShape pe = pointwise(n, ci, h, w, c), pp = pointwise(n, c, d.out_h, d.out_w, co);
  if (!project) co = c;
  auto x = random_floats(size_t(n * ci * h * w), 21);
  auto we = random_floats(size_t(c * ci), 22), be = random_floats(size_t(c), 23);
  auto wd = random_floats(size_t(c * k * k), 24), bd = random_floats(size_t(c), 25);
  auto wp = random_floats(size_t(co * c), 26), bp = random_floats(size_t(co), 27);
  auto res = random_floats(size_t(n * co * d.out_h * d.out_w), 28);
  // Reference, node by node.
  std::vector<float> e(size_t(n * c * h * w)), dv(size_t(n * c * d.out_h * d.out_w)),
      want(size_t(n * co * d.out_h * d.out_w));
  const float* din = x.data();
  if (expand) {
    conv2d_reference(pe, x.data(), we.data(), be.data(), e.data(), clamp_post(0.f, 6.f));
    din = e.data();
  }
  ConvPostOps dpost = clamp_post(0.f, 6.f);
  if (!project && residual) dpost.residual = res.data();
  conv2d_reference(d, din, wd.data(), bd.data(), project ? dv.data() : want.data(), dpost);
  if (project) {
    ConvPostOps ppost;
    if (residual) ppost.residual = res.data();
    conv2d_reference(pp, dv.data(), wp.data(), bp.data(), want.data(), ppost);
  }
  // Fused.
  InvertedResidual b;
  b.dw = d;
  b.dw_w = wd.data();
  b.dw_b = bd.data();
  b.dw_post = clamp_post(0.f, 6.f);
  std::vector<float> pe_packed(packed_conv_floats(pe)), pp_packed(packed_conv_floats(pp));
  if (expand) {
    pack_conv_weights_into(pe, we.data(), pe_packed.data());
    b.has_expand = true;
    b.expand_in_c = ci;
    b.expand_w = pe_packed.data();
    b.expand_b = be.data();
    b.expand_post = clamp_post(0.f, 6.f);
  }
  if (project) {
    pack_conv_weights_into(pp, wp.data(), pp_packed.data());
    b.has_project = true;
    b.project_out_c = co;
    b.project_w = pp_packed.data();
    b.project_b = bp.data();
  }
  std::vector<float> got(want.size(), 123.f);
  inverted_residual(b, x.data(), residual ? res.data() : nullptr, got.data(), pool, band);
  INFO("n=" << n << " ci=" << ci << " c=" << c << " co=" << co << " " << h << "x" << w << " stride=" << stride
            << " pads=" << pad_top << "/" << pad_bottom << " expand=" << expand << " project=" << project
            << " residual=" << residual << " k=" << k << " band=" << band << " threads=" << (pool ? pool->threads() : 1));
  CHECK(worst(got, want) <= 1.0);
  // The channels-last form of the same block, where this CPU has it.
  if (inverted_residual_nhwc_ok(b)) {
    const InvertedResidualNhwcSizes z = inverted_residual_nhwc_sizes(b);
    std::vector<float> ewt(z.expand_wt), pwt(z.project_wt), dwn(z.dw_wn), dbn(z.dw_bn);
    pack_inverted_residual_nhwc(b, we.data(), wp.data(), wd.data(), bd.data(), ewt.data(), pwt.data(), dwn.data(),
                                dbn.data());
    b.nhwc = true;
    b.expand_w = b.project_w = nullptr;  // not read channels-last
    b.expand_wt = ewt.data();
    b.project_wt = pwt.data();
    b.dw_wn = dwn.data();
    b.dw_bn = dbn.data();
    std::fill(got.begin(), got.end(), 123.f);
    inverted_residual(b, x.data(), residual ? res.data() : nullptr, got.data(), pool, band);
    INFO("channels-last");
    CHECK(worst(got, want) <= 1.0);
  }
}

}  // namespace

TEST_CASE("inverted residual block matches the convs node by node") {
  ThreadPool pool(2);
  for (int64_t band : {1, 2, 3, 0})
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      // Expand + depthwise (stride 1 and 2) + project with residual, odd sizes.
      check_block(1, 5, 12, 5, 13, 17, 1, 1, 1, true, true, true, p, band);
      check_block(1, 6, 16, 8, 14, 19, 2, 1, 1, true, true, false, p, band);
      check_block(1, 6, 16, 8, 15, 19, 2, 1, 1, true, true, false, p, band);  // odd rows, stride 2
      check_block(2, 4, 9, 4, 11, 12, 1, 1, 1, true, true, true, p, band);    // batch 2
      // Expand + depthwise only (the depthwise output is the block's), residual on it.
      check_block(1, 3, 8, 0, 10, 33, 1, 1, 1, true, false, true, p, band);
      check_block(1, 3, 8, 0, 16, 40, 2, 0, 1, true, false, false, p, band);  // TF-style pads 0/1
      // Depthwise + project only (MobileNetV2's first block).
      check_block(1, 0, 8, 6, 18, 21, 1, 1, 1, false, true, false, p, band);
      check_block(1, 0, 8, 6, 18, 21, 2, 1, 1, false, true, true, p, band);
      // Channels-last where this CPU has it (>= 96 expanded channels): stride 1 with 16 output
      // channels, stride 2 with 5 and channels off the 16-lane vectors, TF-style pads.
      check_block(1, 8, 96, 16, 9, 13, 1, 1, 1, true, true, true, p, band);
      check_block(1, 7, 100, 5, 11, 23, 2, 1, 1, true, true, false, p, band);
      check_block(1, 4, 96, 8, 16, 40, 2, 0, 1, true, true, false, p, band);
      check_block(1, 6, 144, 32, 5, 70, 1, 1, 1, true, true, true, p, band);
      // Rows of 24+ interior outputs take the depthwise outputs 8 at a time, the rest of a row
      // in passes of 4, 2 and 1: 59 interior at stride 1 (8 x 7 + 2 + 1), 30 at stride 2
      // (8 x 3 + 4 + 2).
      check_block(1, 5, 96, 16, 4, 61, 1, 1, 1, true, true, true, p, band);
      check_block(1, 5, 96, 24, 5, 63, 2, 1, 1, true, true, false, p, band);
      // The last 64 columns on 6 x 64 tiles (gemm_pixels_tail64): projects into 64, 112 and
      // 256 channels, expands into 112 and 160; partial tiles of 3 and 5 rows.
      check_block(1, 8, 96, 64, 9, 13, 1, 1, 1, true, true, true, p, band);
      check_block(1, 6, 100, 64, 11, 15, 2, 1, 1, true, true, false, p, band);
      check_block(1, 4, 96, 256, 5, 7, 1, 1, 1, true, true, true, p, band);
      check_block(1, 8, 112, 112, 7, 9, 1, 1, 1, true, true, true, p, band);
      check_block(1, 5, 160, 48, 6, 11, 1, 1, 1, true, true, false, p, band);
      check_block(1, 8, 96, 16, 11, 13, 1, 2, 2, true, true, true, p, band, 5);  // 5x5 (MobileNetV3)
      check_block(1, 6, 112, 24, 14, 14, 2, 2, 2, true, true, false, p, band, 5);
      check_block(1, 16, 96, 32, 7, 7, 1, 2, 2, true, true, true, p, band, 5);
      // 5x5 and 7x7 depthwise (MobileNetV3, EfficientNet): halos of 3 and 5 rows.
      check_block(1, 5, 12, 6, 17, 19, 1, 2, 2, true, true, true, p, band, 5);
      check_block(1, 5, 12, 6, 17, 19, 2, 2, 2, true, false, false, p, band, 5);
      check_block(1, 4, 8, 4, 15, 22, 1, 3, 3, true, true, false, p, band, 7);
      check_block(1, 4, 8, 4, 16, 22, 2, 3, 3, true, true, false, p, band, 7);
      // Stride 2 after an expand reads split rows (dw_split_cols_ok): rows of several whole
      // chunks, even and odd widths, pads 0-2.
      check_block(1, 3, 9, 5, 12, 70, 2, 1, 1, true, true, true, p, band);
      check_block(1, 3, 9, 0, 12, 67, 2, 0, 1, true, false, false, p, band);
      check_block(1, 3, 9, 5, 11, 69, 2, 2, 2, true, true, false, p, band, 5);
      check_block(1, 3, 9, 5, 11, 48, 2, 3, 3, true, true, true, p, band, 7);
    }
}

TEST_CASE("which blocks run channels-last") {
  auto block = [](int64_t ci, int64_t c, int64_t co, int64_t hw, int64_t stride) {
    InvertedResidual b;
    b.dw = depthwise(1, c, hw, hw, stride, 1, 1, 3);
    b.has_expand = b.has_project = true;
    b.expand_in_c = ci;
    b.project_out_c = co;
    return inverted_residual_nhwc_ok(b);
  };
  if (active_isa() != Isa::avx512 && active_isa() != Isa::avx2) {
    CHECK_FALSE(block(24, 144, 32, 56, 2));
    return;
  }
  // AVX-512 and AVX2 alike: MobileNetV2's blocks, but for the 56x56 one into 24 channels (a
  // quarter of the project's multiply-adds would be padding), and MobileNetV3's 64-channel one
  // (a 16-wide panel).
  CHECK(block(16, 96, 24, 112, 2));
  CHECK(block(24, 144, 32, 56, 2));
  CHECK(block(32, 192, 32, 28, 1));
  CHECK(block(96, 576, 96, 14, 1));
  CHECK_FALSE(block(24, 144, 24, 56, 1));
  CHECK_FALSE(block(16, 64, 24, 112, 2));
  // 5x5 too (MobileNetV3's 7x7 stage), 7x7 not.
  auto block_k = [](int64_t k) {
    InvertedResidual b;
    b.dw = depthwise(1, 960, 7, 7, 1, k / 2, k / 2, k);
    b.has_expand = b.has_project = true;
    b.expand_in_c = b.project_out_c = 160;
    return inverted_residual_nhwc_ok(b);
  };
  CHECK(block_k(5));
  CHECK_FALSE(block_k(7));
}
