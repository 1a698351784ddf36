#include "arena.hpp"

#include <nxrt_sdk/status.hpp>

namespace nxrt::cuda {

uint64_t effective_alignment(uint64_t requested) {
  if (requested & (requested - 1)) sdk::fail(NXRT_INVALID_ARGUMENT, "alignment {} is not a power of two", requested);
  return requested < 256 ? 256 : requested;
}

uint64_t rounded_size(uint64_t bytes, uint64_t alignment) {
  if (bytes > UINT64_MAX - alignment) sdk::fail(NXRT_OUT_OF_MEMORY, "{} bytes cannot be allocated", bytes);
  const uint64_t r = (bytes + alignment - 1) / alignment * alignment;
  return r ? r : alignment;
}

DeviceBlock* AllocationTable::add(const DeviceBlock& b) {
  auto owned = std::make_unique<DeviceBlock>(b);
  DeviceBlock* h = owned.get();
  {
    std::lock_guard lock(mu_);
    blocks_[h] = std::move(owned);
  }
  if (!b.imported) {
    counters_.alloc(b.bytes);
    counters_.reserve(b.reserved);
  }
  return h;
}

std::optional<DeviceBlock> AllocationTable::remove(const void* handle) {
  std::unique_ptr<DeviceBlock> b;
  {
    std::lock_guard lock(mu_);
    auto it = blocks_.find(handle);
    if (it == blocks_.end()) return std::nullopt;
    b = std::move(it->second);
    blocks_.erase(it);
  }
  if (!b->imported) {
    counters_.free(b->bytes);
    counters_.unreserve(b->reserved);
  }
  return *b;
}

const DeviceBlock* AllocationTable::find(const void* handle) const {
  std::lock_guard lock(mu_);
  auto it = blocks_.find(handle);
  return it == blocks_.end() ? nullptr : it->second.get();
}

const DeviceBlock* AllocationTable::containing(const void* p) const {
  std::lock_guard lock(mu_);
  auto a = reinterpret_cast<uintptr_t>(p);
  for (auto& [h, b] : blocks_) {
    auto base = reinterpret_cast<uintptr_t>(b->ptr);
    if (a >= base && a < base + b->bytes) return b.get();
  }
  return nullptr;
}

size_t AllocationTable::size() const {
  std::lock_guard lock(mu_);
  return blocks_.size();
}

}  // namespace nxrt::cuda
