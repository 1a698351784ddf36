#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include <nxrt_sdk/tensor.hpp>

#include "transpose.hpp"

using namespace nxrt::cpu;

template <typename T>
static std::vector<T> naive_transpose(const std::vector<T>& x, const std::vector<int64_t>& d, const std::vector<int64_t>& p) {
  const size_t r = d.size();
  std::vector<int64_t> od(r), istr(r);
  int64_t m = 1;
  for (size_t i = r; i-- > 0;) { istr[i] = m; m *= d[i]; }
  for (size_t i = 0; i < r; ++i) od[i] = d[size_t(p[i])];
  std::vector<T> y(x.size());
  std::vector<int64_t> idx(r, 0);
  for (size_t o = 0; o < y.size(); ++o) {
    int64_t off = 0;
    for (size_t i = 0; i < r; ++i) off += idx[i] * istr[size_t(p[i])];
    y[o] = x[size_t(off)];
    for (size_t i = r; i-- > 0;) { if (++idx[i] < od[i]) break; idx[i] = 0; }
  }
  return y;
}

TEST_CASE("transpose: every permutation of a 4-D tensor, several element sizes") {
  ThreadPool pool(2);
  std::vector<int64_t> d = {2, 3, 1, 5};
  std::vector<int64_t> p = {0, 1, 2, 3};
  std::vector<float> x(30);
  std::iota(x.begin(), x.end(), 0.f);
  std::vector<int64_t> xl(30);
  std::iota(xl.begin(), xl.end(), 0);
  std::vector<uint8_t> xb(30);
  std::iota(xb.begin(), xb.end(), uint8_t(0));
  do {
    std::vector<float> y(30);
    transpose(x.data(), y.data(), 4, d, p, &pool);
    CHECK(y == naive_transpose(x, d, p));
    std::vector<int64_t> yl(30);
    transpose(xl.data(), yl.data(), 8, d, p, nullptr);
    CHECK(yl == naive_transpose(xl, d, p));
    std::vector<uint8_t> yb(30);
    transpose(xb.data(), yb.data(), 1, d, p, nullptr);
    CHECK(yb == naive_transpose(xb, d, p));
  } while (std::next_permutation(p.begin(), p.end()));
}

TEST_CASE("transpose: attention head split, large and threaded") {
  ThreadPool pool(2);
  std::vector<int64_t> d = {1, 128, 12, 64};
  std::vector<float> x(size_t(128 * 12 * 64));
  std::iota(x.begin(), x.end(), 0.f);
  for (auto p : {std::vector<int64_t>{0, 2, 1, 3}, std::vector<int64_t>{0, 2, 3, 1}}) {
    std::vector<float> y(x.size());
    transpose(x.data(), y.data(), 4, d, p, &pool);
    CHECK(y == naive_transpose(x, d, p));
  }
}

TEST_CASE("transpose: every permutation of odd sizes, blocked row gathers with tails, threaded") {
  ThreadPool pool(2);
  std::vector<int64_t> d = {3, 37, 9, 70};  // 69930 elements: 2 threads on strided gathers
  std::vector<int64_t> p = {0, 1, 2, 3};
  std::vector<float> x(size_t(3 * 37 * 9 * 70));
  std::iota(x.begin(), x.end(), 0.f);
  std::vector<uint16_t> xs(x.size());
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = uint16_t(i * 7);
  do {
    INFO("perm " << p[0] << p[1] << p[2] << p[3]);
    std::vector<float> y(x.size());
    transpose(x.data(), y.data(), 4, d, p, &pool);
    CHECK(y == naive_transpose(x, d, p));
    std::vector<uint16_t> ys(xs.size());
    transpose(xs.data(), ys.data(), 2, d, p, nullptr);
    CHECK(ys == naive_transpose(xs, d, p));
  } while (std::next_permutation(p.begin(), p.end()));
}

TEST_CASE("sdk element_count: a product past int64 fails instead of wrapping") {
  const std::vector<int64_t> ok{1 << 20, 1 << 20, 1 << 20};
  CHECK(nxrt::sdk::element_count(ok) == (int64_t(1) << 60));
  const std::vector<int64_t> huge{int64_t(1) << 40, int64_t(1) << 40};
  CHECK_THROWS(nxrt::sdk::element_count(huge));
  const std::vector<int64_t> empty_dim{0, int64_t(1) << 62, 4};
  CHECK(nxrt::sdk::element_count(empty_dim) == 0);
}

TEST_CASE("transpose: 2-D tiles at the bottom (YOLO's head [1, 144, 2100] -> [1, 2100, 144]), tails, planes, threads") {
  // The last two output dims a 2-D transpose of the input, 4-byte elements: 16 x 16 register
  // tiles on AVX-512 (rows in chunks of 512, edges masked), the row gathers elsewhere.
  ThreadPool pool(2);
  const std::vector<std::vector<int64_t>> shapes = {{1, 144, 2100}, {2, 37, 1100}, {3, 16, 16}, {1, 17, 515}};
  for (const auto& d : shapes) {
    std::vector<float> x(size_t(d[0] * d[1] * d[2]));
    std::iota(x.begin(), x.end(), 0.f);
    const std::vector<int64_t> p = {0, 2, 1};
    for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> y(x.size(), -1.f);
      transpose(x.data(), y.data(), 4, d, p, tp);
      INFO("dims " << d[0] << "x" << d[1] << "x" << d[2] << (tp ? " 2 threads" : " 1 thread"));
      CHECK(y == naive_transpose(x, d, p));
    }
  }
}
