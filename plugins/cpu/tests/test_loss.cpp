// NLL / softmax cross-entropy math against values worked out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "loss.hpp"

using namespace nxrt::cpu;

TEST_CASE("log_softmax_classes: over C with D > 1 (layout [N][C][D])") {
  // N = 1, C = 2, D = 2: column d = 0 is {0, ln 3} -> {ln 1/4, ln 3/4}; d = 1 is {5, 5} -> ln 1/2 twice.
  const std::vector<double> x = {0.0, 5.0, std::log(3.0), 5.0};
  std::vector<double> lp(4);
  log_softmax_classes(x.data(), 1, 2, 2, lp.data());
  CHECK(lp[0] == doctest::Approx(std::log(0.25)));
  CHECK(lp[2] == doctest::Approx(std::log(0.75)));
  CHECK(lp[1] == doctest::Approx(-std::log(2.0)));
  CHECK(lp[3] == doctest::Approx(-std::log(2.0)));
}

TEST_CASE("nll_loss: weights, ignore_index, reductions, bad targets") {
  const std::vector<float> logp = {-1, -2, -3, -4, -5, -6};  // N = 2, C = 3
  const int64_t target[2] = {2, 0};
  std::vector<double> loss(2);
  double wsum = 0;
  int64_t bad = 0;
  REQUIRE(nll_loss(logp.data(), 2, 3, 1, target, static_cast<const float*>(nullptr), nullptr, loss.data(), wsum, bad));
  CHECK(loss == std::vector<double>{3.0, 4.0});
  CHECK(wsum == 2.0);
  CHECK(reduce_loss(loss.data(), 2, false, false, wsum) == 7.0);
  CHECK(reduce_loss(loss.data(), 2, true, false, wsum) == 3.5);
  const float w[3] = {1.f, 1.f, 0.5f};
  REQUIRE(nll_loss(logp.data(), 2, 3, 1, target, w, nullptr, loss.data(), wsum, bad));
  CHECK(loss == std::vector<double>{1.5, 4.0});
  CHECK(wsum == 1.5);
  CHECK(reduce_loss(loss.data(), 2, true, true, wsum) == doctest::Approx(5.5 / 1.5));
  const int64_t ignore = 0;
  REQUIRE(nll_loss(logp.data(), 2, 3, 1, target, static_cast<const float*>(nullptr), &ignore, loss.data(), wsum, bad));
  CHECK(loss == std::vector<double>{3.0, 0.0});
  CHECK(reduce_loss(loss.data(), 2, true, true, wsum) == 3.0);  // divided by the weight sum 1, not by 2
  const int64_t out_of_range[2] = {1, 3};
  CHECK_FALSE(nll_loss(logp.data(), 2, 3, 1, out_of_range, static_cast<const float*>(nullptr), nullptr, loss.data(), wsum, bad));
  CHECK(bad == 3);
  const int64_t negative[2] = {-1, 0};
  CHECK_FALSE(nll_loss(logp.data(), 2, 3, 1, negative, static_cast<const float*>(nullptr), nullptr, loss.data(), wsum, bad));
  CHECK(bad == -1);
  const int64_t ignore_neg = -1;
  CHECK(nll_loss(logp.data(), 2, 3, 1, negative, static_cast<const float*>(nullptr), &ignore_neg, loss.data(), wsum, bad));
  CHECK(loss == std::vector<double>{0.0, 4.0});
}

TEST_CASE("nll_loss: extra dims") {
  const std::vector<double> logp = {-1, -2, -3, -4};  // N = 1, C = 2, D = 2: [c][d]
  const int64_t target[2] = {1, 0};
  std::vector<double> loss(2);
  double wsum = 0;
  int64_t bad = 0;
  REQUIRE(nll_loss(logp.data(), 1, 2, 2, target, static_cast<const double*>(nullptr), nullptr, loss.data(), wsum, bad));
  CHECK(loss == std::vector<double>{3.0, 2.0});
}
