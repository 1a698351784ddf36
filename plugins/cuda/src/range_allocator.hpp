// Offsets inside a growable range: the sub-allocator of the virtual-memory arena
// (vmm_arena.*). Best fit among free ranges, alignment padding kept with its block, free
// neighbours coalesced; growing appends free space at the end. Host-only (unit-tested).
#pragma once
#include <cstdint>
#include <map>
#include <optional>

namespace nxrt::cuda {

class RangeAllocator {
 public:
  // An offset aligned to `alignment` (a power of two) with `size` bytes, or nullopt when no
  // free range fits (grow, then ask again). size 0 takes one byte so offsets stay unique.
  std::optional<uint64_t> allocate(uint64_t size, uint64_t alignment);
  // Gives back what allocate returned; false for an offset that is not allocated.
  bool free(uint64_t offset);
  // Extends the range to `capacity` bytes (never shrinks).
  void grow(uint64_t capacity);
  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_bytes_; }
  size_t free_ranges() const { return free_.size(); }
  // The largest free range (what one allocation could take without growing).
  uint64_t largest_free() const;

 private:
  void insert_free(uint64_t offset, uint64_t size);
  std::map<uint64_t, uint64_t> free_;                          // offset -> size
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> blocks_;   // returned offset -> (start, size incl. padding)
  uint64_t capacity_ = 0, used_bytes_ = 0;
};

}  // namespace nxrt::cuda
