#include "range_allocator.hpp"

namespace nxrt::cuda {

std::optional<uint64_t> RangeAllocator::allocate(uint64_t size, uint64_t alignment) {
  if (size == 0) size = 1;
  if (alignment == 0 || (alignment & (alignment - 1))) return std::nullopt;
  auto best = free_.end();
  uint64_t best_waste = UINT64_MAX;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const uint64_t start = it->first, aligned = (start + alignment - 1) / alignment * alignment;
    const uint64_t pad = aligned - start;
    if (pad > it->second || it->second - pad < size) continue;
    const uint64_t waste = it->second - pad - size;
    if (waste < best_waste) {
      best = it;
      best_waste = waste;
      if (waste == 0) break;
    }
  }
  if (best == free_.end()) return std::nullopt;
  const uint64_t start = best->first, range = best->second;
  const uint64_t aligned = (start + alignment - 1) / alignment * alignment;
  const uint64_t taken = aligned - start + size;
  free_.erase(best);
  if (range > taken) free_[start + taken] = range - taken;
  blocks_[aligned] = {start, taken};
  used_bytes_ += taken;
  return aligned;
}

void RangeAllocator::insert_free(uint64_t offset, uint64_t size) {
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {  // merge with the range after
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {  // merge with the range before
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  free_[offset] = size;
}

bool RangeAllocator::free(uint64_t offset) {
  auto it = blocks_.find(offset);
  if (it == blocks_.end()) return false;
  const auto [start, size] = it->second;
  blocks_.erase(it);
  used_bytes_ -= size;
  insert_free(start, size);
  return true;
}

void RangeAllocator::grow(uint64_t capacity) {
  if (capacity <= capacity_) return;
  insert_free(capacity_, capacity - capacity_);
  capacity_ = capacity;
}

uint64_t RangeAllocator::largest_free() const {
  uint64_t m = 0;
  for (auto& [o, s] : free_) m = s > m ? s : m;
  return m;
}

}  // namespace nxrt::cuda
