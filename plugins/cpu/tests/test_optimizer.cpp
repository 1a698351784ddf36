// One Adagrad / Momentum / Adam step against values worked out by hand.
#include <doctest/doctest.h>

#include "optimizer.hpp"

using namespace nxrt::cpu;

TEST_CASE("adagrad_step: rate decay and the L2 term") {
  const float x = 1.f, g = 2.f, h = 0.f;
  float xo = 0, ho = 0;
  adagrad_step(1, &x, &g, &h, 0.1, 0, 0.0, 0.0, 0.0, &xo, &ho);
  CHECK(ho == 4.f);                        // h + g^2
  CHECK(xo == doctest::Approx(0.9f));      // 1 - 0.1 * 2 / 2
  adagrad_step(1, &x, &g, &h, 0.1, 1, 1.0, 0.0, 0.0, &xo, &ho);
  CHECK(xo == doctest::Approx(0.95f));     // rate 0.1 / (1 + 1 * 1)
  adagrad_step(1, &x, &g, &h, 0.1, 0, 0.0, 0.5, 0.0, &xo, &ho);
  CHECK(ho == doctest::Approx(6.25f));     // gradient 0.5 * 1 + 2
  CHECK(xo == doctest::Approx(0.9f));      // 1 - 0.1 * 2.5 / 2.5
}

TEST_CASE("momentum_step: first step, later steps, nesterov") {
  const float x = 1.f, g = 2.f, v = 1.f;
  float xo = 0, vo = 0;
  momentum_step(1, &x, &g, &v, 0.1, 0, 0.5, 0.25, 0.0, false, &xo, &vo);
  CHECK(vo == doctest::Approx(2.5f));   // 0.5 * 1 + 1 * 2 (beta is 1 on step 0)
  CHECK(xo == doctest::Approx(0.75f));  // 1 - 0.1 * 2.5
  momentum_step(1, &x, &g, &v, 0.1, 1, 0.5, 0.25, 0.0, false, &xo, &vo);
  CHECK(vo == doctest::Approx(1.0f));   // 0.5 * 1 + 0.25 * 2
  CHECK(xo == doctest::Approx(0.9f));
  momentum_step(1, &x, &g, &v, 0.1, 1, 0.5, 0.25, 0.0, true, &xo, &vo);
  CHECK(xo == doctest::Approx(0.75f));  // 1 - 0.1 * (2 + 0.5 * 1)
}

TEST_CASE("adam_step: moments, bias correction, norm_post") {
  const float x = 1.f, g = 2.f, v = 0.f, h = 0.f;
  float xo = 0, vo = 0, ho = 0;
  adam_step(1, &x, &g, &v, &h, 0.1, 0, 0.5, 0.75, 0.0, 0.0, 0.0, &xo, &vo, &ho);
  CHECK(vo == doctest::Approx(1.f));   // 0.5 * 2
  CHECK(ho == doctest::Approx(1.f));   // 0.25 * 4
  CHECK(xo == doctest::Approx(0.9f));  // 1 - 0.1 * 1 / 1
  adam_step(1, &x, &g, &v, &h, 0.1, 1, 0.5, 0.75, 0.0, 0.0, 0.0, &xo, &vo, &ho);
  CHECK(xo == doctest::Approx(0.9f));  // rate 0.1 * sqrt(1 - 0.75) / (1 - 0.5) = 0.1
  adam_step(1, &x, &g, &v, &h, 0.1, 1, 0.5, 0.75, 0.0, 0.5, 0.0, &xo, &vo, &ho);
  CHECK(xo == doctest::Approx(0.45f));  // (1 - 0.5) * 0.9
}
