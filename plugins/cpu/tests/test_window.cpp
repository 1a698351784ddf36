// Window functions against values worked out by hand.
#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

#include "window.hpp"

using namespace nxrt::cpu;

TEST_CASE("Hann window: periodic and symmetric") {
  std::vector<double> y(4);
  window(WindowKind::Hann, 4, true, y.data());  // sin^2(pi i / 4)
  const double want[4] = {0.0, 0.5, 1.0, 0.5};
  for (int i = 0; i < 4; ++i) CHECK(y[size_t(i)] == doctest::Approx(want[i]).epsilon(1e-12));
  std::vector<float> s(5);
  window(WindowKind::Hann, 5, false, s.data());  // N = 4 intervals: 0, .5, 1, .5, 0
  const float want5[5] = {0.f, 0.5f, 1.f, 0.5f, 0.f};
  for (int i = 0; i < 5; ++i) CHECK(s[size_t(i)] == doctest::Approx(want5[i]).epsilon(1e-6));
  CHECK(s[0] == 0.f);
}

TEST_CASE("Hamming window: 25/46 - 21/46 cos(2 pi i / N)") {
  std::vector<float> y(4);
  window(WindowKind::Hamming, 4, true, y.data());
  const float want[4] = {4.f / 46.f, 25.f / 46.f, 1.f, 25.f / 46.f};
  for (int i = 0; i < 4; ++i) CHECK(y[size_t(i)] == doctest::Approx(want[i]).epsilon(1e-6));
}

TEST_CASE("Blackman window: 0.42 - 0.5 cos(2 pi i / N) + 0.08 cos(4 pi i / N)") {
  std::vector<double> y(4);
  window(WindowKind::Blackman, 4, true, y.data());
  CHECK(y[0] == doctest::Approx(0.0).epsilon(1e-12));
  CHECK(y[1] == doctest::Approx(0.34).epsilon(1e-12));
  CHECK(y[2] == doctest::Approx(1.0).epsilon(1e-12));
  CHECK(y[3] == doctest::Approx(0.34).epsilon(1e-12));
  std::vector<double> none = {42.0};
  window(WindowKind::Blackman, 0, true, none.data());  // size 0 writes nothing
  CHECK(none[0] == 42.0);
}
