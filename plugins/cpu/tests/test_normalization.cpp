#include <doctest/doctest.h>

#include <cmath>
#include <limits>

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

TEST_CASE("softmax rows: every length's vector body and masked tail, element by element") {
  // The row kernel (AVX-512 where the CPU has it) against the formula in double, for row
  // lengths around its 16- and 32-lane steps; -inf entries give 0, results below float's
  // normal range may flush, a NaN poisons its row only.
  for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 47, 64, 100, 128, 1000}) {
    auto x = random_floats(size_t(3 * n), uint32_t(7 + n), -30.f, 30.f);
    if (n > 1) x[0] = -std::numeric_limits<float>::infinity();
    if (n > 1) x[size_t(n + 1)] = 80.f;  // e^(x - max) underflows to 0 for the others' far tail
    std::vector<float> y(x.size());
    softmax(3, n, 1, x.data(), y.data(), nullptr);
    for (int64_t r = 0; r < 3; ++r) {
      const float* xr = x.data() + r * n;
      double m = -INFINITY, s = 0;
      for (int64_t i = 0; i < n; ++i) m = std::max(m, double(xr[i]));
      for (int64_t i = 0; i < n; ++i) s += std::exp(double(xr[i]) - m);
      for (int64_t i = 0; i < n; ++i) {
        const double want = std::exp(double(xr[i]) - m) / s;
        // float x - max is rounded: e^ of it is off by up to |x - max| 2^-24 relative.
        const double tol = want == 0 ? 0 : want * (1e-6 + 1e-7 * (m - double(xr[i]))) + 1.2e-38;
        INFO("n ", n, " row ", r, " i ", i);
        CHECK(std::fabs(y[size_t(r * n + i)] - want) <= tol);
      }
    }
  }
  std::vector<float> x = {1.f, NAN, 2.f, 1.f, 2.f, 3.f}, y(6);
  softmax(2, 3, 1, x.data(), y.data(), nullptr);
  for (int i = 0; i < 3; ++i) CHECK(std::isnan(y[size_t(i)]));
  CHECK(y[5] == doctest::Approx(std::exp(0.0) / (std::exp(-2.0) + std::exp(-1.0) + 1.0)).epsilon(1e-6));
}

TEST_CASE("instance_norm: per-plane mean and variance, epsilon, threaded") {
  // 1 image, 2 channels of 4: {1, 2, 3, 4} (mean 2.5, variance 1.25) and a constant plane.
  const std::vector<float> x = {1, 2, 3, 4, 5, 5, 5, 5};
  const float scale[2] = {2.f, 1.f}, bias[2] = {0.5f, -1.f};
  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    std::vector<float> y(8);
    instance_norm(1, 2, 4, x.data(), scale, bias, 0.25, y.data(), p);
    // (x - 2.5) * 2 / sqrt(1.25 + 0.25) + 0.5; the constant plane gives the bias.
    const std::vector<float> want = {-1.94948974f, -0.31649658f, 1.31649658f, 2.94948974f, -1.f, -1.f, -1.f, -1.f};
    CHECK(worst(y, want, 1e-6, 1e-6) <= 1.0);
  }
}

TEST_CASE("lrn: window clipped at the channel ends, even sizes") {
  const std::vector<float> x = {1, 2, 3};  // N = 1, C = 3, one pixel
  std::vector<float> y(3);
  lrn(1, 3, 1, 3, 3.0, 1.0, 1.0, x.data(), y.data());  // alpha / size = 1, beta = 1, bias = 1
  // sums of squares over {c-1, c, c+1}: 5, 14, 13
  CHECK(worst(y, {1.f / 6.f, 2.f / 15.f, 3.f / 14.f}, 1e-6, 1e-7) <= 1.0);
  lrn(1, 3, 1, 2, 2.0, 0.5, 1.0, x.data(), y.data());  // size 2: window {c, c+1}: 5, 13, 9
  CHECK(worst(y, {0.40824829f, 0.53452248f, 0.94868330f}, 1e-6, 1e-7) <= 1.0);
  // Two pixels: the window runs over channels only.
  const std::vector<float> x2 = {1, 0, 2, 0, 3, 0};  // [C = 3][2]
  std::vector<float> y2(6);
  lrn(1, 3, 2, 3, 3.0, 1.0, 1.0, x2.data(), y2.data());
  CHECK(worst(y2, {1.f / 6.f, 0.f, 2.f / 15.f, 0.f, 3.f / 14.f, 0.f}, 1e-6, 1e-7) <= 1.0);
}

TEST_CASE("mean_variance_normalization: per channel (axes 0, 2, 3) and per row") {
  ThreadPool pool(2);
  const std::vector<int64_t> dims = {1, 2, 1, 2};
  const std::vector<float> x = {1, 3, 2, 6};  // channel 0: mean 2, sd 1; channel 1: mean 4, sd 2
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    std::vector<float> y(4);
    mean_variance_normalization(x.data(), dims, {true, false, true, true}, y.data(), p);
    CHECK(worst(y, {-1.f, 1.f, -1.f, 1.f}, 1e-6, 1e-7) <= 1.0);
  }
  const std::vector<int64_t> d2 = {1, 1, 2, 2};
  const std::vector<float> x2 = {0, 2, 5, 5};  // second row has no variance: (x - mean) / 1e-9 = 0
  std::vector<float> y2(4);
  mean_variance_normalization(x2.data(), d2, {false, false, false, true}, y2.data(), nullptr);
  CHECK(worst(y2, {-1.f, 1.f, 0.f, 0.f}, 1e-6, 1e-7) <= 1.0);
}

TEST_CASE("log_softmax and hardmax along a strided axis") {
  // outer 1, axis 3, inner 2: columns {1, 2, 3} and {4, 4, 1}.
  const std::vector<float> x = {1, 4, 2, 4, 3, 1};
  std::vector<float> y(6);
  hardmax(1, 3, 2, x.data(), y.data(), nullptr);
  CHECK(y == std::vector<float>{0, 1, 0, 0, 1, 0});  // first maximum wins the tie
  log_softmax(1, 3, 2, x.data(), y.data(), nullptr);
  CHECK(worst(y, {-2.40760596f, -0.71773592f, -1.40760596f, -0.71773592f, -0.40760596f, -3.71773592f}, 1e-6, 1e-7) <= 1.0);
}
