// Tap-rectangle convs against the direct reference: ASPP's dilations on small maps, taps with
// no live output, no tap covering every output (asymmetric pads), strides, kernels off 3x3,
// batch, every post-op, channel counts off the 8-row tiles, 1-3 threads; the cost model, the
// conv2d dispatch (PackedConvWeights::tap_rects) and the description.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "conv.hpp"
#include "conv_case.hpp"
#include "conv_tap_rects.hpp"
#include "util.hpp"

using namespace nxrt::cpu;
using namespace nxrt::cpu::test;

namespace {

// k x k at dilation d, stride st, begin pads `pad`, end pads `pad_end`.
ConvShape dilated(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t k, int64_t d, int64_t pad,
                  int64_t pad_end, int64_t st = 1) {
  ConvShape s;
  s.batch = n; s.in_c = c; s.in_h = h; s.in_w = w; s.out_c = oc;
  s.k_h = s.k_w = k;
  s.dil_h = s.dil_w = d;
  s.stride_h = s.stride_w = st;
  s.pad_top = s.pad_left = pad;
  s.out_h = (h + pad + pad_end - (k - 1) * d - 1) / st + 1;
  s.out_w = (w + pad + pad_end - (k - 1) * d - 1) / st + 1;
  return s;
}

ConvPostOps clamp_to(float lo, float hi) {
  ConvPostOps p;
  p.clamp = true;
  p.lo = lo;
  p.hi = hi;
  return p;
}

void check(const ConvShape& s, ThreadPool* pool, const ConvPostOps& post_in = {}, bool with_residual = false,
           bool with_bias = true) {
  const ConvCase c(s, 91, post_in, with_residual, with_bias);
  const ConvPostOps& post = c.post;
  std::vector<float> got = c.output();
  AlignedFloats u(tap_rects_packed_floats(s));
  tap_rects_pack_weights(s, c.w.data(), u.data());
  conv2d_tap_rects(s, c.x.data(), u.data(), c.bias(), got.data(), pool, post);
  INFO("C=" << s.in_c << " H=" << s.in_h << " W=" << s.in_w << " OC=" << s.out_c << " k=" << s.k_h << " dil="
            << s.dil_h << " stride=" << s.stride_h << " pad=" << s.pad_top << " out=" << s.out_h << "x" << s.out_w
            << " batch=" << s.batch << " residual=" << with_residual << " clamp=" << post.clamp
            << " hardswish=" << post.hardswish);
  CHECK(worst(got, c.want, 1e-4, 1e-5) <= 1.0);
  if (post.clamp && !post.hardswish)
    for (float v : got) CHECK((v >= post.lo && v <= post.hi));
}

}  // namespace

TEST_CASE("tap-rectangle convs match the direct conv: dilations, pads, strides, batch, channels, threads") {
  ThreadPool pool2(2), pool3(3);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
    check(dilated(1, 32, 16, 16, 24, 3, 6, 6, 6), p);    // ASPP dilation 6: the centre covers all, edges 10 of 16
    check(dilated(1, 20, 16, 16, 17, 3, 12, 12, 12), p); // dilation 12: corner rectangles 4x4
    check(dilated(1, 9, 16, 16, 8, 3, 18, 18, 18), p);   // dilation 18: only the centre is live
    check(dilated(2, 8, 13, 11, 12, 3, 5, 5, 5), p);     // batch 2, odd sizes
    check(dilated(1, 6, 12, 12, 10, 5, 4, 8, 8), p);     // 5x5: taps at +-8 dead on part of the map
    // No tap covers every output (begin pad 3, end pad 9): the output opens with the bias.
    check(dilated(1, 7, 16, 16, 9, 3, 6, 3, 9), p);
    check(dilated(1, 10, 17, 15, 16, 3, 4, 4, 4, 2), p);  // stride 2
  }
}

TEST_CASE("tap-rectangle convs apply bias, residual, Relu, Clip and HardSwish") {
  ThreadPool pool(2);
  const float inf = std::numeric_limits<float>::infinity();
  check(dilated(1, 16, 16, 16, 24, 3, 6, 6, 6), nullptr, {}, true);
  check(dilated(1, 16, 16, 16, 27, 3, 12, 12, 12), &pool, clamp_to(0.f, inf), true);
  check(dilated(2, 16, 9, 9, 16, 3, 3, 3, 3), &pool, clamp_to(-0.3f, 0.6f), false, false);
  check(dilated(1, 7, 16, 16, 9, 3, 6, 3, 9), &pool, clamp_to(0.f, inf), true, false);  // no opening tap, no bias
  ConvPostOps hs;
  hs.hardswish = true;
  check(dilated(1, 24, 12, 12, 21, 3, 4, 4, 4), &pool, hs, true);
  // NaN in X propagates through the clamp, as the GEMM store does, to the outputs that read it.
  const ConvShape s = dilated(1, 8, 16, 16, 8, 3, 6, 6, 6);
  auto x = random_floats(size_t(s.in_c * s.in_h * s.in_w), 95);
  x[0] = std::numeric_limits<float>::quiet_NaN();
  auto w = random_floats(size_t(s.out_c * s.in_c * 9), 96);
  AlignedFloats u(tap_rects_packed_floats(s));
  tap_rects_pack_weights(s, w.data(), u.data());
  std::vector<float> got(size_t(s.out_c * s.out_h * s.out_w));
  conv2d_tap_rects(s, x.data(), u.data(), nullptr, got.data(), nullptr, clamp_to(0.f, inf));
  CHECK(std::isnan(got[0]));                   // (0, 0) reads x(0, 0) by the centre tap
  CHECK(std::isnan(got[size_t(6 * 16 + 6)]));  // (6, 6) by the top-left tap
  CHECK(!std::isnan(got[size_t(3 * 16 + 3)]));  // (3, 3) reads (-3..9, -3..9): not x(0, 0)
}

TEST_CASE("the cost model takes convs whose taps mostly read padding, and conv2d runs them") {
  CHECK(conv_live_tap_share(dilated(1, 256, 16, 16, 128, 3, 6, 6, 6)) == doctest::Approx(0.5625));
  CHECK(conv_live_tap_share(dilated(1, 256, 16, 16, 128, 3, 12, 12, 12)) == doctest::Approx(0.25));
  CHECK(conv_live_tap_share(dilated(1, 8, 8, 8, 8, 3, 1, 0, 0)) == doctest::Approx(1.0));
  CHECK(conv_uses_tap_rects(dilated(1, 256, 16, 16, 128, 3, 6, 6, 6)));    // ASPP
  CHECK(conv_uses_tap_rects(dilated(1, 256, 16, 16, 128, 3, 12, 12, 12)));
  CHECK(!conv_uses_tap_rects(dilated(1, 64, 56, 56, 64, 3, 1, 1, 1)));     // 98% live
  CHECK(!conv_uses_tap_rects(dilated(1, 64, 32, 32, 64, 3, 2, 2, 2)));     // 88% live
  CHECK(!conv_uses_tap_rects(dilated(1, 256, 4, 4, 256, 3, 1, 1, 1)));     // 16 outputs: too narrow
  ConvShape grouped = dilated(1, 64, 16, 16, 64, 3, 12, 12, 12);
  grouped.group = 2;
  CHECK(!conv_uses_tap_rects(grouped));

  const ConvShape s = dilated(1, 40, 16, 16, 36, 3, 12, 12, 12);
  auto x = random_floats(size_t(s.in_c * s.in_h * s.in_w), 97);
  auto w = random_floats(size_t(s.out_c * s.in_c * 9), 98);
  std::vector<float> want(size_t(s.out_c * s.out_h * s.out_w)), got(want.size(), 7.f);
  conv2d_reference(s, x.data(), w.data(), nullptr, want.data());
  AlignedFloats u(tap_rects_packed_floats(s));
  tap_rects_pack_weights(s, w.data(), u.data());
  PackedConvWeights pw;
  pw.tap_rects = u.data();
  conv2d(s, x.data(), pw, nullptr, got.data(), nullptr);
  CHECK(worst(got, want, 1e-4, 1e-5) <= 1.0);
  CHECK(conv_describe(s, pw, nullptr).find("one gemm per tap") == 0);
  CHECK(conv_describe(s, pw, nullptr).find("(25% of the taps' reads)") != std::string::npos);
}
