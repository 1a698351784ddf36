#include "device.hpp"

#include <fmt/format.h>

#include <cstring>

namespace nxrt::cuda {

using sdk::fail;

void cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  const std::string msg = fmt::format("CUDA {}: {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e));
  if (e == cudaErrorMemoryAllocation) sdk::fail_retryable(NXRT_OUT_OF_MEMORY, "{}", msg);
  if (e == cudaErrorInvalidValue || e == cudaErrorInvalidDevicePointer) fail(NXRT_INVALID_ARGUMENT, "{}", msg);
  if (e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure || e == cudaErrorHardwareStackError ||
      e == cudaErrorIllegalInstruction || e == cudaErrorMisalignedAddress || e == cudaErrorECCUncorrectable)
    fail(NXRT_DEVICE_LOST, "{}", msg);
  fail(NXRT_INTERNAL, "{}", msg);
}

DeviceGuard::DeviceGuard(int device) { cuda_check(cudaSetDevice(device), "cudaSetDevice"); }

// ---------------------------------------------------------------- streams, events

CudaStream::~CudaStream() {
  if (owned_ && s_) {
    cudaSetDevice(device_);
    cudaStreamDestroy(s_);
  }
}
void CudaStream::synchronize() {
  DeviceGuard g(device_);
  cuda_check(cudaStreamSynchronize(s_), "cudaStreamSynchronize");
}
void CudaStream::wait(sdk::Event& e) {
  DeviceGuard g(device_);
  cuda_check(cudaStreamWaitEvent(s_, static_cast<CudaEvent&>(e).get(), 0), "cudaStreamWaitEvent");
}

CudaEvent::CudaEvent(int device) : device_(device) {
  DeviceGuard g(device_);
  cuda_check(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), "cudaEventCreate");
}
CudaEvent::~CudaEvent() {
  if (e_) {
    cudaSetDevice(device_);
    cudaEventDestroy(e_);
  }
}
void CudaEvent::record(sdk::Stream& s) {
  DeviceGuard g(device_);
  cuda_check(cudaEventRecord(e_, static_cast<CudaStream&>(s).get()), "cudaEventRecord");
}
void CudaEvent::synchronize() {
  DeviceGuard g(device_);
  cuda_check(cudaEventSynchronize(e_), "cudaEventSynchronize");
}

// ---------------------------------------------------------------- session memory

DeviceContext::DeviceContext(const SessionOptions& o) : opt_(o) {
  DeviceGuard g(opt_.device);
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  // The session's arena: a memory pool of its own, so its memory and its statistics
  // are not shared with other sessions or other libraries in the process.
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = opt_.device;
  cuda_check(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate");
  uint64_t threshold = opt_.pool_release_threshold;
  cuda_check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold), "cudaMemPoolSetAttribute");
  if (opt_.vmm_arena) {
    size_t free_bytes = 0, total = 0;
    cuda_check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
    vmm_ = std::make_unique<VmmArena>(opt_.device, total, 64ull << 20);
  }
}

DeviceContext::~DeviceContext() {
  cudaSetDevice(opt_.device);
  cudaStreamSynchronize(stream_);
  release_deferred();
  if (lt_) {
    if (auto* l = CublasLt::get(nullptr)) l->cublasLtDestroy(lt_);
  }
#if NXRT_CUDA_HAVE_CUDNN
  if (dnn_) {
    if (auto* d = Cudnn::get(nullptr)) d->cudnnDestroy(dnn_);
  }
#endif
  for (auto& [p, held] : pinned_) {
    if (held.second.handle) {
      cudaHostUnregister(p);
      external_.release(held.second);
    } else {
      cudaFreeHost(p);
    }
  }
  cudaDeviceSynchronize();
  if (pool_) cudaMemPoolDestroy(pool_);
  if (stream_) cudaStreamDestroy(stream_);
}

void* DeviceContext::device_alloc(uint64_t bytes, uint64_t alignment, DeviceBlock* b) {
  const uint64_t size = rounded_size(bytes, alignment);
  // Pool and driver allocations are 256-byte aligned; a larger alignment over-allocates.
  const uint64_t extra = alignment > 256 ? alignment : 0;
  if (external_.active()) {
    nxrt_native_handle h = external_.allocate(NXRT_NATIVE_CUDA_POINTER, size + extra, alignment, uint64_t(opt_.device));
    b->external = true;
    b->native = h;
    b->base = reinterpret_cast<void*>(uintptr_t(h.handle));
    b->reserved = h.size;
  } else if (vmm_) {  // already aligned by the arena's sub-allocator
    b->base = vmm_->allocate(size, alignment);
    b->vmm = true;
    b->reserved = 0;  // the arena's mapped bytes are reported as a whole (stats())
  } else {
    void* p = nullptr;
    cuda_check(cudaMallocFromPoolAsync(&p, size + extra, pool_, stream_), "cudaMallocFromPoolAsync");
    // Usable on any stream once this returns.
    cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    b->base = p;
    b->reserved = 0;  // the pool's reservation is reported as a whole (stats())
  }
  auto base = reinterpret_cast<uintptr_t>(b->base);
  b->ptr = reinterpret_cast<void*>((base + alignment - 1) / alignment * alignment);
  b->bytes = size;
  return b->ptr;
}

void* DeviceContext::alloc(nxrt_memory_kind kind, uint64_t bytes, uint64_t alignment) {
  alignment = effective_alignment(alignment);
  DeviceGuard g(opt_.device);
  if (kind == NXRT_MEMORY_HOST_PINNED) {
    const uint64_t size = rounded_size(bytes, alignment);
    void* p = nullptr;
    nxrt_native_handle h{};
    if (external_.active()) {
      h = external_.allocate(NXRT_NATIVE_HOST_POINTER, size, alignment);
      p = reinterpret_cast<void*>(uintptr_t(h.handle));
      cudaError_t e = cudaHostRegister(p, h.size, cudaHostRegisterDefault);
      if (e != cudaSuccess) {
        external_.release(h);
        cuda_check(e, "cudaHostRegister of the external allocator's host memory");
      }
    } else {
      cuda_check(cudaMallocHost(&p, size), "cudaMallocHost");
    }
    if (uintptr_t(p) % alignment) fail(NXRT_OUT_OF_MEMORY, "pinned memory aligned below {}", alignment);
    {
      std::lock_guard lock(mu_);
      pinned_[p] = {size, h};
    }
    counters().alloc(size);
    counters().reserve(h.handle ? h.size : size);
    return p;
  }
  if (kind != NXRT_MEMORY_DEVICE) fail(NXRT_INVALID_ARGUMENT, "memory_alloc: memory kind {} is not allocated by a plugin", kind);
  DeviceBlock b;
  device_alloc(bytes, alignment, &b);
  return table_.add(b);
}

void DeviceContext::free(nxrt_memory_kind kind, void* handle) {
  cudaSetDevice(opt_.device);
  if (kind == NXRT_MEMORY_HOST_PINNED) {
    std::pair<uint64_t, nxrt_native_handle> held;
    {
      std::lock_guard lock(mu_);
      auto it = pinned_.find(handle);
      if (it == pinned_.end()) return;  // not ours: ignore rather than corrupt the heap
      held = it->second;
      pinned_.erase(it);
    }
    counters().free(held.first);
    if (held.second.handle) {
      cudaHostUnregister(handle);
      counters().unreserve(held.second.size);
      external_.release(held.second);
    } else {
      counters().unreserve(held.first);
      cudaFreeHost(handle);
    }
    return;
  }
  auto b = table_.remove(handle);
  if (!b || b->imported) return;
  if (b->external) external_.release(b->native);
  else if (b->vmm) vmm_->free(b->base);
  else cudaFreeAsync(b->base, stream_);
}

void* DeviceContext::import(const nxrt_native_handle& n) {
  if (n.type != NXRT_NATIVE_CUDA_POINTER)
    fail(NXRT_UNSUPPORTED, "the CUDA plugin imports CUDA_POINTER memory only (got native type {})", n.type);
  void* p = reinterpret_cast<void*>(uintptr_t(n.handle));
  if (!p) fail(NXRT_INVALID_ARGUMENT, "memory_import: a NULL device pointer");
  DeviceGuard g(opt_.device);
  cudaPointerAttributes attr{};
  cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail(NXRT_UNSUPPORTED, "memory_import: {} is not CUDA memory ({})", p, cudaGetErrorString(e));
  }
  if (attr.type != cudaMemoryTypeDevice || attr.device != opt_.device)
    fail(NXRT_UNSUPPORTED, "memory_import: {} is memory type {} on device {}, the session is on device {}", p, int(attr.type),
         attr.device, opt_.device);
  if (uintptr_t(p) % 256) fail(NXRT_UNSUPPORTED, "memory_import: {} is not 256-byte aligned", p);
  DeviceBlock b;
  b.ptr = b.base = p;
  b.bytes = n.size;
  b.imported = true;
  return table_.add(b);
}

void DeviceContext::set_allocator(const nxrt_device_allocator& a) {
  if (table_.size() || !pinned_.empty()) fail(NXRT_INVALID_ARGUMENT, "set_allocator after the session allocated memory");
  external_.set(a);
}

nxrt_memory_stats DeviceContext::stats() {
  nxrt_memory_stats s = counters().stats();
  uint64_t pool_reserved = 0;
  if (pool_ && cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &pool_reserved) == cudaSuccess)
    s.reserved_bytes += pool_reserved;
  if (vmm_) s.reserved_bytes += vmm_->mapped_bytes();
  return s;
}

const void* DeviceContext::address(nxrt_memory_kind kind, const void* handle, uint64_t offset, uint64_t bytes,
                                   const char* what) const {
  if (kind == NXRT_MEMORY_DEVICE) {
    const DeviceBlock* b = table_.find(handle);
    if (!b) fail(NXRT_INVALID_ARGUMENT, "{}: handle {} is not DEVICE memory of this CUDA session", what, handle);
    if (offset > b->bytes || bytes > b->bytes - offset)
      fail(NXRT_INVALID_ARGUMENT, "{}: {} bytes at offset {} overrun an allocation of {}", what, bytes, offset, b->bytes);
    return static_cast<const char*>(b->ptr) + offset;
  }
  if (kind == NXRT_MEMORY_HOST_PINNED) {
    // cudaMallocHost memory is mapped into the device's address space (UVA).
    return static_cast<const char*>(handle) + offset;
  }
  fail(NXRT_INVALID_ARGUMENT, "{} is in host memory; a CUDA kernel needs this session's memory", what);
}

void DeviceContext::copy(std::span<const nxrt_copy_region> regions, cudaStream_t stream, bool sync) {
  DeviceGuard g(opt_.device);
  if (!stream) {
    stream = stream_;
    sync = true;
  }
  for (auto& r : regions) {
    if (r.bytes == 0) continue;
    if (!r.src || !r.dst) fail(NXRT_INVALID_ARGUMENT, "copy region with a null buffer");
    const void* src = r.src_memory == NXRT_MEMORY_DEVICE ? address(r.src_memory, r.src, r.src_offset, r.bytes, "copy source")
                                                         : static_cast<const char*>(r.src) + r.src_offset;
    void* dst = r.dst_memory == NXRT_MEMORY_DEVICE
                    ? const_cast<void*>(address(r.dst_memory, r.dst, r.dst_offset, r.bytes, "copy destination"))
                    : static_cast<char*>(r.dst) + r.dst_offset;
    cuda_check(cudaMemcpyAsync(dst, src, r.bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync");
    counters().copied(r.src_memory, r.dst_memory, r.bytes);
  }
  if (sync) cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

void DeviceContext::copy_peer(DeviceContext& src, std::span<const nxrt_copy_region> regions, cudaStream_t stream, bool sync) {
  DeviceGuard g(opt_.device);
  if (!stream) {
    stream = stream_;
    sync = true;
  }
  for (auto& r : regions) {
    if (r.bytes == 0) continue;
    const void* s = src.address(NXRT_MEMORY_DEVICE, r.src, r.src_offset, r.bytes, "copy_peer source");
    void* d = const_cast<void*>(address(NXRT_MEMORY_DEVICE, r.dst, r.dst_offset, r.bytes, "copy_peer destination"));
    cuda_check(cudaMemcpyPeerAsync(d, opt_.device, s, src.device(), r.bytes, stream), "cudaMemcpyPeerAsync");
    counters().copied(NXRT_MEMORY_DEVICE, NXRT_MEMORY_DEVICE, r.bytes);
  }
  if (sync) cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

nxrt_native_handle DeviceContext::native_memory(const void* handle) const {
  const DeviceBlock* b = table_.find(handle);
  if (!b) fail(NXRT_INVALID_ARGUMENT, "native_handle: {} is not DEVICE memory of this session", handle);
  nxrt_native_handle h{};
  h.struct_size = sizeof h;
  h.type = NXRT_NATIVE_CUDA_POINTER;
  h.handle = uint64_t(uintptr_t(b->ptr));
  h.aux0 = uint64_t(opt_.device);
  h.size = b->bytes;
  return h;
}

void* DeviceContext::temp_alloc(uint64_t bytes, cudaStream_t stream, bool capturing) {
  bytes = rounded_size(bytes, 256);
  void* p = nullptr;
  if (external_.active()) {
    if (capturing) fail(NXRT_UNSUPPORTED, "CUDA graph capture with an external allocator");
    nxrt_native_handle h = external_.allocate(NXRT_NATIVE_CUDA_POINTER, bytes, 256, uint64_t(opt_.device));
    p = reinterpret_cast<void*>(uintptr_t(h.handle));
    std::lock_guard lock(mu_);
    external_temps_[p] = h;
  } else if (capturing) {
    cuda_check(cudaMallocAsync(&p, bytes, stream), "cudaMallocAsync (graph capture)");
  } else {
    cuda_check(cudaMallocFromPoolAsync(&p, bytes, pool_, stream), "cudaMallocFromPoolAsync");
  }
  counters().alloc(bytes);
  std::lock_guard lock(mu_);
  temp_sizes_[p] = bytes;
  return p;
}

void DeviceContext::temp_free(void* p, cudaStream_t stream, bool /*capturing*/, bool* deferred) {
  if (!p) return;
  uint64_t bytes = 0;
  {
    std::lock_guard lock(mu_);
    auto it = temp_sizes_.find(p);
    if (it != temp_sizes_.end()) {
      bytes = it->second;
      temp_sizes_.erase(it);
    }
  }
  counters().free(bytes);
  if (external_.active()) {
    std::lock_guard lock(mu_);
    deferred_.push_back(p);
    if (deferred) *deferred = true;
    return;
  }
  cuda_check(cudaFreeAsync(p, stream), "cudaFreeAsync");
}

void DeviceContext::release_deferred() {
  std::vector<std::pair<void*, nxrt_native_handle>> out;
  {
    std::lock_guard lock(mu_);
    for (void* p : deferred_) {
      auto it = external_temps_.find(p);
      if (it != external_temps_.end()) {
        out.emplace_back(p, it->second);
        external_temps_.erase(it);
      }
    }
    deferred_.clear();
  }
  for (auto& [p, h] : out) external_.release(h);
}

cublasLtHandle_t DeviceContext::cublas(std::string* why) {
  std::lock_guard lock(lib_mu_);
  if (lt_) return lt_;
  const CublasLt* l = CublasLt::get(why);
  if (!l) return nullptr;
  DeviceGuard g(opt_.device);
  cublasStatus_t st = l->cublasLtCreate(&lt_);
  if (st != CUBLAS_STATUS_SUCCESS) {
    *why = fmt::format("cublasLtCreate failed with status {}", int(st));
    lt_ = nullptr;
  }
  return lt_;
}

#if NXRT_CUDA_HAVE_CUDNN
cudnnHandle_t DeviceContext::cudnn(std::string* why) {
  std::lock_guard lock(lib_mu_);
  if (dnn_) return dnn_;
  const Cudnn* d = Cudnn::get(why);
  if (!d) return nullptr;
  DeviceGuard g(opt_.device);
  cudnnStatus_t st = d->cudnnCreate(&dnn_);
  if (st != CUDNN_STATUS_SUCCESS) {
    *why = fmt::format("cudnnCreate failed: {}", d->cudnnGetErrorString(st));
    dnn_ = nullptr;
  }
  return dnn_;
}
#endif

}  // namespace nxrt::cuda
