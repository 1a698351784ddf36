// The virtual-memory arena's sub-allocator (range_allocator.*): alignment, best fit,
// coalescing, growth, and a random workload checked against a byte map for overlaps.
#include <doctest/doctest.h>

#include "range_allocator.hpp"

#include <random>
#include <vector>

using namespace nxrt::cuda;

TEST_CASE("range allocator: alignment, best fit, coalescing, growth") {
  RangeAllocator r;
  CHECK_FALSE(r.allocate(16, 256));  // empty until it grows
  r.grow(4096);
  auto a = r.allocate(100, 256), b = r.allocate(1000, 512), c = r.allocate(10, 256);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  CHECK(*a == 0);
  CHECK(*b == 512);  // 100 bytes then padding to 512
  CHECK(*c % 256 == 0);
  CHECK(r.used() == 100 + 1412 + 34);  // a; b with its padding from 100; c with its padding from 1512
  CHECK_FALSE(r.allocate(4096, 256));  // does not fit
  CHECK(r.free(*b));
  CHECK_FALSE(r.free(*b));  // double free refused
  // Best fit: the 1000-byte hole (with a's padding) is taken over the tail for a small block.
  auto d = r.allocate(900, 256);
  REQUIRE(d);
  CHECK(*d == 256);
  CHECK(r.free(*a));
  CHECK(r.free(*c));
  CHECK(r.free(*d));
  CHECK(r.used() == 0);
  CHECK(r.free_ranges() == 1);  // everything coalesced back into one range
  CHECK(r.largest_free() == 4096);
  r.grow(8192);
  CHECK(r.free_ranges() == 1);  // the new tail joins the free range before it
  CHECK(r.allocate(8192, 4096) == uint64_t(0));
}

TEST_CASE("range allocator: random workload never overlaps and frees back to one range") {
  RangeAllocator r;
  r.grow(1 << 20);
  std::mt19937 rng(42);
  std::vector<std::pair<uint64_t, uint64_t>> live;
  std::vector<uint8_t> owner(1 << 20, 0);
  for (int step = 0; step < 4000; ++step) {
    if (live.empty() || rng() % 3) {
      const uint64_t size = 1 + rng() % 5000, align = uint64_t(1) << (rng() % 10);
      auto o = r.allocate(size, align);
      if (!o) {
        r.grow(r.capacity() + (1 << 18));
        owner.resize(r.capacity(), 0);
        continue;
      }
      REQUIRE(*o % align == 0);
      REQUIRE(*o + size <= r.capacity());
      bool overlap = false;
      for (uint64_t i = *o; i < *o + size; ++i) {
        overlap |= owner[i] != 0;
        owner[i] = 1;
      }
      REQUIRE_FALSE(overlap);
      live.push_back({*o, size});
    } else {
      const size_t k = rng() % live.size();
      for (uint64_t i = live[k].first; i < live[k].first + live[k].second; ++i) owner[i] = 0;
      REQUIRE(r.free(live[k].first));
      live.erase(live.begin() + long(k));
    }
  }
  for (auto& [o, s] : live) REQUIRE(r.free(o));
  CHECK(r.used() == 0);
  CHECK(r.free_ranges() == 1);
}
