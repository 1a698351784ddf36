// tensor_ops: the cases the ONNX node tests cover thinly (broadcast Where,
// negative-step Slice, int64 Gather with negative indices, reductions over
// non-contiguous axes, float -> float16 ties).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "tensor_ops.hpp"
#include "util.hpp"

using namespace nxrt::cpu;

TEST_CASE("where: three-way broadcasting, several element sizes, threaded") {
  ThreadPool pool(2);
  // c: [2,1,3], a: [4,1], b: [] (scalar) -> [2,4,3]
  const std::vector<int64_t> cd = {2, 1, 3}, ad = {4, 1}, bd = {}, od = {2, 4, 3};
  bool c[6] = {true, false, true, false, false, true};
  std::vector<float> a = {1, 2, 3, 4};
  float b = -7;
  std::vector<float> y(24);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    where(c, cd, a.data(), ad, &b, bd, y.data(), 4, od, p);
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 4; ++j)
        for (int64_t k = 0; k < 3; ++k) CHECK(y[size_t((i * 4 + j) * 3 + k)] == (c[i * 3 + k] ? a[size_t(j)] : b));
  }
  // int64 and uint8 payloads, big enough to be split over the pool.
  const std::vector<int64_t> big = {64, 1024}, row = {1024}, col = {64, 1};
  std::vector<uint8_t> cb(1024);
  for (size_t i = 0; i < cb.size(); ++i) cb[i] = i % 3 == 0;
  std::vector<int64_t> al(64), bl(1024), yl(64 * 1024);
  std::iota(al.begin(), al.end(), int64_t(-1000000000000));
  std::iota(bl.begin(), bl.end(), int64_t(5));
  where(reinterpret_cast<const bool*>(cb.data()), row, al.data(), col, bl.data(), row, yl.data(), 8, big, &pool);
  for (size_t i = 0; i < 64; ++i)
    for (size_t j = 0; j < 1024; ++j) REQUIRE(yl[i * 1024 + j] == (cb[j] ? al[i] : bl[j]));
  std::vector<uint8_t> a8 = {9}, b8 = {1, 2}, y8(2);
  const bool c2[2] = {false, true};
  where(c2, std::vector<int64_t>{2}, a8.data(), std::vector<int64_t>{1}, b8.data(), std::vector<int64_t>{2}, y8.data(), 1,
        std::vector<int64_t>{2}, nullptr);
  CHECK(y8 == std::vector<uint8_t>{1, 9});
}

TEST_CASE("slice: negative steps, clamping, int64 extremes") {
  int64_t s = -1;
  CHECK(slice_bounds(s, std::numeric_limits<int64_t>::min(), -1, 5) == 5);  // x[::-1]
  CHECK(s == 4);
  s = std::numeric_limits<int64_t>::max();
  CHECK(slice_bounds(s, 0, -2, 6) == 3);  // x[5:0:-2] = 5, 3, 1
  CHECK(s == 5);
  s = 2;
  CHECK(slice_bounds(s, 2, -1, 5) == 0);
  s = -100;
  CHECK(slice_bounds(s, 100, 3, 7) == 3);  // 0, 3, 6
  CHECK(s == 0);
  s = 1;
  CHECK(slice_bounds(s, -1, 1, 4) == 2);

  // x: [3,4] = 0..11; x[::-1, 3:0:-2] -> [[11, 9], [7, 5], [3, 1]]
  std::vector<float> x(12);
  std::iota(x.begin(), x.end(), 0.f);
  const std::vector<int64_t> in = {3, 4};
  int64_t s0 = -1, s1 = 3;
  const int64_t n0 = slice_bounds(s0, std::numeric_limits<int64_t>::min(), -1, 3);
  const int64_t n1 = slice_bounds(s1, 0, -2, 4);
  const std::vector<int64_t> od = {n0, n1}, start = {s0, s1}, step = {-1, -2};
  std::vector<float> y(size_t(n0 * n1));
  strided_slice(x.data(), y.data(), 4, in, start, step, od, nullptr);
  CHECK(y == std::vector<float>{11, 9, 7, 5, 3, 1});
}

TEST_CASE("gather: int64 data, negative indices, inner and outer axes") {
  ThreadPool pool(2);
  // data [2,3,4] int64 = 0..23
  std::vector<int64_t> x(24);
  std::iota(x.begin(), x.end(), int64_t(0));
  const std::vector<int64_t> d = {2, 3, 4};
  {
    const std::vector<int64_t> idx = {-1, 0, -3};
    std::vector<int64_t> y(2 * 3 * 4);
    REQUIRE(gather(x.data(), y.data(), 8, d, 1, idx, &pool));
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 4; ++k) {
          const int64_t src = idx[size_t(j)] < 0 ? idx[size_t(j)] + 3 : idx[size_t(j)];
          CHECK(y[size_t((i * 3 + j) * 4 + k)] == x[size_t((i * 3 + src) * 4 + k)]);
        }
  }
  {
    const std::vector<int64_t> idx = {-4, 3, -1};
    std::vector<int64_t> y(2 * 3 * 3);
    REQUIRE(gather(x.data(), y.data(), 8, d, 2, idx, nullptr));
    CHECK(y[0] == 0);
    CHECK(y[1] == 3);
    CHECK(y[2] == 3);
    CHECK(y[17] == 23);
  }
  std::vector<int64_t> y(24);
  CHECK_FALSE(gather(x.data(), y.data(), 8, d, 0, std::vector<int64_t>{2}, nullptr));
  CHECK_FALSE(gather(x.data(), y.data(), 8, d, 0, std::vector<int64_t>{-3}, nullptr));
}

TEST_CASE("reduce: non-contiguous axes, every op, threaded") {
  ThreadPool pool(2);
  const std::vector<int64_t> d = {3, 4, 5, 6};
  const auto x = nxrt::cpu::test::random_floats(360, 7, 0.1f, 2.f);
  for (auto flags : {std::vector<bool>{true, false, true, false}, std::vector<bool>{false, true, false, true},
                     std::vector<bool>{true, false, false, true}, std::vector<bool>{false, false, false, false},
                     std::vector<bool>{true, true, true, true}}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod, ReduceOp::SumSquare,
                        ReduceOp::L1, ReduceOp::L2, ReduceOp::LogSum, ReduceOp::LogSumExp}) {
      std::vector<int64_t> od = d;
      for (size_t i = 0; i < 4; ++i)
        if (flags[i]) od[i] = 1;
      const int64_t on = od[0] * od[1] * od[2] * od[3];
      std::vector<double> acc(size_t(on), op == ReduceOp::Prod ? 1.0 : op == ReduceOp::Max || op == ReduceOp::LogSumExp ? -1e300 : op == ReduceOp::Min ? 1e300 : 0.0);
      std::vector<int64_t> cnt(size_t(on), 0);
      for (int64_t i0 = 0; i0 < 3; ++i0)
        for (int64_t i1 = 0; i1 < 4; ++i1)
          for (int64_t i2 = 0; i2 < 5; ++i2)
            for (int64_t i3 = 0; i3 < 6; ++i3) {
              const double v = x[size_t(((i0 * 4 + i1) * 5 + i2) * 6 + i3)];
              const int64_t o = (((flags[0] ? 0 : i0) * od[1] + (flags[1] ? 0 : i1)) * od[2] + (flags[2] ? 0 : i2)) * od[3] + (flags[3] ? 0 : i3);
              double& a = acc[size_t(o)];
              ++cnt[size_t(o)];
              switch (op) {
                case ReduceOp::Sum: case ReduceOp::Mean: case ReduceOp::LogSum: a += v; break;
                case ReduceOp::Max: a = std::max(a, v); break;
                case ReduceOp::Min: a = std::min(a, v); break;
                case ReduceOp::Prod: a *= v; break;
                case ReduceOp::SumSquare: case ReduceOp::L2: a += v * v; break;
                case ReduceOp::L1: a += std::fabs(v); break;
                case ReduceOp::LogSumExp: a = a == -1e300 ? std::exp(v) : a + std::exp(v); break;
              }
            }
      std::vector<float> want(static_cast<size_t>(on));
      for (size_t o = 0; o < want.size(); ++o) {
        double a = acc[o];
        if (op == ReduceOp::Mean) a /= double(cnt[o]);
        if (op == ReduceOp::L2) a = std::sqrt(a);
        if (op == ReduceOp::LogSum || op == ReduceOp::LogSumExp) a = std::log(a);
        want[o] = float(a);
      }
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        std::vector<float> y(static_cast<size_t>(on));
        reduce<float>(op, x.data(), d, flags, y.data(), p);
        CHECK(nxrt::cpu::test::worst(y, want, 1e-5, 1e-6) <= 1.0);
      }
    }
  }
  // int64 sums and NaN propagation in Max.
  const std::vector<int64_t> xi = {1, 2, 3, 4, 5, 6};
  std::vector<int64_t> yi(3);
  reduce<int64_t>(ReduceOp::Sum, xi.data(), std::vector<int64_t>{2, 3}, {true, false}, yi.data(), nullptr);
  CHECK(yi == std::vector<int64_t>{5, 7, 9});
  const std::vector<float> xn = {1, NAN, 3, 4};
  std::vector<float> yn(2);
  reduce<float>(ReduceOp::Max, xn.data(), std::vector<int64_t>{2, 2}, {false, true}, yn.data(), nullptr);
  CHECK(std::isnan(yn[0]));
  CHECK(yn[1] == 4);
}

TEST_CASE("arg_reduce: first and last index on ties") {
  const std::vector<float> x = {1, 3, 3, 0, 2, 2};  // [2,3]
  std::vector<int64_t> y(2);
  arg_reduce<float>(true, false, x.data(), std::vector<int64_t>{2, 3}, 1, y.data());
  CHECK(y == std::vector<int64_t>{1, 1});
  arg_reduce<float>(true, true, x.data(), std::vector<int64_t>{2, 3}, 1, y.data());
  CHECK(y == std::vector<int64_t>{2, 2});
  std::vector<int64_t> y3(3);
  arg_reduce<float>(false, false, x.data(), std::vector<int64_t>{2, 3}, 0, y3.data());
  CHECK(y3 == std::vector<int64_t>{1, 1, 1});
}

TEST_CASE("cast: float -> float16 rounds to nearest even, subnormals, overflow") {
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_half(-2.0f) == 0xc000);
  CHECK(float_to_half(65504.f) == 0x7bff);
  CHECK(float_to_half(65519.f) == 0x7bff);   // below the midpoint to 65536
  CHECK(float_to_half(65520.f) == 0x7c00);   // tie rounds to even = inf
  CHECK(float_to_half(1e9f) == 0x7c00);
  CHECK(float_to_half(-INFINITY) == 0xfc00);
  CHECK((float_to_half(NAN) & 0x7c00) == 0x7c00);
  CHECK((float_to_half(NAN) & 0x3ff) != 0);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  CHECK(float_to_half(1.0f + 0x1p-11f) == 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  CHECK(float_to_half(1.0f + 3 * 0x1p-11f) == 0x3c02);
  CHECK(float_to_half(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);  // just above the tie
  // Subnormals: 2^-24 is the smallest; 2^-25 is a tie to even (0); 3 * 2^-25 ties to 2 * 2^-24.
  CHECK(float_to_half(0x1p-24f) == 0x0001);
  CHECK(float_to_half(0x1p-25f) == 0x0000);
  CHECK(float_to_half(3 * 0x1p-25f) == 0x0002);
  CHECK(float_to_half(-0x1p-26f) == 0x8000);
  CHECK(float_to_half(0x1p-14f - 0x1p-26f) == 0x0400);  // rounds up into the smallest normal
  // Dense sweep: the result is a nearest half (ties checked above), across subnormals, normals and the top.
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits(0, 0x477fefffu);  // |f| < 65520
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    float f = 0;
    std::memcpy(&f, &u, 4);
    const uint16_t h = float_to_half(f);
    const double got = half_to_float(h), d = std::fabs(double(f) - got);
    REQUIRE(std::fabs(double(f) - double(half_to_float(uint16_t(h + 1)))) >= d);
    if ((h & 0x7fff) != 0) REQUIRE(std::fabs(double(f) - double(half_to_float(uint16_t(h - 1)))) >= d);
  }
  // Round trip of every finite half.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;
    REQUIRE(float_to_half(half_to_float(uint16_t(h))) == h);
  }
  // Through cast(): float32 -> float16 -> float32 and double -> float16 (one rounding).
  const float src[3] = {0.1f, -3.14159f, 1.0f + 3 * 0x1p-11f};
  uint16_t h[3];
  cast(src, Elem::F32, h, Elem::F16, 3);
  CHECK(h[2] == 0x3c02);
  float back[3];
  cast(h, Elem::F16, back, Elem::F32, 3);
  CHECK(back[0] == doctest::Approx(0.1).epsilon(1e-3));
  const double dd[1] = {1.0 + 0x1p-11 + 0x1p-40};  // a float would round this to the tie, then to 1.0
  uint16_t hd[1];
  cast(dd, Elem::F64, hd, Elem::F16, 1);
  CHECK(hd[0] == 0x3c01);
}

TEST_CASE("cast: float -> int truncates, -> bool, int -> float") {
  const float f[5] = {1.9f, -1.9f, 0.f, -0.0f, 300.5f};
  int32_t i[5];
  cast(f, Elem::F32, i, Elem::I32, 5);
  CHECK(i[0] == 1);
  CHECK(i[1] == -1);
  CHECK(i[4] == 300);
  bool b[5];
  cast(f, Elem::F32, b, Elem::Bool, 5);
  CHECK(b[0]);
  CHECK_FALSE(b[2]);
  CHECK_FALSE(b[3]);
  const int64_t l[2] = {-5, 1LL << 40};
  float g[2];
  cast(l, Elem::I64, g, Elem::F32, 2);
  CHECK(g[0] == -5.f);
  CHECK(g[1] == float(1LL << 40));
}

namespace {

// map_copy's definition, element by element.
template <typename U>
std::vector<U> naive_map_copy(const std::vector<U>& src, const std::vector<int64_t>& od,
                              const std::vector<std::vector<int64_t>>& maps, U fill) {
  int64_t total = 1;
  for (auto d : od) total *= d;
  std::vector<U> y(static_cast<size_t>(total));
  std::vector<int64_t> idx(od.size(), 0);
  for (int64_t o = 0; o < total; ++o) {
    int64_t off = 0;
    bool filled = false;
    for (size_t d = 0; d < od.size(); ++d) {
      const int64_t m = maps[d][size_t(idx[d])];
      if (m == kFill) filled = true;
      else off += m;
    }
    y[size_t(o)] = filled ? fill : src[size_t(off)];
    for (size_t d = od.size(); d-- > 0;) {
      if (++idx[d] < od[d]) break;
      idx[d] = 0;
    }
  }
  return y;
}

}  // namespace

TEST_CASE("map_copy: the last map's runs (pad, edge, reflect, expand, tile, strided, mixed) equal the definition") {
  ThreadPool pool(2);
  for (const int64_t k : {int64_t(5), int64_t(37), int64_t(700)}) {
    std::vector<std::vector<int64_t>> lasts;
    std::vector<int64_t> v;
    // Pad constant: 2 before, 1 after.
    v = {kFill, kFill};
    for (int64_t i = 0; i < k; ++i) v.push_back(i);
    v.push_back(kFill);
    lasts.push_back(v);
    // Edge: the ends repeated.
    v = {0, 0, 0};
    for (int64_t i = 0; i < k; ++i) v.push_back(i);
    v.insert(v.end(), {k - 1, k - 1});
    lasts.push_back(v);
    // Reflect.
    v = {std::min<int64_t>(2, k - 1), 1, 0};
    for (int64_t i = 1; i < k; ++i) v.push_back(i);
    v.insert(v.end(), {k - 2, k - 3});
    lasts.push_back(v);
    // Expand of one element, then tile of three copies, then every other element.
    lasts.push_back(std::vector<int64_t>(size_t(k), 0));
    v.clear();
    for (int rep = 0; rep < 3; ++rep)
      for (int64_t i = 0; i < k; ++i) v.push_back(i);
    lasts.push_back(v);
    v.clear();
    for (int64_t i = 0; i < k; i += 2) v.push_back(i);
    lasts.push_back(v);
    // Mixed: a copy, a repeat of its last element, fills, a copy from the start again.
    v.clear();
    for (int64_t i = 0; i < k; ++i) v.push_back(i);
    v.insert(v.end(), 6, k - 1);
    v.insert(v.end(), 4, kFill);
    for (int64_t i = 0; i < k; ++i) v.push_back(i);
    lasts.push_back(v);
    for (const auto& last : lasts) {
      // [rows: 3 with one filled, 130 copies] x the last dim: 2-thread sizes at k = 700.
      const std::vector<int64_t> od = {3, 130, int64_t(last.size())};
      std::vector<std::vector<int64_t>> maps = {{0, kFill, 2 * 130 * k}, {}, last};
      for (int64_t i = 0; i < 130; ++i) maps[1].push_back(i * k);
      std::vector<float> src(size_t(3 * 130 * k));
      for (size_t i = 0; i < src.size(); ++i) src[i] = float(i);
      std::vector<uint8_t> src8(src.size());
      for (size_t i = 0; i < src8.size(); ++i) src8[i] = uint8_t(i * 7);
      const float fill = -1.f;
      const uint8_t fill8 = 0xEE;
      for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
        INFO("k " << k << " last map of " << last.size() << (tp ? ", 2 threads" : ""));
        std::vector<float> y(size_t(3 * 130) * last.size(), 0.f);
        map_copy(src.data(), y.data(), 4, od, maps, &fill, tp);
        CHECK(y == naive_map_copy(src, od, maps, fill));
        std::vector<uint8_t> y8(y.size(), 0);
        map_copy(src8.data(), y8.data(), 1, od, maps, &fill8, tp);
        CHECK(y8 == naive_map_copy(src8, od, maps, fill8));
      }
    }
  }
}
