#include <doctest/doctest.h>

#include "conv.hpp"
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
}

TEST_CASE("asymmetric padding via begin pads") {
  ConvShape s = shape(1, 2, 7, 5, 3, 3, 2, 1, 1, 1);
  s.pad_top = 1; s.pad_left = 0;                 // pads [1,0,1,0]
  s.out_h = (7 + 2 - 3) / 2 + 1;
  s.out_w = (5 + 0 - 3) / 2 + 1;
  check_conv(s, true, nullptr);
}
