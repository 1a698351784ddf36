// RNN/GRU/LSTM activation functions against their ONNX formulas worked out by
// hand, and the resolution of the activations / alpha / beta attributes.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "rnn_activation.hpp"

using namespace nxrt::cpu;
using K = RnnActivationKind;

namespace {
double eval(K k, double a, double b, double x) { return RnnActivation{k, a, b}(x); }
}  // namespace

TEST_CASE("RNN activations: each function's math") {
  CHECK(eval(K::Relu, 0, 0, -2.0) == 0.0);
  CHECK(eval(K::Relu, 0, 0, 1.5) == 1.5);
  CHECK(eval(K::Tanh, 0, 0, 0.5) == doctest::Approx(0.46211715726000974).epsilon(1e-15));
  CHECK(eval(K::Sigmoid, 0, 0, 0.0) == 0.5);
  CHECK(eval(K::Sigmoid, 0, 0, 2.0) == doctest::Approx(0.8807970779778823).epsilon(1e-15));
  CHECK(eval(K::Affine, 2.0, -1.0, 3.0) == 5.0);
  CHECK(eval(K::LeakyRelu, 0.1, 0, -3.0) == doctest::Approx(-0.3).epsilon(1e-15));
  CHECK(eval(K::LeakyRelu, 0.1, 0, 3.0) == 3.0);
  CHECK(eval(K::ThresholdedRelu, 1.0, 0, 0.9) == 0.0);
  CHECK(eval(K::ThresholdedRelu, 1.0, 0, 1.1) == 1.1);
  CHECK(eval(K::ScaledTanh, 2.0, 0.5, 1.0) == doctest::Approx(2.0 * std::tanh(0.5)).epsilon(1e-15));
  CHECK(eval(K::HardSigmoid, 0.2, 0.5, 1.0) == doctest::Approx(0.7).epsilon(1e-15));
  CHECK(eval(K::HardSigmoid, 0.2, 0.5, 4.0) == 1.0);
  CHECK(eval(K::HardSigmoid, 0.2, 0.5, -4.0) == 0.0);
  CHECK(eval(K::Elu, 2.0, 0, -1.0) == doctest::Approx(2.0 * (std::exp(-1.0) - 1.0)).epsilon(1e-15));
  CHECK(eval(K::Elu, 2.0, 0, 1.0) == 1.0);
  CHECK(eval(K::Softsign, 0, 0, -3.0) == -0.75);
  CHECK(eval(K::Softplus, 0, 0, 0.0) == doctest::Approx(std::log(2.0)).epsilon(1e-15));
  CHECK(eval(K::Softplus, 0, 0, -2.0) == doctest::Approx(std::log(1.0 + std::exp(-2.0))).epsilon(1e-15));
  CHECK(eval(K::Softplus, 0, 0, 3.0) == doctest::Approx(std::log(1.0 + std::exp(3.0))).epsilon(1e-15));
  CHECK(eval(K::Softplus, 0, 0, 800.0) == 800.0);  // no overflow to inf
}

TEST_CASE("RNN activations: names, case-insensitive, unknown refused") {
  CHECK(rnn_activation_kind("LeakyRelu") == K::LeakyRelu);
  CHECK(rnn_activation_kind("leakyrelu") == K::LeakyRelu);
  CHECK(rnn_activation_kind("HARDSIGMOID") == K::HardSigmoid);
  CHECK_FALSE(rnn_activation_kind("Gelu").has_value());
  CHECK_FALSE(rnn_activation_kind("").has_value());
  auto r = resolve_rnn_activations({"Sigmoid", "Swish"}, {}, {}, {K::Sigmoid, K::Tanh}, 1);
  CHECK(r.error.find("unknown activation 'Swish'") != std::string::npos);
  CHECK(r.functions.empty());
}

TEST_CASE("RNN activations: defaults, ONNX alpha/beta defaults, in-order consumption") {
  auto d = resolve_rnn_activations({}, {}, {}, {K::Sigmoid, K::Tanh, K::Tanh}, 2);
  REQUIRE(d.error.empty());
  REQUIRE(d.functions.size() == 6);
  CHECK(d.functions[3].kind == K::Sigmoid);
  CHECK(d.functions[5].kind == K::Tanh);

  auto def = resolve_rnn_activations({"Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu"}, {},
                                     {}, {K::Tanh}, 6 /* one per "direction" to list them all */);
  REQUIRE(def.error.empty());
  CHECK(def.functions[0].alpha == 1.0);
  CHECK(def.functions[0].beta == 0.0);
  CHECK(def.functions[1].alpha == doctest::Approx(0.01));
  CHECK(def.functions[2].alpha == 1.0);
  CHECK(def.functions[3].alpha == 1.0);
  CHECK(def.functions[3].beta == 1.0);
  CHECK(def.functions[4].alpha == doctest::Approx(0.2));
  CHECK(def.functions[4].beta == doctest::Approx(0.5));
  CHECK(def.functions[5].alpha == 1.0);

  // alpha values go to the functions that take one, in order; Tanh takes none.
  auto r = resolve_rnn_activations({"LeakyRelu", "Tanh", "HardSigmoid", "ScaledTanh", "Tanh", "Elu"}, {0.3f, 0.4f, 0.5f},
                                   {0.6f}, {K::Sigmoid, K::Tanh, K::Tanh}, 2);
  REQUIRE(r.error.empty());
  REQUIRE(r.functions.size() == 6);
  CHECK(r.functions[0].alpha == doctest::Approx(0.3));
  CHECK(r.functions[2].alpha == doctest::Approx(0.4));
  CHECK(r.functions[2].beta == doctest::Approx(0.6));
  CHECK(r.functions[3].alpha == doctest::Approx(0.5));
  CHECK(r.functions[3].beta == 1.0);  // beta list ran out: the default
  CHECK(r.functions[5].alpha == 1.0);  // alpha list ran out: the default
}

TEST_CASE("RNN activations: counts per direction") {
  auto one = resolve_rnn_activations({"Relu"}, {}, {}, {K::Tanh}, 2);  // one direction's list for both
  REQUIRE(one.error.empty());
  REQUIRE(one.functions.size() == 2);
  CHECK(one.functions[1].kind == K::Relu);
  auto bad = resolve_rnn_activations({"Relu", "Tanh", "Tanh"}, {}, {}, {K::Sigmoid, K::Tanh}, 2);
  CHECK(bad.error.find("3 activations given, 2 per direction x 2") != std::string::npos);
  auto extra = resolve_rnn_activations({"Tanh"}, {0.5f}, {}, {K::Tanh}, 1);
  CHECK(extra.error.find("activation_alpha has 1") != std::string::npos);
}
