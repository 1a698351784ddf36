// Bookkeeping of a session's memory, independent of the device so it is unit-tested on
// the CPU: every DEVICE handle the session gave out (memory_alloc, imports, its own
// buffers), what it counts as in use, and the accounting behind session_stats
// (NXRT_FEATURE_MEMORY_STATS). The bytes themselves come from the session's
// stream-ordered CUDA memory pool or the caller's allocator (device.cpp).
#pragma once
#include <nxrt_native.h>
#include <nxrt_sdk/memory_accounting.hpp>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

namespace nxrt::cuda {

// One DEVICE handle: the plugin's object behind the opaque void* the host holds.
struct DeviceBlock {
  void* ptr = nullptr;      // device address (UVA), aligned as requested
  void* base = nullptr;     // what the allocator returned (ptr may be above it)
  uint64_t bytes = 0;       // usable bytes (requested, rounded to the alignment)
  uint64_t reserved = 0;    // backing bytes held for it (the allocator may give more)
  bool imported = false;    // the caller's memory: never freed here, not counted
  bool external = false;    // from the caller's allocator: given back through it
  bool vmm = false;         // from the virtual-memory arena (vmm_arena.*)
  nxrt_native_handle native{};  // as the external allocator returned it
};

class AllocationTable {
 public:
  // Records a block and counts it; returns the handle to give the host.
  DeviceBlock* add(const DeviceBlock& b);
  // Removes a handle of this table (nullopt: not ours, e.g. a double free).
  std::optional<DeviceBlock> remove(const void* handle);
  // The block behind a handle, or nullptr when the handle is not this session's.
  const DeviceBlock* find(const void* handle) const;
  // The block containing device address p (imports and allocations), or nullptr.
  const DeviceBlock* containing(const void* p) const;
  size_t size() const;
  sdk::MemoryCounters& counters() { return counters_; }

 private:
  mutable std::mutex mu_;
  std::map<const void*, std::unique_ptr<DeviceBlock>> blocks_;
  sdk::MemoryCounters counters_;
};

// Rounds bytes up to a multiple of alignment (a power of two >= 256, the tensor
// alignment); zero bytes get one unit so every handle is unique.
uint64_t rounded_size(uint64_t bytes, uint64_t alignment);
// The alignment the session guarantees for a request.
uint64_t effective_alignment(uint64_t requested);

}  // namespace nxrt::cuda
