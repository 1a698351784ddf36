#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
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

TEST_CASE("thread pool: each thread starts on its own block, the caller on the first") {
  // Blocks of 2 threads x 64 indices: [0, 32) the caller's, [32, 64) the worker's. A thread
  // takes its block's indices from the front, then the other's; so the first index it runs is
  // its block's first, unless the other thread had already begun that block (a preempted
  // caller whose block the worker took, a worker joining after the caller took its block).
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  int caller_first_zero = 0;
  for (int rep = 0; rep < 200; ++rep) {
    std::vector<std::thread::id> who(64);
    std::vector<int64_t> order;
    std::mutex mu;
    pool.run(64, [&](int64_t i) {
      who[size_t(i)] = std::this_thread::get_id();
      std::lock_guard lock(mu);
      order.push_back(i);
    });
    std::vector<std::thread::id> seen;
    for (int64_t i : order) {
      const std::thread::id t = who[size_t(i)];
      if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
      seen.push_back(t);
      const int64_t own = t == caller ? 0 : 32;
      CHECK((i == own || who[size_t(own)] != t));
      if (t == caller && i == 0) ++caller_first_zero;
    }
  }
  CHECK(caller_first_zero > 100);  // the usual case, not just allowed
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
