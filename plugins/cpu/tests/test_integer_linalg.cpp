// Integer linear algebra: int32 GEMM and convolution with zero points (per
// tensor, per row / column, per output channel; mixed uint8/int8) against
// hand-computed values and a plain reference, and requantization rounding.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "integer_linalg.hpp"
#include "thread_pool.hpp"

using namespace nxrt::cpu;

TEST_CASE("gemm_integer: per-row and per-column zero points, by hand") {
  // A [2][2] uint8, zero points per row {1, 2}; B [2][3] int8, per column {0, -1, 3}.
  const std::vector<uint8_t> a = {3, 5, 2, 4};
  const std::vector<int8_t> b = {1, -2, 4, -3, 0, 5};
  const std::vector<int32_t> azp = {1, 2}, bzp = {0, -1, 3};
  std::vector<int32_t> c(6);
  gemm_integer(2, 3, 2, a.data(), azp.data(), b.data(), bzp.data(), c.data(), nullptr);
  // A - azp = [[2, 4], [0, 2]]; B - bzp = [[1, -1, 1], [-3, 1, 2]]
  CHECK(c == std::vector<int32_t>{2 * 1 + 4 * -3, 2 * -1 + 4 * 1, 2 * 1 + 4 * 2, 0 + 2 * -3, 0 + 2 * 1, 0 + 2 * 2});
}

TEST_CASE("gemm_integer: the full uint8 range stays exact past float precision") {
  // 255 * 255 * 1024 = 66,585,600 > 2^24: a float accumulator would round, int32 does not.
  const int64_t K = 1024;
  std::vector<uint8_t> a(size_t(K), 255), b(size_t(K), 255);
  b[3] = 254;
  const std::vector<int32_t> zp0 = {0};
  int32_t c = 0;
  gemm_integer(1, 1, K, a.data(), zp0.data(), b.data(), zp0.data(), &c, nullptr);
  CHECK(c == 255 * 255 * (K - 1) + 255 * 254);
}

TEST_CASE("conv_integer: padding counts as the zero point, per-channel w_zero_point, groups, threads") {
  std::mt19937 g(7);
  std::uniform_int_distribution<int> du(0, 255), di(-128, 127);
  ConvShape s;
  s.batch = 2; s.in_c = 4; s.in_h = 5; s.in_w = 6; s.out_c = 6; s.group = 2;
  s.k_h = 3; s.k_w = 2; s.stride_h = 2; s.stride_w = 1; s.dil_h = 1; s.dil_w = 2;
  s.pad_top = 1; s.pad_left = 1;
  s.out_h = (5 + 2 - 3) / 2 + 1;      // pads 1 and 1
  s.out_w = (6 + 1 + 1 - 3) / 1 + 1;  // effective kernel 3
  std::vector<uint8_t> x(size_t(s.batch * s.in_c * s.in_h * s.in_w));
  std::vector<int8_t> w(size_t(s.out_c * s.icg() * s.k_h * s.k_w));
  for (auto& v : x) v = uint8_t(du(g));
  for (auto& v : w) v = int8_t(di(g));
  const int32_t x_zp = 131;
  const std::vector<int32_t> w_zp = {0, 5, -7, 1, 127, -128};
  // Reference: pad X with x_zp explicitly, then plain sums.
  std::vector<int32_t> want(size_t(s.batch * s.out_c * s.out_h * s.out_w));
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t oc = 0; oc < s.out_c; ++oc)
      for (int64_t oh = 0; oh < s.out_h; ++oh)
        for (int64_t ow = 0; ow < s.out_w; ++ow) {
          int32_t acc = 0;
          const int64_t gi = oc / s.ocg();
          for (int64_t ic = 0; ic < s.icg(); ++ic)
            for (int64_t kh = 0; kh < s.k_h; ++kh)
              for (int64_t kw = 0; kw < s.k_w; ++kw) {
                const int64_t ih = oh * s.stride_h - s.pad_top + kh * s.dil_h, iw = ow * s.stride_w - s.pad_left + kw * s.dil_w;
                const bool inside = ih >= 0 && ih < s.in_h && iw >= 0 && iw < s.in_w;
                const int32_t xv = inside ? x[size_t(((n * s.in_c + gi * s.icg() + ic) * s.in_h + ih) * s.in_w + iw)] : x_zp;
                const int32_t wv = w[size_t(((oc * s.icg() + ic) * s.k_h + kh) * s.k_w + kw)];
                acc += (xv - x_zp) * (wv - w_zp[size_t(oc)]);
              }
          want[size_t(((n * s.out_c + oc) * s.out_h + oh) * s.out_w + ow)] = acc;
        }
  ThreadPool pool(3);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    std::vector<int32_t> got(want.size(), -1);
    conv_integer(s, x.data(), x_zp, w.data(), w_zp.data(), got.data(), p);
    CHECK(got == want);
  }
}

TEST_CASE("requantize: ties to even, zero point, saturation") {
  CHECK(requantize<uint8_t>(5, 0.5, 0) == 2);    // 2.5 -> 2
  CHECK(requantize<uint8_t>(7, 0.5, 0) == 4);    // 3.5 -> 4
  CHECK(requantize<int8_t>(-5, 0.5, 0) == -2);   // -2.5 -> -2
  CHECK(requantize<uint8_t>(10, 0.25, 100) == 102);  // 2.5 -> 2, + 100
  CHECK(requantize<uint8_t>(100000, 1.0, 0) == 255);
  CHECK(requantize<uint8_t>(-3, 1.0, 1) == 0);
  CHECK(requantize<int8_t>(-1000, 1.0, 0) == -128);
  CHECK(requantize<int8_t>(1000, 1.0, -5) == 127);
}
