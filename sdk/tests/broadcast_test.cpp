// nxrt_sdk/broadcast.hpp: shapes, strides and the element walk against a direct index computation.
#include <doctest/doctest.h>

#include <nxrt_sdk/broadcast.hpp>

#include <string>
#include <vector>

using nxrt::sdk::broadcast_shape;
using nxrt::sdk::broadcast_strides;
using nxrt::sdk::for_each_broadcast;
using Dims = std::vector<int64_t>;

TEST_CASE("broadcast_shape follows numpy") {
  CHECK(broadcast_shape(Dims{2, 3, 4}, Dims{3, 1}) == Dims{2, 3, 4});
  CHECK(broadcast_shape(Dims{1}, Dims{5, 1, 2}) == Dims{5, 1, 2});
  CHECK(broadcast_shape(Dims{}, Dims{2, 2}) == Dims{2, 2});  // a scalar
  CHECK(broadcast_shape(Dims{0, 3}, Dims{1, 3}) == Dims{0, 3});
  CHECK(broadcast_shape(Dims{4, 1}, Dims{1, 6}) == Dims{4, 6});
}

TEST_CASE("shapes that do not broadcast fail with INVALID_ARGUMENT naming the dims") {
  try {
    broadcast_shape(Dims{2, 3}, Dims{4});
    FAIL("no error");
  } catch (const nxrt::sdk::Error& e) {
    CHECK(e.code() == NXRT_INVALID_ARGUMENT);
    CHECK(std::string(e.what()).find("3 in one input and 4") != std::string::npos);
  }
  CHECK_THROWS_AS(broadcast_strides(Dims{2, 3}, Dims{3}), nxrt::sdk::Error);
  CHECK_THROWS_AS(broadcast_strides(Dims{2}, Dims{3}), nxrt::sdk::Error);
}

TEST_CASE("broadcast_strides are zero on repeated dims") {
  CHECK(broadcast_strides(Dims{3, 1}, Dims{2, 3, 4}) == Dims{0, 1, 0});
  CHECK(broadcast_strides(Dims{2, 3, 4}, Dims{2, 3, 4}) == Dims{12, 4, 1});
  CHECK(broadcast_strides(Dims{}, Dims{2}) == Dims{0});
}

TEST_CASE("for_each_broadcast visits every element with both inputs' indices") {
  const Dims a{2, 1, 4}, b{3, 1}, out = broadcast_shape(a, b);  // [2,3,4]
  std::vector<int64_t> seen;
  for_each_broadcast(out, a, b, [&](int64_t i, int64_t ia, int64_t ib) {
    const int64_t n = i / 12, c = (i / 4) % 3, w = i % 4;
    CHECK(ia == n * 4 + w);  // a[n, 0, w]
    CHECK(ib == c);          // b[c, 0]
    seen.push_back(i);
  });
  REQUIRE(seen.size() == 24);
  for (int64_t i = 0; i < 24; ++i) CHECK(seen[size_t(i)] == i);
  int calls = 0;
  for_each_broadcast(Dims{0, 3}, Dims{0, 3}, Dims{3}, [&](int64_t, int64_t, int64_t) { ++calls; });
  CHECK(calls == 0);
  for_each_broadcast(Dims{}, Dims{}, Dims{}, [&](int64_t i, int64_t ia, int64_t ib) { calls += 1 + int(i + ia + ib); });
  CHECK(calls == 1);  // a scalar is one element
}
