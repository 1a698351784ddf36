#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "thread_pool.hpp"

using namespace nxrt::cpu;

TEST_CASE("thread pool runs every index exactly once") {
  ThreadPool pool(3);
  CHECK(pool.threads() == 3);
  for (int64_t n : {0, 1, 2, 7, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    for (int rep = 0; rep < 20; ++rep) pool.run(n, [&](int64_t i) { hits[size_t(i)].fetch_add(1); });
    for (auto& h : hits) CHECK(h.load() == 20);
  }
}

TEST_CASE("thread pool tolerates concurrent callers") {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 200; ++rep) pool.run(10, [&](int64_t i) { sum.fetch_add(i); });
    });
  for (auto& c : callers) c.join();
  CHECK(sum.load() == 4 * 200 * 45);
}

TEST_CASE("split_range covers the range evenly") {
  int64_t b, e, covered = 0;
  for (int64_t i = 0; i < 3; ++i) {
    split_range(10, 3, i, b, e);
    CHECK(e - b >= 3);
    CHECK(e - b <= 4);
    covered += e - b;
  }
  CHECK(covered == 10);
}
