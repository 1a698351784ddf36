// The session's allocation bookkeeping (arena.hpp): handles, accounting behind
// session_stats, imports not counted, foreign handles refused.
#include <doctest/doctest.h>

#include "arena.hpp"

using namespace nxrt::cuda;

TEST_CASE("alignment and rounding") {
  CHECK(effective_alignment(1) == 256);
  CHECK(effective_alignment(4096) == 4096);
  CHECK_THROWS(effective_alignment(3));
  CHECK(rounded_size(0, 256) == 256);  // zero bytes: a unique handle still
  CHECK(rounded_size(257, 256) == 512);
  CHECK_THROWS(rounded_size(UINT64_MAX - 10, 256));
}

TEST_CASE("allocation table counts what the session holds") {
  AllocationTable t;
  alignas(256) static char mem[4096];
  DeviceBlock a;
  a.ptr = a.base = mem;
  a.bytes = 1024;
  DeviceBlock b = a;
  b.ptr = b.base = mem + 1024;
  b.bytes = 2048;
  b.reserved = 4096;
  DeviceBlock imp;
  imp.ptr = imp.base = mem + 3072;
  imp.bytes = 512;
  imp.imported = true;
  DeviceBlock* ha = t.add(a);
  DeviceBlock* hb = t.add(b);
  DeviceBlock* hi = t.add(imp);
  auto s = t.counters().stats();
  CHECK(s.bytes_in_use == 3072);  // the import is the caller's
  CHECK(s.allocation_count == 2);
  CHECK(s.reserved_bytes == 4096);
  CHECK(t.find(ha)->bytes == 1024);
  CHECK(t.find(mem) == nullptr);  // a device address is not a handle
  CHECK(t.containing(mem + 1500) == hb);
  CHECK(t.containing(mem + 3100) == hi);
  CHECK(t.remove(ha));
  CHECK_FALSE(t.remove(ha));  // double free: refused, counters untouched
  s = t.counters().stats();
  CHECK(s.bytes_in_use == 2048);
  CHECK(s.peak_bytes_in_use == 3072);
  CHECK(t.remove(hi));
  CHECK(t.counters().stats().bytes_in_use == 2048);
  CHECK(t.remove(hb));
  s = t.counters().stats();
  CHECK(s.bytes_in_use == 0);
  CHECK(s.reserved_bytes == 0);
  CHECK(t.size() == 0);
}
