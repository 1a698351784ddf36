// Test helpers: deterministic random data and tolerant comparison.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace nxrt::cpu::test {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Largest |a-b| / (atol + rtol*|b|); <= 1 means within tolerance.
inline double worst(const std::vector<float>& got, const std::vector<float>& want, double rtol = 1e-4,
                    double atol = 1e-5) {
  REQUIRE(got.size() == want.size());
  double w = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;
    double e = std::fabs(double(got[i]) - double(want[i])) / (atol + rtol * std::fabs(double(want[i])));
    if (!(e <= w)) w = e;  // NaN counts as failure
  }
  return w;
}

}  // namespace nxrt::cpu::test
