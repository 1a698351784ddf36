// Device memory for plugins whose memory the host cannot address (GPUs, accelerators).
//
// The ABI passes every tensor as (void* handle, byte offset) plus a memory kind: for
// NXRT_MEMORY_DEVICE the handle is the plugin's own allocation object, for NXRT_MEMORY_HOST and
// HOST_PINNED it is a host pointer. Mixing them up (dereferencing a device handle, or casting a
// host pointer to a buffer object) is the classic device-plugin bug. DeviceMemorySession<Buffer>
// makes it impossible to write: the plugin implements alloc/free/copy in terms of its own Buffer
// type and typed DevicePtr<Buffer>s, and the SDK sorts each copy region into upload, download
// or device-to-device by its memory kinds. device_ptr<Buffer>(tensor) gives a kernel its
// input's or output's buffer, and fails when the tensor is not device memory.
//
// Ownership: a Buffer is owned by the session from allocate() until the host frees its handle
// (the SDK destroys it then); DevicePtrs are non-owning and valid until that free. HOST_PINNED
// memory is plain aligned host memory owned by the session until freed.
// Thread class: alloc, free, copy and the interop calls are [any-thread] (the ABI's memory
// rule): upload, download, copy_on_device, native_memory and adopt may run concurrently, so they
// must not share unguarded state; the buffer table is guarded here.
#pragma once
#include "plugin.hpp"
#include "tensor.hpp"

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>

namespace nxrt::sdk {

// A typed position in device memory: the plugin's buffer and a byte offset into it. Never a
// host pointer; the host never dereferences it.
template <typename Buffer>
struct DevicePtr {
  Buffer* buffer = nullptr;
  uint64_t offset = 0;
};

// The device buffer behind a kernel's tensor (an input or an output). Fails with
// NXRT_INVALID_ARGUMENT when the tensor is not NXRT_MEMORY_DEVICE memory.
template <typename Buffer, bool Const>
DevicePtr<std::conditional_t<Const, const Buffer, Buffer>> device_ptr(const BasicTensorView<Const>& t) {
  if (t.memory() != NXRT_MEMORY_DEVICE)
    fail(NXRT_INVALID_ARGUMENT, "expected a device tensor, got memory kind {} (a host pointer)", int(t.memory()));
  using B = std::conditional_t<Const, const Buffer, Buffer>;
  return {static_cast<B*>(t.handle()), t.byte_offset()};
}

template <typename Buffer>
class DeviceMemorySession : public Session {
 public:
  // Implemented by the plugin, each on its own Buffer type.
  virtual std::unique_ptr<Buffer> allocate(uint64_t bytes, uint64_t alignment) = 0;
  virtual void upload(DevicePtr<Buffer> dst, const void* src, uint64_t bytes, Stream* stream) = 0;
  virtual void download(void* dst, DevicePtr<const Buffer> src, uint64_t bytes, Stream* stream) = 0;
  virtual void copy_on_device(DevicePtr<Buffer> dst, DevicePtr<const Buffer> src, uint64_t bytes, Stream* stream) = 0;

  // Device interop, each for the feature that offers it; the SDK checks handles first.
  // NXRT_FEATURE_NATIVE_HANDLES: the native memory behind one of this session's live buffers
  // (a VkBuffer + offset, a CUDA pointer...), and the device's own objects (device, queue,
  // stream completion point). The handles stay the plugin's.
  virtual nxrt_native_handle native_memory(const Buffer&) { fail(NXRT_UNSUPPORTED, "no native handle for device memory"); }
  virtual nxrt_native_handle native_object(nxrt_native_object what, Stream*) {
    fail(NXRT_UNSUPPORTED, "no native handle for object kind {}", int(what));
  }
  // NXRT_FEATURE_MEMORY_IMPORT: a Buffer over memory someone else owns (the caller's buffer),
  // without a copy. Its destructor must drop the wrapping only; the SDK tracks it like any
  // buffer (copies are range-checked against native.size) but never counts it as allocated.
  virtual std::unique_ptr<Buffer> adopt(const nxrt_native_handle& native) {
    fail(NXRT_UNSUPPORTED, "memory import of native type {} is not supported", int(native.type));
  }

  nxrt_native_handle native_handle(nxrt_native_object what, const void* memory, Stream* stream) override {
    if (what != NXRT_NATIVE_OBJECT_MEMORY) return native_object(what, stream);
    std::lock_guard lock(mu_);
    auto it = buffers_.find(const_cast<void*>(memory));
    if (it == buffers_.end()) fail(NXRT_INVALID_ARGUMENT, "native_handle: {} is not a device buffer of this session", memory);
    return native_memory(*it->second.buffer);
  }
  void* import_memory(const nxrt_native_handle& native) override {
    std::unique_ptr<Buffer> b = adopt(native);
    if (!b) fail(NXRT_UNSUPPORTED, "memory import of native type {} is not supported", int(native.type));
    Buffer* handle = b.get();
    std::lock_guard lock(mu_);
    buffers_[handle] = {std::move(b), native.size, true};
    return handle;
  }

  void* alloc(nxrt_memory_kind kind, uint64_t bytes, uint64_t alignment) final {
    if (alignment < 64) alignment = 64;
    if (alignment & (alignment - 1)) fail(NXRT_INVALID_ARGUMENT, "alignment {} is not a power of two", alignment);
    if (kind != NXRT_MEMORY_DEVICE) {  // HOST_PINNED: host memory the host may address
      uint64_t rounded = bytes == 0 ? alignment : (bytes + alignment - 1) / alignment * alignment;
      void* p = std::aligned_alloc(alignment, rounded);
      if (!p) fail(NXRT_OUT_OF_MEMORY, "cannot allocate {} bytes of host memory", bytes);
      counters_.reserve(rounded);
      counters_.alloc(rounded);
      std::lock_guard lock(mu_);
      pinned_[p] = rounded;
      return p;
    }
    std::unique_ptr<Buffer> b = allocate(bytes, alignment);
    if (!b) fail(NXRT_OUT_OF_MEMORY, "cannot allocate {} bytes of device memory", bytes);
    Buffer* handle = b.get();
    counters_.reserve(bytes);
    counters_.alloc(bytes);
    std::lock_guard lock(mu_);
    buffers_[handle] = {std::move(b), bytes};
    return handle;
  }
  void free(nxrt_memory_kind kind, void* handle) final {
    if (!handle) return;
    std::unique_ptr<Buffer> doomed;  // destroyed outside the lock
    std::lock_guard lock(mu_);
    if (kind != NXRT_MEMORY_DEVICE) {
      auto it = pinned_.find(handle);
      if (it == pinned_.end()) return;  // not ours: ignore rather than corrupt the heap
      counters_.free(it->second);
      counters_.unreserve(it->second);
      pinned_.erase(it);
      std::free(handle);
      return;
    }
    auto it = buffers_.find(handle);
    if (it == buffers_.end()) return;
    if (!it->second.imported) {
      counters_.free(it->second.bytes);
      counters_.unreserve(it->second.bytes);
    }
    doomed = std::move(it->second.buffer);
    buffers_.erase(it);
  }
  void copy(std::span<const nxrt_copy_region> regions, Stream* stream) final {
    for (auto& r : regions) {
      if (r.bytes == 0) continue;
      if (!r.src || !r.dst) fail(NXRT_INVALID_ARGUMENT, "copy region with a null buffer");
      const bool src_dev = r.src_memory == NXRT_MEMORY_DEVICE, dst_dev = r.dst_memory == NXRT_MEMORY_DEVICE;
      if (src_dev) check_range(r.src, r.src_offset, r.bytes);
      if (dst_dev) check_range(r.dst, r.dst_offset, r.bytes);
      if (src_dev && dst_dev)
        copy_on_device({static_cast<Buffer*>(r.dst), r.dst_offset}, {static_cast<const Buffer*>(r.src), r.src_offset}, r.bytes, stream);
      else if (dst_dev)
        upload({static_cast<Buffer*>(r.dst), r.dst_offset}, static_cast<const char*>(r.src) + r.src_offset, r.bytes, stream);
      else if (src_dev)
        download(static_cast<char*>(r.dst) + r.dst_offset, {static_cast<const Buffer*>(r.src), r.src_offset}, r.bytes, stream);
      else
        std::memmove(static_cast<char*>(r.dst) + r.dst_offset, static_cast<const char*>(r.src) + r.src_offset, r.bytes);
      counters_.copied(r.src_memory, r.dst_memory, r.bytes);
    }
  }
  nxrt_memory_stats memory_stats() override { return counters_.stats(); }

 private:
  // A region past its buffer's end is the host's bug, reported rather than written.
  void check_range(const void* handle, uint64_t offset, uint64_t bytes) {
    std::lock_guard lock(mu_);
    auto it = buffers_.find(const_cast<void*>(handle));
    if (it == buffers_.end()) fail(NXRT_INVALID_ARGUMENT, "copy: {} is not a device buffer of this session", handle);
    if (offset > it->second.bytes || bytes > it->second.bytes - offset)
      fail(NXRT_INVALID_ARGUMENT, "copy: {} bytes at offset {} overrun a {}-byte device buffer", bytes, offset, it->second.bytes);
  }
  struct Held {
    std::unique_ptr<Buffer> buffer;
    uint64_t bytes = 0;
    bool imported = false;  // adopt(): the owner's memory, not counted as allocated
  };
  std::mutex mu_;
  std::map<void*, Held> buffers_;
  std::map<void*, uint64_t> pinned_;
  MemoryCounters counters_;
};

}  // namespace nxrt::sdk
