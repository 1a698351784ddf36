// The random generators: many samples of each, mean and variance within
// tolerances a broken generator (constant, wrong scale or offset, wrong
// class weights) fails; seeds reproduce, fresh seeds differ.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "random.hpp"

using namespace nxrt::cpu;

namespace {
constexpr int64_t kN = 200000;
template <typename T>
void moments(const std::vector<T>& v, double& mean, double& var) {
  mean = 0;
  for (auto x : v) mean += double(x);
  mean /= double(v.size());
  var = 0;
  for (auto x : v) var += (double(x) - mean) * (double(x) - mean);
  var /= double(v.size() - 1);
}
}  // namespace

TEST_CASE("uniform: in [low, high), mean (l+h)/2, variance (h-l)^2/12") {
  Rng g(seed_from_float(1.f));
  std::vector<float> f(kN);
  fill_uniform(g, f.data(), kN, -2.0, 6.0);
  double m, v;
  moments(f, m, v);
  CHECK(m == doctest::Approx(2.0).epsilon(0.02));
  CHECK(v == doctest::Approx(64.0 / 12).epsilon(0.02));
  for (auto x : f) REQUIRE((x >= -2.f && x < 6.f));
  std::vector<double> d(kN);
  fill_uniform(g, d.data(), kN, 0.0, 1.0);
  moments(d, m, v);
  CHECK(m == doctest::Approx(0.5).epsilon(0.01));
  CHECK(v == doctest::Approx(1.0 / 12).epsilon(0.02));
  // A tiny range just below a float boundary still stays below high.
  std::vector<float> t(1000);
  fill_uniform(g, t.data(), 1000, 1.0, 1.0 + 1e-9);
  for (auto x : t) CHECK(x < float(1.0 + 1e-9) + 1e-6f);
}

TEST_CASE("normal: mean and variance") {
  Rng g(seed_from_float(2.f));
  std::vector<double> d(kN);
  fill_normal(g, d.data(), kN, 3.0, 0.5);
  double m, v;
  moments(d, m, v);
  CHECK(std::fabs(m - 3.0) < 0.01);  // sd of the mean: 0.5 / sqrt(2e5) = 0.0011
  CHECK(v == doctest::Approx(0.25).epsilon(0.02));
  std::vector<float> f(kN);
  fill_normal(g, f.data(), kN, 0.0, 1.0);
  moments(f, m, v);
  CHECK(std::fabs(m) < 0.01);
  CHECK(v == doctest::Approx(1.0).epsilon(0.02));
  int64_t beyond2 = 0;  // P(|z| > 2) = 0.0455
  for (auto x : f) beyond2 += std::fabs(x) > 2;
  CHECK(double(beyond2) / kN == doctest::Approx(0.0455).epsilon(0.05));
}

TEST_CASE("bernoulli: frequency of ones is p; p = 0 and 1 are exact") {
  Rng g(seed_from_float(3.f));
  for (double p : {0.0, 0.1, 0.5, 0.9, 1.0}) {
    int64_t ones = 0;
    for (int64_t i = 0; i < kN; ++i) ones += g.bernoulli(p);
    const double sd = std::sqrt(p * (1 - p) / kN);
    CHECK(std::fabs(double(ones) / kN - p) <= 6 * sd);
    if (p == 0.0) CHECK(ones == 0);
    if (p == 1.0) CHECK(ones == kN);
  }
}

TEST_CASE("multinomial: class frequencies follow softmax(logits)") {
  Rng g(seed_from_float(4.f));
  const double logits[4] = {std::log(0.1), std::log(0.2), std::log(0.3), std::log(0.4) + 0.0};
  std::vector<int64_t> out(kN);
  REQUIRE(multinomial(g, logits, 4, kN, out.data()));
  std::vector<double> freq(4, 0);
  for (auto c : out) {
    REQUIRE((c >= 0 && c < 4));
    freq[size_t(c)] += 1.0 / kN;
  }
  for (int c = 0; c < 4; ++c) CHECK(std::fabs(freq[size_t(c)] - 0.1 * (c + 1)) < 0.006);  // 6 sd at p = 0.4
  // Shifted logits give the same distribution; -inf classes never come out.
  const double shifted[3] = {1000.0, -INFINITY, 1000.0};
  std::vector<int32_t> o32(1000);
  REQUIRE(multinomial(g, shifted, 3, 1000, o32.data()));
  int64_t zeros = 0;
  for (auto c : o32) {
    CHECK(c != 1);
    zeros += c == 0;
  }
  CHECK((zeros > 400 && zeros < 600));
  const double bad[2] = {0.0, NAN};
  CHECK_FALSE(multinomial(g, bad, 2, 1, o32.data()));
}

TEST_CASE("dropout_keep: keeps 1 - ratio of the elements") {
  Rng g(seed_from_int(0));
  std::vector<char> keep(kN);
  for (double ratio : {0.25, 0.5, 0.75}) {
    dropout_keep(g, ratio, kN, reinterpret_cast<bool*>(keep.data()));
    int64_t kept = 0;
    for (auto k : keep) kept += k != 0;
    CHECK(double(kept) / kN == doctest::Approx(1 - ratio).epsilon(0.02));
  }
}

TEST_CASE("seeds: equal seeds reproduce, different and fresh seeds differ") {
  auto draw = [](uint64_t s) {
    Rng g(s);
    std::vector<double> v(16);
    fill_uniform(g, v.data(), 16, 0.0, 1.0);
    return v;
  };
  CHECK(draw(seed_from_float(0.f)) == draw(seed_from_float(0.f)));
  CHECK(draw(seed_from_float(0.f)) != draw(seed_from_float(1.f)));
  CHECK(draw(seed_from_int(7)) == draw(seed_from_int(7)));
  const uint64_t a = fresh_seed(), b = fresh_seed();
  CHECK(a != b);
  CHECK(draw(a) != draw(b));
}
