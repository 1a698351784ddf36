// The optional growable virtual-memory arena (session option cuda.vmm_arena=1): one
// virtual address range reserved up front (cuMemAddressReserve, the device's memory size),
// physical memory created and mapped at its end in chunks as the session needs more
// (cuMemCreate, cuMemMap, cuMemSetAccess), so the arena grows without moving and the
// session's DEVICE allocations are sub-allocated (range_allocator.*) from one contiguous
// range. The driver functions are looked up in the probe's dlopen'ed libcuda.
#pragma once
#include "range_allocator.hpp"

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace nxrt::cuda {

class VmmArena {
 public:
  // Throws sdk::Error (UNSUPPORTED) when the driver lacks the functions or the device
  // lacks virtual memory management.
  VmmArena(int device, uint64_t reserve_bytes, uint64_t chunk_bytes);
  ~VmmArena();
  VmmArena(const VmmArena&) = delete;
  VmmArena& operator=(const VmmArena&) = delete;

  void* allocate(uint64_t bytes, uint64_t alignment);
  bool free(void* p);
  uint64_t mapped_bytes() const;

 private:
  void grow(uint64_t at_least);
  struct Driver;
  const Driver* d_;
  int device_;
  uint64_t base_ = 0, reserved_ = 0, granularity_ = 0, chunk_ = 0, mapped_ = 0;
  std::vector<std::pair<unsigned long long, uint64_t>> chunks_;  // (CUmemGenericAllocationHandle, bytes)
  RangeAllocator ranges_;
  mutable std::mutex mu_;
};

}  // namespace nxrt::cuda
