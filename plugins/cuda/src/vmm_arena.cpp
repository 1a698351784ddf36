#include "vmm_arena.hpp"

#include "driver_probe.hpp"

#include <cuda.h>  // types only: the functions come from the probe's libcuda handle
#include <dlfcn.h>
#include <nxrt_sdk/status.hpp>

namespace nxrt::cuda {

using sdk::fail;

struct VmmArena::Driver {
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetAttribute) device_attribute = nullptr;
  decltype(&::cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&::cuMemAddressReserve) reserve = nullptr;
  decltype(&::cuMemAddressFree) address_free = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) set_access = nullptr;

  static const Driver* get() {
    static const Driver d = [] {
      Driver r;
      void* lib = driver_library();
      if (!lib) return r;
      auto sym = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name)); };
      sym(r.device_get, "cuDeviceGet");
      sym(r.device_attribute, "cuDeviceGetAttribute");
      sym(r.granularity, "cuMemGetAllocationGranularity");
      sym(r.reserve, "cuMemAddressReserve");
      sym(r.address_free, "cuMemAddressFree");
      sym(r.create, "cuMemCreate");
      sym(r.release, "cuMemRelease");
      sym(r.map, "cuMemMap");
      sym(r.unmap, "cuMemUnmap");
      sym(r.set_access, "cuMemSetAccess");
      return r;
    }();
    const bool ok = d.device_get && d.device_attribute && d.granularity && d.reserve && d.address_free && d.create &&
                    d.release && d.map && d.unmap && d.set_access;
    return ok ? &d : nullptr;
  }
};

namespace {

void drv_check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  if (r == CUDA_ERROR_OUT_OF_MEMORY) sdk::fail_retryable(NXRT_OUT_OF_MEMORY, "{}: out of device memory", what);
  fail(NXRT_INTERNAL, "{} failed with CUresult {}", what, int(r));
}

CUmemAllocationProp props(int device) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  return p;
}

uint64_t round_up(uint64_t v, uint64_t g) { return (v + g - 1) / g * g; }

}  // namespace

VmmArena::VmmArena(int device, uint64_t reserve_bytes, uint64_t chunk_bytes) : d_(Driver::get()), device_(device) {
  if (!d_) fail(NXRT_UNSUPPORTED, "cuda.vmm_arena: the driver has no virtual memory management functions");
  CUdevice dev = 0;
  drv_check(d_->device_get(&dev, device), "cuDeviceGet");
  int supported = 0;
  drv_check(d_->device_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev), "cuDeviceGetAttribute");
  if (!supported) fail(NXRT_UNSUPPORTED, "cuda.vmm_arena: device {} has no virtual memory management", device);
  CUmemAllocationProp p = props(device);
  size_t g = 0;
  drv_check(d_->granularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity");
  granularity_ = g ? g : (2u << 20);
  reserved_ = round_up(reserve_bytes, granularity_);
  chunk_ = round_up(chunk_bytes ? chunk_bytes : (64u << 20), granularity_);
  CUdeviceptr base = 0;
  drv_check(d_->reserve(&base, reserved_, granularity_, 0, 0), "cuMemAddressReserve");
  base_ = base;
}

VmmArena::~VmmArena() {
  uint64_t at = 0;
  for (auto& [h, bytes] : chunks_) {
    d_->unmap(base_ + at, bytes);
    d_->release(h);
    at += bytes;
  }
  if (base_) d_->address_free(base_, reserved_);
}

void VmmArena::grow(uint64_t at_least) {
  const uint64_t bytes = round_up(at_least > chunk_ ? at_least : chunk_, granularity_);
  if (mapped_ + bytes > reserved_)
    sdk::fail_retryable(NXRT_OUT_OF_MEMORY, "cuda.vmm_arena: {} more bytes exceed the {} reserved", bytes, reserved_);
  CUmemAllocationProp p = props(device_);
  CUmemGenericAllocationHandle h = 0;
  drv_check(d_->create(&h, bytes, &p, 0), "cuMemCreate");
  CUresult r = d_->map(base_ + mapped_, bytes, 0, h, 0);
  if (r == CUDA_SUCCESS) {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device_;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = d_->set_access(base_ + mapped_, bytes, &access, 1);
    if (r != CUDA_SUCCESS) d_->unmap(base_ + mapped_, bytes);
  }
  if (r != CUDA_SUCCESS) {
    d_->release(h);
    drv_check(r, "cuMemMap/cuMemSetAccess");
  }
  chunks_.push_back({h, bytes});
  mapped_ += bytes;
  ranges_.grow(mapped_);
}

void* VmmArena::allocate(uint64_t bytes, uint64_t alignment) {
  std::lock_guard lock(mu_);
  auto o = ranges_.allocate(bytes, alignment);
  if (!o) {
    grow(bytes + alignment);
    o = ranges_.allocate(bytes, alignment);
  }
  if (!o) fail(NXRT_OUT_OF_MEMORY, "cuda.vmm_arena: no room for {} bytes after growing", bytes);
  return reinterpret_cast<void*>(uintptr_t(base_ + *o));
}

bool VmmArena::free(void* p) {
  std::lock_guard lock(mu_);
  const uint64_t a = uint64_t(uintptr_t(p));
  return a >= base_ && ranges_.free(a - base_);
}

uint64_t VmmArena::mapped_bytes() const {
  std::lock_guard lock(mu_);
  return mapped_;
}

}  // namespace nxrt::cuda
