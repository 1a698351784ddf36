// Memory and transfer accounting for a plugin session (ABI 2.1 memory stats) and the
// caller's external allocator (ABI 2.1 session_set_allocator), thread-safe.
//
// Ownership: MemoryCounters owns plain counters; ExternalAllocator borrows the caller's allocator
// table, which must outlive the session. Thread class: any thread (atomics / the caller's rules).
#pragma once
#include "status.hpp"

#include <nxrt_ep.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace nxrt::sdk {

// Counters behind nxrt_memory_stats. Call alloc/free for every allocation the session
// makes (handed out or internal), reserve/unreserve for backing memory taken from the
// driver or the external allocator, and copied for every copy region performed.
class MemoryCounters {
 public:
  void alloc(uint64_t bytes) {
    std::lock_guard lock(mu_);
    in_use_ += bytes;
    if (in_use_ > peak_) peak_ = in_use_;
    ++count_;
  }
  void free(uint64_t bytes) {
    std::lock_guard lock(mu_);
    in_use_ -= bytes < in_use_ ? bytes : in_use_;
  }
  void reserve(uint64_t bytes) { reserved_ += bytes; }
  void unreserve(uint64_t bytes) { reserved_ -= bytes; }
  void copied(nxrt_memory_kind src, nxrt_memory_kind dst, uint64_t bytes) {
    const bool s_dev = src == NXRT_MEMORY_DEVICE, d_dev = dst == NXRT_MEMORY_DEVICE;
    std::lock_guard lock(mu_);
    if (s_dev && d_dev) ++d2d_, d2d_bytes_ += bytes;
    else if (d_dev) ++h2d_, h2d_bytes_ += bytes;
    else if (s_dev) ++d2h_, d2h_bytes_ += bytes;
    // host to host (pinned or plain): not a device transfer
  }
  nxrt_memory_stats stats() const {
    nxrt_memory_stats s{};
    s.struct_size = sizeof s;
    std::lock_guard lock(mu_);
    s.bytes_in_use = in_use_;
    s.peak_bytes_in_use = peak_;
    s.reserved_bytes = reserved_.load();
    s.allocation_count = count_;
    s.host_to_device_copies = h2d_;
    s.device_to_host_copies = d2h_;
    s.device_to_device_copies = d2d_;
    s.host_to_device_bytes = h2d_bytes_;
    s.device_to_host_bytes = d2h_bytes_;
    s.device_to_device_bytes = d2d_bytes_;
    return s;
  }

 private:
  mutable std::mutex mu_;
  uint64_t in_use_ = 0, peak_ = 0, count_ = 0;
  std::atomic<uint64_t> reserved_{0};
  uint64_t h2d_ = 0, d2h_ = 0, d2d_ = 0, h2d_bytes_ = 0, d2h_bytes_ = 0, d2d_bytes_ = 0;
};

// Counts `bytes` as in use while it lives: a plugin's own buffers (packed weights) held by
// a kernel. The counters must outlive it (a session outlives its kernels).
class HeldBytes {
 public:
  HeldBytes(MemoryCounters& c, uint64_t bytes) : c_(c), bytes_(bytes) { c_.alloc(bytes_); }
  ~HeldBytes() { c_.free(bytes_); }
  HeldBytes(const HeldBytes&) = delete;
  HeldBytes& operator=(const HeldBytes&) = delete;

 private:
  MemoryCounters& c_;
  uint64_t bytes_;
};

// The caller's allocator, once set (Session::set_allocator). allocate() fails with
// NXRT_OUT_OF_MEMORY when the caller's callback refuses or returns the wrong type.
class ExternalAllocator {
 public:
  void set(const nxrt_device_allocator& a) {
    if (a.struct_size < offsetof(nxrt_device_allocator, free) + sizeof(a.free) || !a.alloc || !a.free)
      fail(NXRT_INVALID_ARGUMENT, "external allocator: struct_size {} too small or a NULL callback", a.struct_size);
    a_ = a;
    set_ = true;
  }
  bool active() const { return set_; }
  nxrt_native_handle allocate(nxrt_native_type type, uint64_t bytes, uint64_t alignment, uint64_t device = 0,
                              uint32_t memory_type_index = 0) const {
    nxrt_allocation_request rq{};
    rq.struct_size = sizeof rq;
    rq.type = type;
    rq.bytes = bytes;
    rq.alignment = alignment;
    rq.device = device;
    rq.memory_type_index = memory_type_index;
    nxrt_native_handle h{};
    h.struct_size = sizeof h;
    if (a_.alloc(a_.user, &rq, &h) != 0 || h.handle == 0)
      fail(NXRT_OUT_OF_MEMORY, "the external allocator refused {} bytes", bytes);
    if (h.type != type || h.size < bytes) {
      a_.free(a_.user, &h);  // not usable, but the caller's: give it back
      fail(NXRT_OUT_OF_MEMORY, "the external allocator returned native type {} of {} bytes for a request of type {} and {} bytes",
           h.type, h.size, type, bytes);
    }
    return h;
  }
  void release(const nxrt_native_handle& h) const {
    if (set_) a_.free(a_.user, &h);
  }

 private:
  nxrt_device_allocator a_{};
  bool set_ = false;
};

}  // namespace nxrt::sdk
