// quantize: round half to even, saturation, per-axis parameters, dynamic
// quantization (expected values worked out by hand).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu_info.hpp"
#include "quantize.hpp"

using namespace nxrt::cpu;

TEST_CASE("saturate_round: half to even, saturation, NaN") {
  CHECK(saturate_round<uint8_t>(2.5f) == 2);
  CHECK(saturate_round<uint8_t>(3.5f) == 4);
  CHECK(saturate_round<int8_t>(-2.5f) == -2);
  CHECK(saturate_round<uint8_t>(300.f) == 255);
  CHECK(saturate_round<uint8_t>(-1.f) == 0);
  CHECK(saturate_round<int8_t>(-200.f) == -128);
  CHECK(saturate_round<int8_t>(127.4f) == 127);
  CHECK(saturate_round<uint8_t>(std::numeric_limits<float>::quiet_NaN()) == 0);
}

TEST_CASE("QuantAxis: per tensor and per axis") {
  const QuantAxis t;
  CHECK(t.at(0) == 0);
  CHECK(t.at(7) == 0);
  const QuantAxis a{2, 2, true};  // [.., 2, 2]: the parameter changes every 2 elements, wraps after 4
  const int64_t want[8] = {0, 0, 1, 1, 0, 0, 1, 1};
  for (int64_t i = 0; i < 8; ++i) CHECK(a.at(i) == want[i]);
}

TEST_CASE("quantize_linear: per tensor uint8 with zero point, ties to even, saturation") {
  const std::vector<float> x = {0.f, 1.f, 2.5f, -3.f, 1000.f, 0.75f, 1.25f, -100.f};
  const float scale = 0.5f;
  const uint8_t zp = 10;
  std::vector<uint8_t> y(x.size());
  quantize_linear<uint8_t>(x.data(), int64_t(x.size()), &scale, &zp, QuantAxis{}, y.data());
  // x / 0.5 = 0, 2, 5, -6, 2000, 1.5 (-> 2), 2.5 (-> 2), -200; + 10; clamp to [0, 255]
  CHECK(y == std::vector<uint8_t>{10, 12, 15, 4, 255, 12, 12, 0});
  // No zero point.
  quantize_linear<uint8_t>(x.data(), int64_t(x.size()), &scale, nullptr, QuantAxis{}, y.data());
  CHECK(y == std::vector<uint8_t>{0, 2, 5, 0, 255, 2, 2, 0});
}

TEST_CASE("quantize_linear: per axis int8") {
  // x: [2, 3], axis 1: scale {1, 2, 4}, zero point {0, -1, 1}.
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const float scale[3] = {1, 2, 4};
  const int8_t zp[3] = {0, -1, 1};
  std::vector<int8_t> y(6);
  quantize_linear<int8_t>(x.data(), 6, scale, zp, QuantAxis{1, 3, true}, y.data());
  // 1/1+0, 2/2-1, 3/4=0.75->1 +1, 4/1+0, 5/2=2.5->2 -1, 6/4=1.5->2 +1
  CHECK(y == std::vector<int8_t>{1, 0, 2, 4, 1, 3});
}

TEST_CASE("dequantize_linear: int32 without zero point, uint8 per axis") {
  const std::vector<int32_t> q = {-5, 0, 7};
  const float s = 0.5f;
  std::vector<float> y(3);
  dequantize_linear<int32_t>(q.data(), 3, &s, nullptr, QuantAxis{}, y.data());
  CHECK(y == std::vector<float>{-2.5f, 0.f, 3.5f});
  const std::vector<uint8_t> u = {0, 128, 255, 0, 128, 255};
  const float su[2] = {0.25f, 2.f};
  const uint8_t zu[2] = {128, 0};
  std::vector<float> yu(6);
  dequantize_linear<uint8_t>(u.data(), 6, su, zu, QuantAxis{3, 2, true}, yu.data());
  CHECK(yu == std::vector<float>{-32.f, 0.f, 31.75f, 0.f, 256.f, 510.f});
}

TEST_CASE("dynamic quantization: range includes 0, zero scale") {
  const std::vector<float> x = {-1.f, 0.f, 2.f, 4.f};
  const DynamicQuant q = dynamic_quant_params(x.data(), 4);
  CHECK(q.scale == 5.f / 255.f);  // (max(4, 0) - min(-1, 0)) / 255
  CHECK(q.zero_point == 51);      // round(1 / (5/255))
  std::vector<uint8_t> y(4);
  dynamic_quantize_linear(x.data(), 4, q, y.data());
  CHECK(y == std::vector<uint8_t>{0, 51, 153, 255});
  const std::vector<float> z = {0.f, 0.f};
  const DynamicQuant q0 = dynamic_quant_params(z.data(), 2);
  CHECK(q0.scale == 0.f);
  CHECK(q0.zero_point == 0);
  std::vector<uint8_t> y0 = {7, 7};
  dynamic_quantize_linear(z.data(), 2, q0, y0.data());
  CHECK(y0 == std::vector<uint8_t>{0, 0});
  // All positive: min is 0, zero point 0.
  const std::vector<float> p = {0.f, 2.55f};
  CHECK(dynamic_quant_params(p.data(), 2).zero_point == 0);
}

namespace {

// The scalar definitions the vector runs (quantize_avx2.cpp, quantize_avx512.cpp) must match
// bit for bit.
template <typename Q>
Q quantize_one(float x, float s, int32_t zp) {
  return saturate_round<Q>(std::nearbyint(x / s) + float(zp));
}

template <typename Q>
void check_quantize_runs(uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-400.f, 400.f);
  std::uniform_int_distribution<int> pick(0, 9), zd(std::numeric_limits<Q>::lowest(), std::numeric_limits<Q>::max());
  const int64_t len = 3, inner = 37, n = len * inner * 2 + 5;  // per axis: blocks of 37 (vector body + tail)
  std::vector<float> x(static_cast<size_t>(n));
  const float scales[len] = {0.5f, 1.f / 3.f, 2.f};
  for (auto& v : x) {
    const int p = pick(g);
    v = p == 0 ? std::numeric_limits<float>::quiet_NaN() : p == 1 ? std::numeric_limits<float>::infinity()
        : p == 2 ? -std::numeric_limits<float>::infinity() : p == 3 ? float(int(d(g))) + 0.5f : d(g);
  }
  const Q zps[len] = {Q(zd(g)), Q(zd(g)), Q(zd(g))};
  for (bool per_axis : {false, true}) {
    QuantAxis qa;
    if (per_axis) {
      qa.per_axis = true;
      qa.len = len;
      qa.inner = inner;
    }
    std::vector<Q> y(static_cast<size_t>(n)), want(static_cast<size_t>(n));
    quantize_linear(x.data(), n, scales, zps, qa, y.data());
    for (int64_t i = 0; i < n; ++i) want[size_t(i)] = quantize_one<Q>(x[size_t(i)], scales[qa.at(i)], zps[qa.at(i)]);
    CHECK(y == want);
    std::vector<float> back(static_cast<size_t>(n));
    dequantize_linear(y.data(), n, scales, zps, qa, back.data());
    bool same = true;
    for (int64_t i = 0; i < n; ++i) {
      const float w = float(int64_t(y[size_t(i)]) - int64_t(zps[qa.at(i)])) * scales[qa.at(i)];
      same = same && std::memcmp(&w, &back[size_t(i)], sizeof w) == 0;
    }
    CHECK(same);
  }
  // Each ISA's run this CPU can execute, not only the active one, on the whole buffer (the
  // 64-value steps and a tail) with each scale and zero point.
  std::vector<QuantizeRun<Q>> runs;
  if (active_isa() >= Isa::avx2 && quantize_run_avx2<Q>()) runs.push_back(quantize_run_avx2<Q>());
  if (avx512bw_active() && quantize_run_avx512<Q>()) runs.push_back(quantize_run_avx512<Q>());
  for (QuantizeRun<Q> run : runs)
    for (int64_t k = 0; k < len; ++k) {
      std::vector<Q> y(static_cast<size_t>(n) + 1), want(static_cast<size_t>(n));
      y[size_t(n)] = Q(77);  // the run must not write past n
      run(x.data(), n, scales[k], zps[k], y.data());
      for (int64_t i = 0; i < n; ++i) want[size_t(i)] = quantize_one<Q>(x[size_t(i)], scales[k], zps[k]);
      CHECK(std::equal(want.begin(), want.end(), y.begin()));
      CHECK(y[size_t(n)] == Q(77));
    }
}

}  // namespace

TEST_CASE("quantize_linear / dequantize_linear: the vector runs equal the scalar formulas (NaN, inf, ties, tails)") {
  check_quantize_runs<uint8_t>(1);
  check_quantize_runs<int8_t>(2);
}

TEST_CASE("quantize_linear / dequantize_linear on a pool: the bytes of one thread") {
  // Large enough for two pieces; per axis the pieces must start at whole periods (3 x 37),
  // and neither length is a multiple of a period or of 64.
  std::mt19937 g(9);
  std::uniform_real_distribution<float> d(-300.f, 300.f);
  ThreadPool pool(2);
  const float scales[3] = {0.5f, 1.f / 3.f, 2.f};
  const uint8_t zps[3] = {3, 128, 250};
  for (bool per_axis : {false, true}) {
    const int64_t n = 3 * 37 * 1500 + 5;
    const QuantAxis qa = per_axis ? QuantAxis{37, 3, true} : QuantAxis{};
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = d(g);
    std::vector<uint8_t> one(x.size()), two(x.size());
    quantize_linear(x.data(), n, scales, zps, qa, one.data());
    quantize_linear(x.data(), n, scales, zps, qa, two.data(), &pool);
    CHECK(one == two);
    std::vector<float> back1(x.size()), back2(x.size());
    dequantize_linear(one.data(), n, scales, zps, qa, back1.data());
    dequantize_linear(one.data(), n, scales, zps, qa, back2.data(), &pool);
    CHECK(std::memcmp(back1.data(), back2.data(), back1.size() * sizeof(float)) == 0);
  }
}

namespace {

// qdq_add against the nodes run one by one: dequantize_linear twice, float add, clamp,
// quantize_linear (or the float sum), compared bit for bit; lengths with vector tails,
// parameters with ties (scales of powers of two), huge scales (inf + -inf = NaN), Relu before
// a zero point at the type's lowest value (the vector store folds that clamp into its bound).
template <typename A, typename B, typename Y>
void check_qdq_add(uint32_t seed) {
  std::mt19937 rng(seed);
  const float scales[] = {0.0625f, 0.5f, 0.0123f, 3.7e37f};
  for (int trial = 0; trial < 48; ++trial) {
    const int64_t n = 1 + int64_t(rng() % 300);
    std::vector<A> a(static_cast<size_t>(n));
    std::vector<B> b(static_cast<size_t>(n));
    for (auto& v : a) v = A(rng());
    for (auto& v : b) v = B(rng());
    QdqAddParams p;
    p.a_scale = scales[rng() % 4];
    p.b_scale = trial % 5 == 4 ? p.a_scale : scales[rng() % 3];
    p.y_scale = scales[rng() % 3];
    p.a_zp = int32_t(A(rng()));
    p.b_zp = int32_t(B(rng()));
    if constexpr (std::is_same_v<Y, float>) p.y_zp = 0;
    else p.y_zp = trial % 6 == 1 ? int32_t(std::numeric_limits<Y>::lowest()) : int32_t(Y(rng()));
    p.clamp = trial % 3 != 0;
    p.lo = trial % 3 == 1 ? 0.f : -1.5f;
    p.hi = trial % 3 == 1 ? std::numeric_limits<float>::infinity() : 2.25f;
    const A za = A(p.a_zp);
    const B zb = B(p.b_zp);
    std::vector<float> va(static_cast<size_t>(n)), vb(static_cast<size_t>(n));
    dequantize_linear(a.data(), n, &p.a_scale, &za, QuantAxis{}, va.data());
    dequantize_linear(b.data(), n, &p.b_scale, &zb, QuantAxis{}, vb.data());
    for (int64_t i = 0; i < n; ++i) {
      va[size_t(i)] += vb[size_t(i)];
      if (p.clamp) va[size_t(i)] = std::min(std::max(va[size_t(i)], p.lo), p.hi);
    }
    std::vector<Y> want(static_cast<size_t>(n)), got(static_cast<size_t>(n) + 1);
    if constexpr (std::is_same_v<Y, float>) {
      want = va;
    } else {
      const Y yz = Y(p.y_zp);
      quantize_linear(va.data(), n, &p.y_scale, &yz, QuantAxis{}, want.data());
    }
    got[size_t(n)] = Y(77);  // the pass must not write past n
    qdq_add(a.data(), b.data(), got.data(), n, p);
    CHECK(std::memcmp(got.data(), want.data(), size_t(n) * sizeof(Y)) == 0);
    CHECK(got[size_t(n)] == Y(77));
  }
}

}  // namespace

TEST_CASE("qdq_add: bit-identical to DequantizeLinear x2 + Add + clamp + QuantizeLinear run one by one") {
  check_qdq_add<uint8_t, uint8_t, uint8_t>(3);
  check_qdq_add<uint8_t, int8_t, int8_t>(4);
  check_qdq_add<int8_t, uint8_t, uint8_t>(5);
  check_qdq_add<int8_t, int8_t, float>(6);
  check_qdq_add<uint8_t, uint8_t, float>(7);
}
