#include <doctest/doctest.h>

#include <cmath>

#include "normalization.hpp"
#include "softmax.hpp"
#include "util.hpp"

using namespace nxrt::cpu;
using namespace nxrt::cpu::test;

TEST_CASE("layer_norm matches a double-precision reference") {
  ThreadPool pool(2);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 5}, {128, 768}, {7, 33}}) {
    auto x = random_floats(size_t(rows * cols), 1, -2.f, 3.f);
    auto sc = random_floats(size_t(cols), 2), bi = random_floats(size_t(cols), 3);
    std::vector<float> y(x.size()), want(x.size()), mean(static_cast<size_t>(rows)), inv(static_cast<size_t>(rows));
    layer_norm(rows, cols, x.data(), sc.data(), bi.data(), 1e-5f, y.data(), mean.data(), inv.data(), &pool);
    for (int64_t r = 0; r < rows; ++r) {
      double m = 0, v = 0;
      for (int64_t c = 0; c < cols; ++c) m += x[size_t(r * cols + c)];
      m /= double(cols);
      for (int64_t c = 0; c < cols; ++c) v += (x[size_t(r * cols + c)] - m) * (x[size_t(r * cols + c)] - m);
      v /= double(cols);
      const double is = 1.0 / std::sqrt(v + 1e-5);
      CHECK(mean[size_t(r)] == doctest::Approx(m).epsilon(1e-5));
      CHECK(inv[size_t(r)] == doctest::Approx(is).epsilon(1e-5));
      for (int64_t c = 0; c < cols; ++c)
        want[size_t(r * cols + c)] = float((x[size_t(r * cols + c)] - m) * is * sc[size_t(c)] + bi[size_t(c)]);
    }
    CHECK(worst(y, want) <= 1.0);
  }
}

TEST_CASE("batchnorm folding and channel affine") {
  std::vector<float> scale = {1.f, 2.f}, bias = {0.5f, -1.f}, mean = {0.1f, 0.2f}, var = {1.f, 4.f};
  std::vector<float> mul(2), add(2);
  batchnorm_fold(2, scale.data(), bias.data(), mean.data(), var.data(), 0.f, mul.data(), add.data());
  std::vector<float> x = {1, 2, 3, 4}, y(4);  // N=1, C=2, spatial=2
  channel_affine(1, 2, 2, x.data(), mul.data(), add.data(), y.data(), nullptr);
  CHECK(y[0] == doctest::Approx((1 - 0.1) * 1 + 0.5));
  CHECK(y[3] == doctest::Approx((4 - 0.2) * 2 / 2 - 1));
}

TEST_CASE("softmax rows and strided axis") {
  ThreadPool pool(2);
  // [2][3][4]: softmax over the middle axis (inner 4) and over rows (inner 1)
  auto x = random_floats(24, 5, -5.f, 5.f);
  x[0] = 1000.f;  // large values stay finite
  std::vector<float> y(24);
  softmax(2, 3, 4, x.data(), y.data(), nullptr);
  for (int o = 0; o < 2; ++o)
    for (int j = 0; j < 4; ++j) {
      double m = -1e30, s = 0;
      for (int a = 0; a < 3; ++a) m = std::max(m, double(x[size_t(o * 12 + a * 4 + j)]));
      for (int a = 0; a < 3; ++a) s += std::exp(x[size_t(o * 12 + a * 4 + j)] - m);
      for (int a = 0; a < 3; ++a)
        CHECK(y[size_t(o * 12 + a * 4 + j)] == doctest::Approx(std::exp(x[size_t(o * 12 + a * 4 + j)] - m) / s).epsilon(1e-5));
    }
  auto big = random_floats(64 * 1000, 6, -10.f, 10.f);
  std::vector<float> out(big.size());
  softmax(64, 1000, 1, big.data(), out.data(), &pool);
  for (int r = 0; r < 64; ++r) {
    double s = 0;
    for (int i = 0; i < 1000; ++i) s += out[size_t(r * 1000 + i)];
    CHECK(s == doctest::Approx(1.0).epsilon(1e-5));
  }
}
