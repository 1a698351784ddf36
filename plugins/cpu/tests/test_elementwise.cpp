#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "elementwise.hpp"
#include "util.hpp"

using namespace nxrt::cpu;
using namespace nxrt::cpu::test;

// Naive broadcasting reference through multi-indices.
template <typename T, typename F>
static std::vector<T> naive_binary(const std::vector<T>& a, std::vector<int64_t> ad, const std::vector<T>& b,
                                   std::vector<int64_t> bd, const std::vector<int64_t>& od, F f) {
  const size_t r = od.size();
  ad.insert(ad.begin(), r - ad.size(), 1);
  bd.insert(bd.begin(), r - bd.size(), 1);
  int64_t total = 1;
  for (auto d : od) total *= d;
  std::vector<T> out(static_cast<size_t>(total));
  std::vector<int64_t> idx(r, 0);
  for (int64_t o = 0; o < total; ++o) {
    int64_t ia = 0, ib = 0;
    for (size_t i = 0; i < r; ++i) {
      ia = ia * ad[i] + (ad[i] == 1 ? 0 : idx[i]);
      ib = ib * bd[i] + (bd[i] == 1 ? 0 : idx[i]);
    }
    out[size_t(o)] = f(a[size_t(ia)], b[size_t(ib)]);
    for (size_t i = r; i-- > 0;) {
      if (++idx[i] < od[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

static int64_t count(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (auto x : d) n *= x;
  return n;
}

TEST_CASE("broadcast_shape") {
  std::vector<int64_t> o;
  CHECK(broadcast_shape(std::vector<int64_t>{2, 3, 4}, std::vector<int64_t>{4}, o));
  CHECK(o == std::vector<int64_t>{2, 3, 4});
  CHECK(broadcast_shape(std::vector<int64_t>{2, 1, 4}, std::vector<int64_t>{3, 1}, o));
  CHECK(o == std::vector<int64_t>{2, 3, 4});
  CHECK(broadcast_shape(std::vector<int64_t>{}, std::vector<int64_t>{5}, o));
  CHECK(o == std::vector<int64_t>{5});
  CHECK_FALSE(broadcast_shape(std::vector<int64_t>{2, 3}, std::vector<int64_t>{4}, o));
  CHECK(broadcast_shape(std::vector<int64_t>{0, 3}, std::vector<int64_t>{1, 3}, o));
  CHECK(o == std::vector<int64_t>{0, 3});
}

TEST_CASE("binary ops broadcast like numpy") {
  ThreadPool pool(2);
  struct Case { std::vector<int64_t> a, b; };
  const Case cases[] = {{{3, 4, 5}, {3, 4, 5}}, {{3, 4, 5}, {5}},       {{3, 4, 5}, {4, 1}}, {{1, 4, 1}, {3, 1, 5}},
                        {{}, {2, 3}},           {{2, 3}, {}},           {{2, 1, 3, 1}, {1, 4, 1, 5}},
                        {{1, 64, 1, 1}, {2, 64, 7, 7}}, {{1, 128, 3072}, {3072}}, {{300, 300}, {300, 1}}};
  for (auto& c : cases) {
    std::vector<int64_t> od;
    REQUIRE(broadcast_shape(c.a, c.b, od));
    auto a = random_floats(size_t(count(c.a)), 1), b = random_floats(size_t(count(c.b)), 2, 0.5f, 2.f);
    std::vector<float> y(size_t(count(od)));
    binary(BinaryOp::Sub, a.data(), c.a, b.data(), c.b, y.data(), od, &pool);
    CHECK(y == naive_binary(a, c.a, b, c.b, od, [](float x, float z) { return x - z; }));
    binary(BinaryOp::Div, a.data(), c.a, b.data(), c.b, y.data(), od, nullptr);
    CHECK(y == naive_binary(a, c.a, b, c.b, od, [](float x, float z) { return x / z; }));
  }
}

TEST_CASE("integer binary ops") {
  std::vector<int32_t> a = {7, -7, 9, 100}, b = {2, 2, 0, -1};
  std::vector<int32_t> y(4);
  std::vector<int64_t> d = {4};
  binary(BinaryOp::Div, a.data(), d, b.data(), d, y.data(), d, nullptr);
  CHECK(y == std::vector<int32_t>{3, -3, 0, -100});
  std::vector<uint8_t> ua = {250, 3}, ub = {10, 5}, uy(2);
  std::vector<int64_t> d2 = {2};
  binary(BinaryOp::Add, ua.data(), d2, ub.data(), d2, uy.data(), d2, nullptr);
  CHECK(uy == std::vector<uint8_t>{4, 8});  // wraps like numpy uint8
  std::vector<int64_t> la = {1, 2, 3}, lb = {10}, ly(3);
  std::vector<int64_t> d3 = {3}, d1 = {1};
  binary(BinaryOp::Mul, la.data(), d3, lb.data(), d1, ly.data(), d3, nullptr);
  CHECK(ly == std::vector<int64_t>{10, 20, 30});
}

TEST_CASE("exp and erf approximations are accurate") {
  double worst_exp = 0, worst_erf = 0;
  for (float x = -87.f; x < 88.f; x += 0.01173f) {
    double want = std::exp(double(x));
    worst_exp = std::max(worst_exp, std::fabs(exp_approx(x) - want) / want);
  }
  for (float x = -6.f; x < 6.f; x += 0.000917f) {
    double want = std::erf(double(x));
    worst_erf = std::max(worst_erf, std::fabs(erf_approx(x) - want) / (1e-7 + 1e-5 * std::fabs(want)));
  }
  CHECK(worst_exp < 5e-7);
  CHECK(worst_erf <= 1.0);
  CHECK(erf_approx(1e-6f) == doctest::Approx(1.1283792e-6).epsilon(1e-5));
  CHECK(exp_approx(-100.f) == 0.f);
  CHECK(std::isinf(exp_approx(100.f)));
  CHECK(std::isnan(exp_approx(NAN)));
  CHECK(std::isnan(erf_approx(NAN)));
}

TEST_CASE("gelu chain: relative accuracy down to the far negative tail") {
  // 0.5 x (1 + erf(x / sqrt2)): with a == 1 the kernel computes 1 + erf(u) as erfc(-u),
  // which stays accurate where it is tiny (at x = -8, 1 + erf came out as 0 before).
  std::vector<float> x;
  for (float v = -9.f; v <= 9.f; v += 0.0031f) x.push_back(v);
  x.push_back(0.f);
  x.push_back(-1e-6f);
  std::vector<float> y(x.size()), g(x.size());
  ThreadPool pool(2);
  gelu_erf_chain(x.data(), y.data(), int64_t(x.size()), 1.4142135f, 1.f, 0.5f, &pool);
  double worst_rel = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double xd = x[i], want = 0.5 * xd * std::erfc(-xd / std::sqrt(2.0));
    if (want != 0) worst_rel = std::max(worst_rel, std::fabs(y[i] - want) / std::fabs(want));
    else CHECK(y[i] == 0.f);
  }
  CHECK(worst_rel < 1e-5);
  // Another a: the erf form (x (erf(x / c) + 0.25) / 2), absolute accuracy.
  gelu_erf_chain(x.data(), g.data(), int64_t(x.size()), 2.f, 0.25f, 0.5f, nullptr);
  for (size_t i = 0; i < x.size(); ++i)
    CHECK(std::fabs(g[i] - 0.5 * x[i] * (std::erf(x[i] / 2.0) + 0.25)) < 1e-6 * (1 + std::fabs(x[i])));
  const float nan_in = NAN;
  float nan_out = 0.f;
  gelu_erf_chain(&nan_in, &nan_out, 1, 1.4142135f, 1.f, 0.5f, nullptr);
  CHECK(std::isnan(nan_out));
}

TEST_CASE("unary, relu and clip") {
  auto x = random_floats(1000, 4, -3.f, 3.f);
  std::vector<float> y(1000);
  unary(UnaryOp::Sigmoid, x.data(), y.data(), 1000, nullptr);
  for (size_t i = 0; i < 1000; ++i) CHECK(y[i] == doctest::Approx(1.0 / (1.0 + std::exp(-double(x[i])))).epsilon(1e-6));
  unary(UnaryOp::Erf, x.data(), y.data(), 1000, nullptr);
  for (size_t i = 0; i < 1000; ++i) CHECK(std::fabs(y[i] - std::erf(x[i])) < 2e-7);
  relu(x.data(), y.data(), 1000, nullptr);
  for (size_t i = 0; i < 1000; ++i) CHECK(y[i] == std::max(x[i], 0.f));
  clip(x.data(), y.data(), 1000, -1.f, 0.5f, nullptr);
  for (size_t i = 0; i < 1000; ++i) CHECK(y[i] == std::min(std::max(x[i], -1.f), 0.5f));
  std::vector<int8_t> xi = {-128, -5, 0, 5, 127}, yi(5);
  clip<int8_t>(xi.data(), yi.data(), 5, int8_t(-10), int8_t(10), nullptr);
  CHECK(yi == std::vector<int8_t>{-10, -5, 0, 5, 10});
}

TEST_CASE("HardSwish and HardSigmoid match the double formulas, NaN stays NaN, threads 1 and 2") {
  ThreadPool pool(2);
  std::vector<float> x = random_floats(100003, 77, -8.f, 8.f);
  x[0] = std::numeric_limits<float>::quiet_NaN();
  x[1] = std::numeric_limits<float>::infinity();
  x[2] = -std::numeric_limits<float>::infinity();
  x[3] = -3.f;
  x[4] = 3.f;
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    std::vector<float> hs(x.size()), hsig(x.size());
    unary(UnaryOp::HardSwish, x.data(), hs.data(), int64_t(x.size()), p);
    hard_sigmoid(x.data(), hsig.data(), int64_t(x.size()), 0.2f, 0.5f, p);
    CHECK(std::isnan(hs[0]));
    CHECK(std::isnan(hsig[0]));
    CHECK(hs[1] == std::numeric_limits<float>::infinity());
    CHECK(hsig[1] == 1.f);
    CHECK(hsig[2] == 0.f);
    CHECK(hs[3] == 0.f);
    CHECK(hs[4] == 3.f);
    for (size_t i = 5; i < x.size(); ++i) {
      const double v = x[i];
      const double want_hs = v * std::max(0.0, std::min(1.0, v / 6.0 + 0.5));
      const double want_sig = std::max(0.0, std::min(1.0, 0.2 * v + 0.5));
      REQUIRE(std::fabs(hs[i] - want_hs) <= 1e-6 * (1 + std::fabs(want_hs)));
      REQUIRE(std::fabs(hsig[i] - want_sig) <= 1e-6);
    }
  }
}

TEST_CASE("Tanh is vectorised and within 1e-6 relative (1e-30 absolute) of double tanh; saturates; NaN stays NaN") {
  std::vector<float> x;
  for (float v = -20.f; v < 20.f; v += 0.000731f) x.push_back(v);
  for (float v : {0.f, -0.f, 1e-30f, -1e-30f, 1e-8f, 0.29999f, 0.3f, 0.30001f, 88.f, -88.f, 1e30f, -1e30f})
    x.push_back(v);
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(-std::numeric_limits<float>::infinity());
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  std::vector<float> y(x.size());
  unary(UnaryOp::Tanh, x.data(), y.data(), int64_t(x.size()), nullptr);
  double worst = 0;
  for (size_t i = 0; i + 1 < x.size(); ++i) {
    const double want = std::tanh(double(x[i]));
    worst = std::max(worst, std::fabs(double(y[i]) - want) / (1e-30 + 1e-6 * std::fabs(want)));
    REQUIRE(std::fabs(y[i]) <= 1.f);
  }
  CHECK(worst <= 1.0);
  CHECK(std::isnan(y.back()));
  CHECK(y[y.size() - 3] == 1.f);
  CHECK(y[y.size() - 2] == -1.f);
}
