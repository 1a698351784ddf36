// The memory planner (Session::plan_memory, planner.cpp): per memory location, one
// arena per run; every value with a static shape that is neither a graph input, a graph
// output nor a constant gets an offset in it, reused between values whose lifetimes
// (first to last step that touches them) do not overlap. Values without a static
// shape are allocated while the run binds them.
#pragma once

#include <cstdint>
#include <vector>

namespace nxrt {

// A buffer alive from step `first` to step `last` (inclusive), `bytes` long (already aligned).
struct Lifetime {
  int first = 0, last = 0;
  uint64_t bytes = 0;
};

// Places the buffers in one arena: largest first, each at the lowest offset not used by a
// buffer whose lifetime overlaps. offsets[i] is items[i]'s; returns the arena size.
uint64_t place_by_lifetime(const std::vector<Lifetime>& items, std::vector<uint64_t>& offsets);

}  // namespace nxrt
