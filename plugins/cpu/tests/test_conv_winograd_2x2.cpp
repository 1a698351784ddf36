// Winograd F(2x2, 3x3) against the direct reference: odd sizes (partial tiles), pads 0..2
// and asymmetric, batch, every post-op, channel counts off the 8-lane groups, 1-3 threads,
// the cost model and the conv2d dispatch (PackedConvWeights::winograd_2x2); both layouts (the
// tiles as GEMM rows, or at most 16 along the AVX-512 lanes).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "conv.hpp"
#include "conv_case.hpp"
#include "conv_winograd.hpp"
#include "conv_winograd_2x2.hpp"
#include "conv_winograd_2x2_lanes.hpp"
#include "cpu_info.hpp"
#include "util.hpp"

using namespace nxrt::cpu;
using namespace nxrt::cpu::test;

namespace {

ConvShape shape3x3(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t pad) {
  ConvShape s;
  s.batch = n; s.in_c = c; s.in_h = h; s.in_w = w; s.out_c = oc;
  s.k_h = s.k_w = 3;
  s.pad_top = s.pad_left = pad;
  s.out_h = h + 2 * pad - 2;
  s.out_w = w + 2 * pad - 2;
  return s;
}

ConvPostOps clamp_to(float lo, float hi) {
  ConvPostOps p;
  p.clamp = true;
  p.lo = lo;
  p.hi = hi;
  return p;
}

// |got - want| against the rounding a float32 sum of C*9 products can carry (the
// transforms add a few terms per product), relative to sum |x||w| <= 9 C.
void check(const ConvShape& s, ThreadPool* pool, const ConvPostOps& post_in = {}, bool with_residual = false) {
  const ConvCase c(s, 61, post_in, with_residual);
  const ConvPostOps& post = c.post;
  const std::vector<float>& want = c.want;
  const size_t n_out = want.size();
  std::vector<float> got = c.output();
  AlignedFloats u(winograd_2x2_packed_floats(s));
  winograd_2x2_pack_weights(s, c.w.data(), u.data());
  conv2d_winograd_2x2(s, c.x.data(), u.data(), c.bias(), got.data(), pool, post);
  const double tol = 1e-6 * 9.0 * double(s.in_c);
  double max_err = 0;
  for (size_t i = 0; i < n_out; ++i) max_err = std::max(max_err, std::fabs(double(got[i]) - double(want[i])));
  INFO("C=" << s.in_c << " H=" << s.in_h << " W=" << s.in_w << " OC=" << s.out_c << " pad=" << s.pad_top << "/"
            << s.pad_left << " batch=" << s.batch << " residual=" << with_residual << " clamp=" << post.clamp
            << " hardswish=" << post.hardswish);
  CHECK(max_err <= tol);
  if (post.clamp && !post.hardswish)
    for (float v : got) CHECK((v >= post.lo && v <= post.hi));
}

}  // namespace

TEST_CASE("Winograd F(2x2,3x3) matches the direct conv: partial tiles, pads, batch, channels, threads") {
  ThreadPool pool2(2), pool3(3);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
    check(shape3x3(1, 64, 7, 7, 64, 1), p);      // ResNet's 7x7 stage: 4 x 4 tiles, the last row and column half
    check(shape3x3(1, 16, 8, 8, 16, 1), p);      // whole tiles, 16 tiles: two full row groups
    check(shape3x3(1, 17, 9, 6, 19, 1), p);      // odd channel counts: a scalar tail after the 8-lane groups
    check(shape3x3(2, 8, 9, 10, 24, 0), p);      // no pad, batch 2
    check(shape3x3(1, 5, 5, 7, 6, 2), p);        // pad 2: a zero ring beyond the taps
    check(shape3x3(1, 3, 3, 3, 2, 0), p);        // one output pixel
    check(shape3x3(1, 40, 12, 13, 33, 1), p);    // 42 tiles: row groups of 8 and a partial one
    check(shape3x3(1, 5, 4, 4, 6, 2), p);        // 9 tiles with pad 2 (AVX-512: along the lanes)
  }
  // Asymmetric pads: [1, 0] begin, end pad 1 on the right; 25 tiles, then 9 (AVX-512: the
  // tiles as rows, then along the lanes).
  for (int64_t h : {10, 6}) {
    ConvShape s = shape3x3(1, 12, h, h + 1, 20, 1);
    s.pad_left = 0;
    s.out_w = h + 1 - 2 + 1;
    check(s, &pool2);
  }
}

TEST_CASE("Winograd F(2x2,3x3) applies bias, residual, Relu, Clip and HardSwish in its store") {
  ThreadPool pool(2);
  const float inf = std::numeric_limits<float>::infinity();
  check(shape3x3(1, 16, 7, 7, 24, 1), nullptr, {}, true);
  check(shape3x3(1, 16, 7, 7, 27, 1), &pool, clamp_to(0.f, inf), true);
  check(shape3x3(2, 16, 9, 9, 16, 1), &pool, clamp_to(-0.3f, 0.6f), false);
  check(shape3x3(2, 16, 7, 7, 40, 1), &pool, clamp_to(0.f, inf), true);  // batch 2 with a residual
  ConvPostOps hs;
  hs.hardswish = true;
  check(shape3x3(1, 24, 6, 7, 21, 1), &pool, hs, true);
  // NaN in X propagates through the clamp (max / min keep it), as the GEMM store does.
  ConvShape s = shape3x3(1, 8, 6, 6, 8, 1);
  auto x = random_floats(size_t(s.in_c * s.in_h * s.in_w), 71);
  x[0] = std::numeric_limits<float>::quiet_NaN();
  auto w = random_floats(size_t(s.out_c * s.in_c * 9), 72);
  AlignedFloats u(winograd_2x2_packed_floats(s));
  winograd_2x2_pack_weights(s, w.data(), u.data());
  std::vector<float> got(size_t(s.out_c * s.out_h * s.out_w));
  conv2d_winograd_2x2(s, x.data(), u.data(), nullptr, got.data(), nullptr, clamp_to(0.f, inf));
  CHECK(std::isnan(got[0]));                  // (0, 0) reads x(0, 0)
  CHECK(!std::isnan(got[size_t(5 * 6 + 5)]));  // (5, 5) does not
}

TEST_CASE("the cost model gives F(2x2,3x3) the small maps F(4x4,3x3) leaves, and conv2d runs it") {
  // ResNet's last stage: 16 tiles for 49 outputs (on AVX-512 along the lanes); a 6x6 map
  // (9 tiles for 36 outputs) wastes too many lanes there.
  CHECK(conv_uses_winograd_2x2(shape3x3(1, 512, 7, 7, 512, 1)));
  CHECK(conv_uses_winograd_2x2(shape3x3(1, 256, 6, 6, 256, 1)) == (active_isa() != Isa::avx512));
  CHECK(conv_uses_winograd_2x2(shape3x3(1, 256, 10, 10, 256, 1)));
  CHECK(!conv_uses_winograd_2x2(shape3x3(1, 256, 14, 14, 256, 1)));  // F(4x4) has the tiles there
  CHECK(!conv_uses_winograd_2x2(shape3x3(1, 32, 7, 7, 32, 1)));      // thin: the transforms would dominate
  // 64 input channels: F(2x2) on AVX2 only (on AVX-512 the direct product from 128 down).
  CHECK(conv_uses_winograd_2x2(shape3x3(1, 64, 10, 10, 64, 1)) == (active_isa() != Isa::avx512));
  // The layout: at most 16 tiles along the AVX-512 lanes, else the tiles as GEMM rows (the
  // checks above run both on AVX-512 machines).
  CHECK(winograd_2x2_lanes_fit(shape3x3(1, 512, 7, 7, 512, 1)) == (active_isa() == Isa::avx512));
  CHECK(!winograd_2x2_lanes_fit(shape3x3(1, 256, 10, 10, 256, 1)));
  ConvShape strided = shape3x3(1, 512, 14, 14, 512, 1);
  strided.stride_h = strided.stride_w = 2;
  strided.out_h = strided.out_w = 7;
  CHECK(!conv_uses_winograd_2x2(strided));
  ConvShape dilated = shape3x3(1, 256, 9, 9, 256, 2);
  dilated.dil_h = dilated.dil_w = 2;
  dilated.out_h = dilated.out_w = 9;
  CHECK(!conv_uses_winograd_2x2(dilated));

  const ConvShape s = shape3x3(1, 128, 10, 10, 72, 1);
  CHECK(conv_uses_winograd_2x2(s));
  auto x = random_floats(size_t(s.in_c * s.in_h * s.in_w), 81);
  auto w = random_floats(size_t(s.out_c * s.in_c * 9), 82);
  std::vector<float> want(size_t(s.out_c * s.out_h * s.out_w)), got(want.size(), 7.f);
  conv2d_reference(s, x.data(), w.data(), nullptr, want.data());
  AlignedFloats u(winograd_2x2_packed_floats(s));
  winograd_2x2_pack_weights(s, w.data(), u.data());
  PackedConvWeights pw;
  pw.winograd_2x2 = u.data();
  conv2d(s, x.data(), pw, nullptr, got.data(), nullptr);
  CHECK(worst(got, want, 1e-3, 2e-4) <= 1.0);
  CHECK(conv_describe(s, pw, nullptr).find("winograd F(2x2,3x3)") == 0);
}
