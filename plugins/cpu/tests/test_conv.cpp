#include <doctest/doctest.h>

#include <limits>

#include "conv.hpp"
#include "conv_case.hpp"
#include "conv_stem_winograd.hpp"
#include "cpu_info.hpp"
#include "gemm.hpp"
#include "pooling.hpp"
#include "util.hpp"

using namespace nxrt::cpu;
using namespace nxrt::cpu::test;

static ConvShape shape(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t k, int64_t stride, int64_t pad,
                       int64_t dil, int64_t group, int64_t kw = -1) {
  ConvShape s;
  s.batch = n; s.in_c = c; s.in_h = h; s.in_w = w; s.out_c = oc; s.group = group;
  s.k_h = k; s.k_w = kw < 0 ? k : kw;
  s.stride_h = s.stride_w = stride;
  s.dil_h = s.dil_w = dil;
  s.pad_top = s.pad_left = pad;
  s.out_h = (h + 2 * pad - dil * (s.k_h - 1) - 1) / stride + 1;
  s.out_w = (w + 2 * pad - dil * (s.k_w - 1) - 1) / stride + 1;
  return s;
}

static void check_conv(const ConvShape& s, bool with_bias, ThreadPool* pool) {
  auto x = random_floats(size_t(s.batch * s.in_c * s.in_h * s.in_w), 11);
  auto w = random_floats(size_t(s.out_c * s.icg() * s.k_h * s.k_w), 12);
  auto b = random_floats(size_t(s.out_c), 13);
  std::vector<float> want(size_t(s.batch * s.out_c * s.out_h * s.out_w)), got(want.size(), 123.f);
  conv2d_reference(s, x.data(), w.data(), with_bias ? b.data() : nullptr, want.data());
  auto packed = pack_conv_weights(s, w.data());
  conv2d(s, x.data(), packed, with_bias ? b.data() : nullptr, got.data(), pool);
  INFO("C=" << s.in_c << " H=" << s.in_h << " W=" << s.in_w << " OC=" << s.out_c << " k=" << s.k_h << "x" << s.k_w
            << " stride=" << s.stride_h << " pad=" << s.pad_top << " dil=" << s.dil_h << " group=" << s.group
            << " depthwise=" << packed.depthwise);
  CHECK(worst(got, want) <= 1.0);
}

TEST_CASE("conv2d matches the reference") {
  ThreadPool pool(2);
  check_conv(shape(1, 3, 9, 11, 5, 3, 1, 1, 1, 1), true, nullptr);
  check_conv(shape(2, 4, 10, 7, 6, 3, 2, 1, 1, 1), false, nullptr);      // stride 2, batch 2
  check_conv(shape(1, 4, 12, 12, 8, 3, 1, 2, 2, 1), true, nullptr);      // dilation 2
  check_conv(shape(1, 6, 8, 9, 9, 3, 1, 1, 1, 3), true, nullptr);        // groups
  check_conv(shape(1, 8, 7, 7, 16, 1, 1, 0, 1, 1), true, &pool);         // pointwise
  check_conv(shape(1, 8, 7, 7, 16, 1, 2, 0, 1, 1), false, nullptr);      // strided 1x1
  check_conv(shape(1, 3, 30, 30, 16, 7, 2, 3, 1, 1), true, &pool);       // stem-like
  check_conv(shape(1, 16, 20, 20, 24, 3, 1, 1, 1, 1), true, &pool);      // threaded
  check_conv(shape(1, 5, 1, 17, 4, 1, 1, 0, 1, 1, 3), true, nullptr);    // 1-D as H=1 (kw=3)
}

TEST_CASE("depthwise conv matches the reference") {
  ThreadPool pool(2);
  check_conv(shape(1, 8, 12, 13, 8, 3, 1, 1, 1, 8), true, nullptr);
  check_conv(shape(1, 8, 12, 13, 8, 3, 2, 1, 1, 8), true, nullptr);
  check_conv(shape(2, 4, 9, 9, 8, 3, 1, 2, 2, 4), false, nullptr);   // channel multiplier 2, dilation
  check_conv(shape(1, 32, 28, 28, 32, 3, 1, 1, 1, 32), true, &pool);
  check_conv(shape(1, 6, 11, 11, 6, 5, 3, 2, 1, 6), true, nullptr);  // stride 3
  // The direct 3x3 kernels' column vectors: several 16-column chunks, widths that are and are
  // not multiples of 16, pads 0, 1 and 2, passes of 4, 2 and 1 rows.
  for (int64_t stride : {1, 2})
    for (int64_t pad : {0, 1, 2})
      for (int64_t w : {16, 67, 96}) check_conv(shape(1, 3, 11, w, 3, 3, stride, pad, 1, 3), true, nullptr);
  // Different strides along H and W.
  for (auto [sh, sw] : {std::pair<int64_t, int64_t>{1, 2}, {2, 1}}) {
    ConvShape s = shape(1, 4, 13, 37, 4, 3, 1, 1, 1, 4);
    s.stride_h = sh;
    s.stride_w = sw;
    s.out_h = (13 + 2 - 3) / sh + 1;
    s.out_w = (37 + 2 - 3) / sw + 1;
    check_conv(s, true, nullptr);
  }
}

TEST_CASE("direct 3x3 depthwise kernel: odd widths, strides 1 and 2, pads 0..2, threads 1 and 2") {
  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool})
    for (int64_t stride : {1, 2})
      for (int64_t pad : {0, 1, 2})
        for (int64_t w : {1, 3, 7, 15, 16, 17, 33, 36, 37, 58}) {
          if (w + 2 * pad < 3) continue;
          const int64_t h = w % 5 + 3;
          check_conv(shape(1, 5, h, w, 5, 3, stride, pad, 1, 5), pad != 2, p);
        }
  check_conv(shape(2, 3, 14, 29, 6, 3, 2, 1, 1, 3), true, &pool);  // multiplier 2, batch 2
  ConvShape s = shape(1, 4, 13, 21, 4, 3, 1, 1, 1, 4);            // stride 2 rows, 1 columns
  s.stride_h = 2;
  s.out_h = (13 + 2 - 3) / 2 + 1;
  check_conv(s, true, &pool);
  s = shape(1, 4, 13, 21, 4, 3, 2, 1, 1, 4);                      // stride 1 rows, 2 columns, asymmetric pad
  s.stride_h = 1;
  s.pad_top = 0;
  s.out_h = 13 - 3 + 1 + 1;  // end pad 1
  check_conv(s, false, nullptr);
}

TEST_CASE("asymmetric padding via begin pads") {
  ConvShape s = shape(1, 2, 7, 5, 3, 3, 2, 1, 1, 1);
  s.pad_top = 1; s.pad_left = 0;                 // pads [1,0,1,0]
  s.out_h = (7 + 2 - 3) / 2 + 1;
  s.out_w = (5 + 0 - 3) / 2 + 1;
  check_conv(s, true, nullptr);
}

// Every fused store: residual add, Relu-like clamp [0, inf), Clip-like [lo, hi], both.
static void check_conv_post(const ConvShape& s, ThreadPool* pool) {
  auto x = random_floats(size_t(s.batch * s.in_c * s.in_h * s.in_w), 21);
  auto w = random_floats(size_t(s.out_c * s.icg() * s.k_h * s.k_w), 22);
  auto b = random_floats(size_t(s.out_c), 23);
  const size_t n_out = size_t(s.batch * s.out_c * s.out_h * s.out_w);
  auto res = random_floats(n_out, 24, -2.f, 2.f);
  auto packed = pack_conv_weights(s, w.data());
  struct Case {
    bool residual, clamp;
    float lo, hi;
    bool hardswish;
  } cases[] = {{true, false, 0, 0, false},
               {false, true, 0.f, std::numeric_limits<float>::infinity(), false},
               {false, true, -0.3f, 0.6f, false},
               {true, true, 0.f, std::numeric_limits<float>::infinity(), false},
               {true, true, 0.f, 6.f, false},
               {false, false, 0, 0, true},
               {true, false, 0, 0, true}};
  for (const Case& c : cases) {
    ConvPostOps post;
    post.residual = c.residual ? res.data() : nullptr;
    post.clamp = c.clamp;
    post.lo = c.lo;
    post.hi = c.hi;
    post.hardswish = c.hardswish;
    std::vector<float> want(n_out), got(n_out, 123.f);
    conv2d_reference(s, x.data(), w.data(), b.data(), want.data(), post);
    conv2d(s, x.data(), packed, b.data(), got.data(), pool, post);
    INFO("C=" << s.in_c << " H=" << s.in_h << " W=" << s.in_w << " OC=" << s.out_c << " k=" << s.k_h << "x" << s.k_w
              << " stride=" << s.stride_h << " group=" << s.group << " residual=" << c.residual << " clamp=" << c.clamp
              << " [" << c.lo << ", " << c.hi << "] hardswish=" << c.hardswish);
    CHECK(worst(got, want) <= 1.0);
    if (c.clamp)
      for (float v : got) CHECK((v >= c.lo && v <= c.hi));
  }
}

TEST_CASE("pointwise conv with few pixels runs transposed and matches the reference") {
  ThreadPool pool(2);
  CHECK(conv_pointwise_transposed(320, 49));
  CHECK(conv_pointwise_transposed(61, 49));
  CHECK(conv_pointwise_transposed(200, 20));
  CHECK(!conv_pointwise_transposed(16, 49));
  CHECK(!conv_pointwise_transposed(256, 12544));
  CHECK(conv_pointwise_transposed(64, 49));
  CHECK(conv_pointwise_transposed(96, 49));
  CHECK(conv_pointwise_transposed(128, 49));
  CHECK(conv_pointwise_transposed(256, 196, true));
  CHECK(!conv_pointwise_transposed(256, 196));
  {
    const ConvShape ds = shape(1, 256, 14, 14, 512, 1, 2, 0, 1, 1);  // ResNet-18's last downsample
    CHECK(conv_uses_transposed(ds));
    CHECK(!conv_uses_transposed(shape(1, 128, 28, 28, 256, 1, 2, 0, 1, 1)));  // 196 pixels: gathered panels
    CHECK(conv_describe(ds, pack_conv_weights(ds, random_floats(size_t(512 * 256), 3).data()), nullptr)
              .find("strided 1x1 as transposed gemm") != std::string::npos);
  }
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    check_conv(shape(1, 37, 7, 7, 61, 1, 1, 0, 1, 1), true, p);      // N = 49, M = 61 (panel of 48 + 16)
    check_conv(shape(1, 300, 4, 5, 200, 1, 1, 0, 1, 1), false, p);   // N = 20, K > KC
    check_conv(shape(2, 19, 3, 11, 144, 1, 1, 0, 1, 1), true, p);    // batch 2, N = 33
    // Squeeze-excite's convs on one pixel: two threads take halves of the weights' panels.
    check_conv(shape(1, 168, 1, 1, 672, 1, 1, 0, 1, 1), true, p);
    check_conv(shape(1, 672, 1, 1, 168, 1, 1, 0, 1, 1), false, p);
    // 3x3 and strided convs with few pixels: x^T packed from the phase planes
    check_conv(shape(1, 20, 7, 7, 64, 3, 1, 1, 1, 1), true, p);      // N = 49
    check_conv(shape(1, 30, 13, 13, 96, 3, 2, 1, 1, 1), false, p);   // stride 2 -> 7x7, K = 270 > KC
    check_conv(shape(2, 8, 7, 7, 96, 3, 1, 2, 2, 1), true, p);       // dilation 2, batch 2
    check_conv(shape(1, 9, 7, 5, 61, 5, 1, 2, 1, 1, 3), true, p);    // 5x3 kernel, N = 49
    // 1x1 with stride 2 (ResNet's downsamples) and with a pad: x^T gathered as A.
    for (const ConvShape& ds : {shape(1, 64, 14, 14, 96, 1, 2, 0, 1, 1),    // N = 49
                                shape(2, 64, 11, 11, 96, 1, 2, 1, 1, 1),    // pad 1: border pixels 0, batch 2
                                shape(1, 40, 12, 12, 61, 1, 2, 0, 1, 1)}) {  // N = 36, 48 + 13 channels
      CHECK(conv_uses_transposed(ds));
      check_conv(ds, true, p);
    }
  }
}

TEST_CASE("conv post-ops (residual, Relu, Clip) match the reference on every path") {
  ThreadPool pool(2);
  check_conv_post(shape(1, 3, 9, 11, 5, 3, 1, 1, 1, 1), nullptr);     // im2col, odd sizes
  check_conv_post(shape(2, 4, 10, 7, 6, 3, 2, 1, 1, 1), &pool);      // strided, batch 2
  check_conv_post(shape(1, 6, 8, 9, 9, 3, 1, 1, 1, 3), nullptr);     // groups
  check_conv_post(shape(1, 17, 7, 9, 13, 1, 1, 0, 1, 1), nullptr);   // pointwise, unpacked B
  check_conv_post(shape(2, 24, 14, 14, 40, 1, 1, 0, 1, 1), &pool);  // pointwise, threaded
  check_conv_post(shape(1, 8, 7, 7, 16, 1, 2, 0, 1, 1), nullptr);    // strided 1x1 (im2col)
  check_conv_post(shape(1, 40, 7, 7, 96, 1, 1, 0, 1, 1), nullptr);   // pointwise, transposed
  check_conv_post(shape(1, 70, 6, 11, 144, 1, 1, 0, 1, 1), &pool);   // pointwise, transposed, threaded
  check_conv_post(shape(2, 160, 7, 7, 200, 1, 1, 0, 1, 1), &pool);  // same, each thread its own x^T, 3 + 2 panels
  {
    // Panels that split unevenly (160 channels: 48 + 48 | 48 + 16): threads take pixel ranges.
    ThreadPool pool3(3);
    check_conv_post(shape(1, 672, 7, 7, 160, 1, 1, 0, 1, 1), &pool);
    check_conv_post(shape(1, 96, 7, 7, 160, 1, 1, 0, 1, 1), &pool3);
    check_conv_post(shape(2, 64, 5, 9, 112, 1, 1, 0, 1, 1), &pool3);  // 45 pixels, batch 2
  }
  check_conv_post(shape(1, 40, 7, 7, 128, 3, 1, 1, 1, 1), &pool);    // 3x3, transposed, threaded
  check_conv_post(shape(1, 16, 14, 14, 96, 3, 2, 1, 1, 1), nullptr); // 3x3 stride 2, transposed
  check_conv_post(shape(1, 12, 14, 14, 256, 3, 1, 1, 1, 1), &pool);  // 3x3, N = 196, transposed
  check_conv_post(shape(1, 16, 20, 20, 24, 3, 1, 1, 1, 1), &pool);   // threaded
  check_conv_post(shape(1, 8, 12, 13, 8, 3, 1, 1, 1, 8), nullptr);   // depthwise
  check_conv_post(shape(2, 6, 11, 11, 12, 3, 2, 1, 1, 6), &pool);    // depthwise, multiplier 2, stride 2
  check_conv_post(shape(1, 5, 1, 17, 4, 1, 1, 0, 1, 1, 3), nullptr); // 1-D
}

TEST_CASE("phase-plane im2col packs the same panels as the direct unfold") {
  const ConvShape shapes[] = {shape(1, 3, 9, 11, 5, 3, 1, 1, 1, 1),   shape(1, 4, 10, 7, 6, 3, 2, 1, 1, 1),
                              shape(1, 4, 12, 12, 8, 3, 1, 2, 2, 1),  shape(1, 3, 30, 30, 16, 7, 2, 3, 1, 1),
                              shape(1, 8, 7, 7, 16, 1, 2, 0, 1, 1),   shape(1, 6, 11, 11, 6, 5, 3, 2, 1, 1),
                              shape(1, 5, 1, 17, 4, 1, 1, 0, 1, 1, 3), shape(1, 2, 57, 5, 3, 3, 1, 1, 1, 1)};
  for (const ConvShape& s : shapes) {
    auto x = random_floats(size_t(s.in_c * s.in_h * s.in_w), 31);
    const int64_t K = s.gemm_k(), N = s.out_h * s.out_w, panels = gemm_panels(N);
    std::vector<float> want(packed_b_floats(K, N), 7.f), got(want.size(), 9.f);
    im2col_pack(s, x.data(), want.data(), 0, panels);
    std::vector<float> ph(conv_phase_floats(s) * size_t(s.in_c), -5.f);
    for (int64_t c = 0; c < s.in_c; ++c)
      conv_build_phases(s, x.data() + c * s.in_h * s.in_w, ph.data() + size_t(c) * conv_phase_floats(s));
    // in two ranges, the second written relative to its first panel
    const int64_t mid = panels / 2;
    im2col_pack_phased(s, ph.data(), got.data(), 0, mid);
    im2col_pack_phased(s, ph.data(), got.data() + mid * kGemmNR * K, mid, panels);
    INFO("C=" << s.in_c << " H=" << s.in_h << " W=" << s.in_w << " k=" << s.k_h << "x" << s.k_w << " stride=" << s.stride_h
              << " dil=" << s.dil_h);
    size_t bad = 0;
    for (int64_t p = 0; p < panels; ++p)  // every float of every panel, padding columns included
      for (int64_t i = 0; i < gemm_panel_width(N, p) * K; ++i)
        bad += got[size_t(p * kGemmNR * K + i)] != want[size_t(p * kGemmNR * K + i)];
    CHECK(bad == 0);
  }
}

TEST_CASE("a dilated conv that reads only padding off its centre runs as the 1x1 conv of the centre tap") {
  // ASPP branches on a 16x16 map, padding = dilation.
  CHECK(conv_centre_tap_only(shape(1, 8, 16, 16, 8, 3, 1, 18, 18, 1)).has_value());
  CHECK(conv_centre_tap_only(shape(1, 8, 16, 16, 8, 3, 1, 16, 16, 1)).has_value());   // taps at +-16: just outside
  CHECK(!conv_centre_tap_only(shape(1, 8, 16, 16, 8, 3, 1, 15, 15, 1)).has_value());  // +-15 reaches row 15 / 0
  CHECK(!conv_centre_tap_only(shape(1, 8, 16, 16, 8, 3, 1, 12, 12, 1)).has_value());
  CHECK(!conv_centre_tap_only(shape(1, 8, 16, 16, 8, 3, 1, 1, 1, 1)).has_value());    // plain 3x3
  CHECK(!conv_centre_tap_only(shape(1, 8, 16, 16, 8, 1, 1, 0, 1, 1)).has_value());    // already 1x1
  CHECK(!conv_centre_tap_only(shape(1, 8, 16, 16, 8, 3, 1, 20, 18, 1)).has_value());  // centre not at offset 0
  ConvShape tall = shape(1, 8, 4, 40, 8, 3, 1, 10, 10, 1);                          // rows dead, columns live
  CHECK(!conv_centre_tap_only(tall).has_value());
  for (ConvShape s : {shape(2, 12, 16, 16, 20, 3, 1, 18, 18, 1), shape(1, 5, 9, 7, 6, 3, 2, 24, 24, 1),
                      shape(1, 4, 6, 6, 3, 5, 1, 14, 7, 1)}) {
    auto p = conv_centre_tap_only(s);
    REQUIRE(p.has_value());
    auto x = random_floats(size_t(s.batch * s.in_c * s.in_h * s.in_w), 51);
    auto w = random_floats(size_t(s.out_c * s.in_c * s.k_h * s.k_w), 52);
    auto b = random_floats(size_t(s.out_c), 53);
    std::vector<float> want(size_t(s.batch * s.out_c * s.out_h * s.out_w)), got(want.size(), 9.f);
    conv2d_reference(s, x.data(), w.data(), b.data(), want.data());
    const std::vector<float> w1 = conv_centre_tap_weights(s, w.data());
    conv2d(*p, x.data(), pack_conv_weights(*p, w1.data()), b.data(), got.data(), nullptr);
    INFO("H=" << s.in_h << " k=" << s.k_h << " dil=" << s.dil_h << " stride=" << s.stride_h);
    CHECK(worst(got, want) <= 1.0);
  }
}

TEST_CASE("direct 5x5 and 7x7 depthwise kernels: odd widths, strides 1 and 2, pads, post-ops, threads") {
  ThreadPool pool(2);
  for (int64_t k : {5, 7})
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool})
      for (int64_t stride : {1, 2})
        for (int64_t pad : {int64_t(0), k / 2, k / 2 + 1})
          for (int64_t w : {1, 5, 7, 8, 9, 14, 17, 33}) {
            if (w + 2 * pad < k) continue;
            const int64_t h = w % 4 + k;
            check_conv(shape(1, 3, h, w, 3, k, stride, pad, 1, 3), pad != k / 2 + 1, p);
          }
  check_conv_post(shape(1, 6, 14, 14, 6, 5, 2, 2, 1, 6), &pool);   // MobileNetV3 5x5 stride 2
  check_conv_post(shape(2, 4, 7, 7, 8, 5, 1, 2, 1, 4), nullptr);    // multiplier 2, batch 2
  check_conv_post(shape(1, 5, 9, 12, 5, 7, 1, 3, 1, 5), &pool);
}

TEST_CASE("convs that read the phase planes in place (no im2col) match the reference") {
  // On AVX2 and AVX-512 these shapes take the phase-rows path (the description says so:
  // fewer than 32 output or 8 input channels for the direct product); elsewhere the im2col
  // ones, checked the same. Row blocks split over 1-3 threads; K over one block and
  // several; partial row tiles (OC % 8) and panels; strides 1-3, dilation, a 5x3 kernel, groups.
  ThreadPool pool2(2), pool3(3);
  const ConvShape shapes[] = {
      shape(1, 3, 70, 64, 16, 7, 2, 3, 1, 1),   // a stem: K = 147 in two blocks of 128 + 19
      shape(1, 3, 67, 65, 13, 3, 2, 1, 1, 1),   // MobileNet's stem, odd sizes, OC = 13
      shape(2, 16, 23, 21, 24, 3, 1, 1, 1, 1),  // batch 2, K = 144
      shape(1, 32, 17, 45, 24, 5, 1, 2, 1, 1),  // 5x5, K = 800
      shape(1, 8, 30, 53, 12, 3, 3, 1, 1, 1),   // stride 3
      shape(1, 8, 26, 37, 8, 3, 1, 2, 2, 1),    // dilation 2
      shape(1, 6, 20, 25, 10, 5, 1, 2, 1, 1, 3),  // 5x3 kernel
      shape(1, 12, 18, 18, 20, 3, 1, 1, 1, 2),  // 2 groups
  };
  for (const ConvShape& s : shapes) {
    // The path under test (the planes' row pitch wastes at most 1/8), at least on one thread:
    // with more, a small output goes to one threaded GEMM over all the panels instead.
    if (gemm_rows_tile_active()) {
      const PackedConvWeights w = pack_conv_weights(s, random_floats(size_t(s.out_c * s.icg() * s.k_h * s.k_w), 3).data());
      CHECK(conv_describe(s, w, nullptr).find("phase-plane rows") != std::string::npos);
    }
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) check_conv(s, true, p);
  }
  // Each thread builds the phase rows of its own band of output rows: residual and activation
  // on 3 bands, and 6 bands of 2 rows where the first reads only the top padding (pad 4 > k).
  check_conv_post(shapes[0], &pool3);
  ThreadPool pool6(6);
  const ConvShape padded = shape(1, 32, 6, 100, 8, 3, 1, 4, 1, 1);
  if (gemm_rows_tile_active()) {
    const PackedConvWeights w = pack_conv_weights(padded, random_floats(size_t(8 * 32 * 9), 3).data());
    CHECK(conv_describe(padded, w, &pool6).find("phase-plane rows") != std::string::npos);
  }
  check_conv_post(padded, &pool6);
}

TEST_CASE("depthwise convs on small planes (channels as the lanes) match the reference") {
  // out_w <= 8 takes the channel-lane kernel in groups of 8 planes on AVX2, 16 on AVX-512
  // (there up to out_w 16, 16 x 16 transposes), the rest of the channels the per-plane
  // kernels: 13 to 40 channels, 3x3 / 5x5 / 7x7, strides 1 and 2, pads 0 to 3, non-square
  // planes, batch 2, every post-op, 1-3 threads.
  ThreadPool pool2(2), pool3(3);
  const ConvShape shapes[] = {
      shape(1, 24, 7, 7, 24, 3, 1, 1, 1, 24),   // MobileNetV2's last stage
      shape(1, 13, 14, 14, 13, 3, 2, 1, 1, 13),  // stride 2 to 7x7, 8 + 5 channels
      shape(2, 16, 7, 7, 16, 5, 1, 2, 1, 16),   // 5x5, batch 2
      shape(1, 16, 9, 5, 16, 7, 1, 3, 1, 16),   // 7x7 on a 9x5 plane
      shape(1, 17, 12, 15, 17, 5, 2, 2, 1, 17),  // 5x5 stride 2: 6x8 outputs
      shape(1, 8, 4, 4, 8, 3, 1, 0, 1, 8),      // no pad: 2x2 outputs
      shape(2, 40, 7, 7, 40, 3, 1, 1, 1, 40),   // 16 + 16 + 8 per image, batch 2
      shape(1, 33, 6, 3, 33, 5, 1, 2, 1, 33),   // 5x5 on a 6x3 plane, 2 x 16 + 1
      shape(1, 40, 14, 14, 40, 3, 1, 1, 1, 40),  // MobileNetV2's 14x14 stage: 16 + 16 + 8 (AVX-512 lanes)
      shape(2, 17, 14, 14, 17, 5, 1, 2, 1, 17),  // MobileNetV3's 5x5 at 14x14, batch 2
      shape(1, 16, 16, 16, 16, 3, 1, 1, 1, 16),  // out_w 16, every lane of the row
      shape(1, 16, 12, 9, 16, 7, 1, 3, 1, 16),   // 7x7 on a 12x9 plane
      shape(1, 32, 20, 18, 32, 5, 2, 2, 1, 32),  // 5x5 stride 2 to 10x9 (padded 23 x 21)
      shape(1, 16, 5, 30, 16, 3, 1, 0, 1, 16),   // no pad, 3 x 28: too wide, per plane
      shape(1, 32, 14, 13, 32, 5, 2, 2, 1, 32),  // MobileNetV3's 5x5 stride 2 to 7x7 (AVX-512 lanes)
  };
  for (const ConvShape& s : shapes)
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
      check_conv(s, true, p);
      check_conv_post(s, p);
    }
  if (active_isa() == Isa::avx2) {  // the stride-1 shapes name the lane kernel
    const PackedConvWeights w = pack_conv_weights(shapes[0], random_floats(24 * 9, 5).data());
    CHECK(conv_describe(shapes[0], w, nullptr) == "depthwise 3x3, 8 channels as the lanes avx2");
  }
  if (active_isa() == Isa::avx512) {  // and on AVX-512 the stride-2 ones too
    const PackedConvWeights w = pack_conv_weights(shapes[0], random_floats(24 * 9, 5).data());
    CHECK(conv_describe(shapes[0], w, nullptr) == "depthwise 3x3, 16 channels as the lanes avx512");
    const ConvShape& s2 = shapes[std::size(shapes) - 1];
    const PackedConvWeights w2 = pack_conv_weights(s2, random_floats(32 * 25, 5).data());
    CHECK(conv_describe(s2, w2, nullptr) == "depthwise 5x5, 16 channels as the lanes avx512");
    const PackedConvWeights w14 = pack_conv_weights(shapes[8], random_floats(40 * 9, 5).data());
    CHECK(conv_describe(shapes[8], w14, nullptr) == "depthwise 3x3, 16 channels as the lanes avx512");
  }
}

TEST_CASE("strided 1x1 convs (x gathered at the strides, then the in-place GEMM) match the reference") {
  // ResNet's downsamples and odd sizes: output widths 1-29 (the 16-lane gather's tails),
  // input widths that end right after the last tap read, pads 0-1, stride 3, batch 2, the
  // post-ops, 1-3 threads.
  ThreadPool pool2(2), pool3(3);
  const ConvShape shapes[] = {
      shape(1, 64, 56, 56, 128, 1, 2, 0, 1, 1),  // ResNet-18's first downsample
      shape(1, 24, 33, 33, 40, 1, 2, 0, 1, 1),   // 17 outputs a row: 16 + 1, width 2 * 17 - 1
      shape(2, 16, 30, 31, 24, 1, 2, 1, 1, 1),   // pad 1, batch 2
      shape(1, 12, 40, 47, 16, 1, 3, 0, 1, 1),   // stride 3
      shape(1, 20, 2, 58, 32, 1, 2, 0, 1, 1),    // one row of 29
  };
  for (const ConvShape& s : shapes)
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
      check_conv(s, true, p);
      check_conv_post(s, p);
    }
  const PackedConvWeights w = pack_conv_weights(shapes[0], random_floats(128 * 64, 5).data());
  CHECK(conv_describe(shapes[0], w, nullptr).find("strided 1x1: gather + gemm") == 0);
}

TEST_CASE("im2col as the transposed GEMM: x^T packed per thread from its own phase rows") {
  // W^T of 0.6 MB (each thread packs its own pixels from the phase rows of their output rows)
  // and of 2.4 MB (each thread packs all of x^T, and multiplies a share of W^T cut at row
  // tiles); stride 2 with pad 1, an odd pixel count, 1-3 threads (post-ops: below, and the
  // fused-store test's "3x3, N = 196, transposed"; at K = 576 its fixed tolerance is too tight).
  ThreadPool pool2(2), pool3(3);
  const ConvShape shapes[] = {
      shape(1, 64, 28, 28, 256, 3, 2, 1, 1, 1),  // 196 pixels
      shape(1, 64, 9, 9, 1024, 3, 2, 1, 1, 1),   // 25 pixels, W^T 2.4 MB
  };
  for (const ConvShape& s : shapes) {
    const PackedConvWeights w = pack_conv_weights(s, random_floats(size_t(s.out_c * s.in_c * 9), 5).data());
    // (AVX2 and AVX-512 run them as the direct product: test_conv_direct.cpp; the generic run checks this path.)
    CHECK(conv_describe(s, w, &pool2).find(conv_uses_direct(s) ? "direct" : "im2col as transposed gemm") == 0);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) check_conv(s, true, p);
  }
  // Residual and activations stored per thread from the shares of a 2.1 MB W^T (K = 144).
  check_conv_post(shape(1, 16, 9, 9, 3712, 3, 2, 1, 1, 1), &pool3);
}

TEST_CASE("conv2d_max_pool: the pool over the conv's row blocks equals conv2d then max_pool") {
  // The phase-rows convs (ResNet's stem and smaller) fuse: pools 3x3/2 pad 1, 2x2/2 in ceil
  // mode on odd sizes, 3x3/1, 1x1/2 (rows skipped), 5x5/2 pad 2; 256 output channels make
  // blocks of 3 rows (rows kept between blocks); batch 2, 1-3 threads, clamp and HardSwish.
  // A 1x1 conv does not fuse, nor anything on the generic ISA (no row-pointer micro-kernel):
  // conv2d into a buffer, then the pool.
  ThreadPool pool2(2), pool3(3);
  struct Case {
    ConvShape s;
    PoolShape ps;
    bool fuses;
  };
  const ConvShape stem = shape(1, 3, 64, 64, 16, 7, 2, 3, 1, 1), odd = shape(2, 5, 31, 45, 8, 5, 1, 2, 1, 1),
                  wide = shape(1, 4, 80, 80, 256, 3, 2, 1, 1, 1), pw = shape(1, 8, 12, 12, 16, 1, 1, 0, 1, 1);
  // 64 output channels, 5x5 or larger: the direct product's 6 x 64 tiles on AVX-512
  // (conv_stem64_ok); equal to conv2d's rows within rounding, not bit for bit.
  const ConvShape stem64 = shape(1, 3, 64, 62, 64, 7, 2, 3, 1, 1), odd64 = shape(2, 3, 75, 91, 64, 5, 2, 2, 1, 1),
                  s1_64 = shape(1, 4, 50, 61, 64, 5, 1, 2, 1, 1);
  const Case cases[] = {
      {stem, pool_over(stem, 3, 2, 1), true},       {odd, pool_over(odd, 2, 2, 0, true), true},
      {odd, pool_over(odd, 3, 1, 1), true},         {stem, pool_over(stem, 1, 2, 0), true},
      {stem, pool_over(stem, 5, 2, 2), true},       {wide, pool_over(wide, 3, 2, 1), true},
      {pw, pool_over(pw, 3, 2, 1), false},          {stem64, pool_over(stem64, 3, 2, 1), true},
      {odd64, pool_over(odd64, 2, 2, 0, true), true}, {s1_64, pool_over(s1_64, 3, 1, 1), true},
  };
  CHECK(conv_stem64_ok(stem64) == (active_isa() == Isa::avx512));
  CHECK_FALSE(conv_stem64_ok(stem));  // 16 output channels
  CHECK_FALSE(conv_stem64_ok(wide));  // 3x3
  for (const Case& c : cases) {
    const ConvShape& s = c.s;
    auto x = random_floats(size_t(s.batch * s.in_c * s.in_h * s.in_w), 61);
    auto w = random_floats(size_t(s.out_c * s.icg() * s.k_h * s.k_w), 62);
    auto b = random_floats(size_t(s.out_c), 63);
    const PackedConvWeights packed = pack_conv_weights(s, w.data());
    const size_t conv_n = size_t(s.batch * s.out_c * s.out_h * s.out_w),
                 pool_n = size_t(s.batch * s.out_c * c.ps.out[1] * c.ps.out[2]);
    for (int post_kind = 0; post_kind < 2; ++post_kind) {
      ConvPostOps post;
      if (post_kind == 0) post.clamp = true, post.lo = 0.f, post.hi = 6.f;
      else post.hardswish = true;
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
        INFO("conv OC=" << s.out_c << " " << s.out_h << "x" << s.out_w << " pool k=" << c.ps.kernel[1]
                        << " stride=" << c.ps.stride[1] << " pad=" << c.ps.pad_begin[1] << " post=" << post_kind
                        << " threads=" << (p ? p->threads() : 1));
        CHECK(conv_max_pool_fuses(s, packed, c.ps, p) == (c.fuses && active_isa() != Isa::generic));
        std::vector<float> conv_out(conv_n), want(pool_n), got(pool_n, 123.f);
        conv2d(s, x.data(), packed, b.data(), conv_out.data(), p, post);
        max_pool(c.ps, conv_out.data(), want.data(), p);
        conv2d_max_pool(s, x.data(), packed, b.data(), c.ps, got.data(), p, post);
        // Winograd over the stride phases (conv_stem_winograd_ok: the 7x7 stems, 16 and 64
        // channels here) rounds differently: a few ulp of sum |x||w| (<= 147) absolute.
        if (conv_stem_winograd_ok(s)) CHECK(worst(got, want, 1e-4, 2e-4) <= 1.0);
        else if (conv_stem64_ok(s)) CHECK(worst(got, want) <= 1.0);
        else CHECK(got == want);
      }
    }
  }
}

TEST_CASE("scale_packed_conv_input_channels packs W with its input channels scaled") {
  // Bit for bit: both sides make each weight as w * scale[c], one multiply.
  for (const ConvShape& s : {shape(1, 72, 4, 4, 40, 1, 1, 0, 1, 1), shape(1, 13, 5, 5, 21, 3, 1, 1, 1, 1),
                             shape(1, 12, 6, 6, 18, 3, 1, 1, 1, 3), shape(1, 5, 4, 4, 3, 1, 1, 0, 1, 1)}) {
    auto w = random_floats(size_t(s.out_c * s.icg() * s.k_h * s.k_w), 31);
    auto scale = random_floats(size_t(s.in_c), 32);
    std::vector<float> ws(w.size());
    const int64_t taps = s.k_h * s.k_w;
    for (int64_t o = 0; o < s.out_c; ++o)
      for (int64_t c = 0; c < s.icg(); ++c)
        for (int64_t t = 0; t < taps; ++t) {
          const size_t i = size_t((o * s.icg() + c) * taps + t);
          ws[i] = w[i] * scale[size_t(o / s.ocg() * s.icg() + c)];
        }
    std::vector<float> packed(packed_conv_floats(s)), want(packed.size()), got(packed.size(), -7.f);
    pack_conv_weights_into(s, w.data(), packed.data());
    pack_conv_weights_into(s, ws.data(), want.data());
    scale_packed_conv_input_channels(s, packed.data(), scale.data(), got.data());
    INFO("C=" << s.in_c << " OC=" << s.out_c << " k=" << s.k_h << " group=" << s.group);
    CHECK(got == want);
  }
}

TEST_CASE("conv2d_channel_scaled matches conv2d of the scaled input, both 1x1 paths, 1 and 2 threads") {
  ThreadPool pool2(2);
  // (C, H, W, OC): W scaled (784 and 196 pixels), x^T scaled (few pixels: transposed); on 2
  // threads a scaled copy per thread where W has 8+ row tiles (112 channels, and 75: a partial
  // last tile; 400 pixels: a last range of several panels).
  const int64_t shapes[][4] = {{72, 28, 28, 40}, {96, 14, 14, 24}, {120, 14, 14, 112}, {72, 20, 20, 75},
                               {64, 3, 3, 40},   {160, 7, 7, 48},  {5, 2, 3, 9}};
  for (const auto& d : shapes) {
    const ConvShape s = shape(2, d[0], d[1], d[2], d[3], 1, 1, 0, 1, 1);
    REQUIRE(conv_channel_scale_folds(s));
    auto x = random_floats(size_t(s.batch * s.in_c * s.in_h * s.in_w), 41);
    auto w = random_floats(size_t(s.out_c * s.in_c), 42);
    auto b = random_floats(size_t(s.out_c), 43);
    auto scale = random_floats(size_t(s.in_c), 44);
    auto res = random_floats(size_t(s.batch * s.out_c * s.out_h * s.out_w), 45);
    std::vector<float> xs(x.size());
    const int64_t plane = s.in_h * s.in_w;
    for (size_t i = 0; i < x.size(); ++i) xs[i] = x[i] * scale[size_t(int64_t(i) / plane % s.in_c)];
    ConvPostOps post;
    post.residual = res.data();
    post.clamp = true;
    post.lo = 0.f;
    post.hi = 1e30f;
    std::vector<float> want(res.size());
    conv2d_reference(s, xs.data(), w.data(), b.data(), want.data(), post);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
      std::vector<float> got(want.size(), 123.f);
      auto packed = pack_conv_weights(s, w.data());
      conv2d_channel_scaled(s, x.data(), packed, scale.data(), b.data(), got.data(), pool, post);
      INFO("C=" << s.in_c << " HxW=" << s.in_h << "x" << s.in_w << " OC=" << s.out_c << " transposed="
                << conv_pointwise_transposed(s.out_c, s.out_h * s.out_w) << " threads=" << (pool ? 2 : 1));
      CHECK(worst(got, want) <= 1.0);
    }
  }
  CHECK_FALSE(conv_channel_scale_folds(shape(1, 16, 14, 14, 256, 1, 1, 0, 1, 1)));  // W > x, not transposed
  CHECK_FALSE(conv_channel_scale_folds(shape(1, 16, 14, 14, 8, 1, 2, 0, 1, 1)));    // strided
  CHECK_FALSE(conv_channel_scale_folds(shape(1, 16, 14, 14, 8, 3, 1, 1, 1, 1)));    // 3x3
}
