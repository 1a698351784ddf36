// FFT (radix-2 and Bluestein) against the O(n^2) DFT, and the DFT-along-an-axis
// and STFT layouts against direct sums.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <vector>

#include "fft.hpp"
#include "signal.hpp"

using namespace nxrt::cpu;

namespace {
std::vector<cplx> random_signal(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<cplx> v(n);
  for (auto& c : v) c = cplx(d(g), d(g));
  return v;
}
double max_err(const std::vector<cplx>& a, const std::vector<cplx>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::abs(a[i] - b[i]));
  return e;
}
}  // namespace

TEST_CASE("FFT matches the naive DFT for every length 1..130 and some large ones, both directions") {
  std::vector<size_t> sizes;
  for (size_t n = 1; n <= 130; ++n) sizes.push_back(n);
  for (size_t n : {255u, 256u, 257u, 509u, 1000u, 1024u}) sizes.push_back(n);
  for (size_t n : sizes) {
    const auto x = random_signal(n, unsigned(n));
    const FftPlan plan(n);
    for (bool inverse : {false, true}) {
      std::vector<cplx> got(n), want(n);
      plan.transform(x.data(), got.data(), inverse);
      naive_dft(x.data(), want.data(), n, inverse);
      INFO("n = " << n << " inverse = " << inverse);
      CHECK(max_err(got, want) < 1e-12 * double(n) + 1e-13);
    }
  }
}

TEST_CASE("FFT: in place, and inverse(forward(x)) == x") {
  for (size_t n : {8u, 10u, 97u}) {
    const auto x = random_signal(n, 7);
    const FftPlan plan(n);
    std::vector<cplx> y = x;
    plan.transform(y.data(), y.data(), false);
    plan.transform(y.data(), y.data(), true);
    CHECK(max_err(y, x) < 1e-13);
  }
}

TEST_CASE("naive DFT of an impulse and a constant") {
  std::vector<cplx> x(6, cplx(0, 0)), y(6);
  x[0] = 1;
  naive_dft(x.data(), y.data(), 6, false);
  for (auto v : y) CHECK(std::abs(v - cplx(1, 0)) < 1e-15);
  std::vector<cplx> c(6, cplx(2, 0));
  naive_dft(c.data(), y.data(), 6, false);
  CHECK(std::abs(y[0] - cplx(12, 0)) < 1e-12);
  for (size_t k = 1; k < 6; ++k) CHECK(std::abs(y[k]) < 1e-12);
}

TEST_CASE("dft_axis: middle axis with inner > 1, real input, zero padding, truncation and onesided") {
  // x viewed as [outer 2, n_in 5, inner 3, 1]
  const int64_t outer = 2, n_in = 5, inner = 3;
  std::vector<double> x(size_t(outer * n_in * inner));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(double(i) * 0.7) + 0.1 * double(i);
  for (int64_t n_fft : {5, 8, 3}) {
    for (bool onesided : {false, true}) {
      const int64_t n_out = onesided ? n_fft / 2 + 1 : n_fft;
      std::vector<double> y(size_t(outer * n_out * inner * 2));
      dft_axis(x.data(), y.data(), outer, n_in, inner, 1, n_fft, n_out, false);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          std::vector<cplx> s(size_t(n_fft), cplx(0, 0)), want(static_cast<size_t>(n_fft));
          for (int64_t j = 0; j < std::min(n_in, n_fft); ++j) s[size_t(j)] = x[size_t((o * n_in + j) * inner + i)];
          naive_dft(s.data(), want.data(), size_t(n_fft), false);
          for (int64_t k = 0; k < n_out; ++k) {
            const double* q = &y[size_t(((o * n_out + k) * inner + i) * 2)];
            CHECK(std::abs(cplx(q[0], q[1]) - want[size_t(k)]) < 1e-12);
          }
        }
    }
  }
}

TEST_CASE("dft_axis: complex inverse in float rounds once") {
  const int64_t n = 10;
  std::vector<float> x(size_t(n * 2));
  for (int64_t j = 0; j < n; ++j) x[size_t(2 * j)] = float(j);  // 0..9 + 0i
  std::vector<float> y(size_t(n * 2));
  dft_axis(x.data(), y.data(), 1, n, 1, 2, n, n, true);
  CHECK(y[0] == 4.5f);  // mean
  CHECK(std::fabs(y[1]) < 1e-12f);
  CHECK(y[2] == doctest::Approx(-0.5).epsilon(1e-6));  // ifft(0..9)[1] = -0.5 - 1.5388i
  CHECK(y[3] == doctest::Approx(-1.5388417685876268).epsilon(1e-6));
}

TEST_CASE("stft: frames of a windowed signal against the naive DFT") {
  const int64_t length = 40, step = 6, fl = 12, frames = (length - fl) / step + 1, bins = fl / 2 + 1;
  std::vector<double> x(static_cast<size_t>(length)), w(static_cast<size_t>(fl));
  for (int64_t i = 0; i < length; ++i) x[size_t(i)] = std::cos(0.3 * double(i)) + double(i % 5);
  for (int64_t i = 0; i < fl; ++i) w[size_t(i)] = 0.5 - 0.5 * std::cos(2 * std::numbers::pi * double(i) / double(fl));
  std::vector<double> y(size_t(frames * bins * 2));
  stft(x.data(), w.data(), y.data(), 1, length, 1, step, fl, frames, bins);
  for (int64_t f = 0; f < frames; ++f) {
    std::vector<cplx> s(static_cast<size_t>(fl)), want(static_cast<size_t>(fl));
    for (int64_t j = 0; j < fl; ++j) s[size_t(j)] = x[size_t(f * step + j)] * w[size_t(j)];
    naive_dft(s.data(), want.data(), size_t(fl), false);
    for (int64_t k = 0; k < bins; ++k)
      CHECK(std::abs(cplx(y[size_t((f * bins + k) * 2)], y[size_t((f * bins + k) * 2 + 1)]) - want[size_t(k)]) < 1e-12);
  }
}
