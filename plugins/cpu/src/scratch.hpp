// Per-thread, 64-byte aligned scratch buffers that grow and are reused across
// calls (no allocation in steady state). Each slot is an independent buffer;
// a kernel uses distinct slots for buffers it needs at the same time.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <new>

namespace nxrt::cpu {

// D: an operand a fused kernel makes per run before calling a kernel that uses A-C (the
// channel-scaled weights of ops_fusion_channel_scale.cpp).
enum ScratchSlot { kScratchA = 0, kScratchB = 1, kScratchC = 2, kScratchD = 3, kScratchSlots = 4 };

struct ScratchBuffers {
  void* p[kScratchSlots] = {};
  size_t size[kScratchSlots] = {};
  ~ScratchBuffers() {
    for (auto* q : p) std::free(q);
  }
};

inline float* scratch_floats(ScratchSlot slot, size_t count) {
  thread_local ScratchBuffers buffers;
  size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  if (buffers.size[slot] < bytes) {
    std::free(buffers.p[slot]);
    buffers.p[slot] = nullptr;
    buffers.size[slot] = 0;
    size_t grow = bytes + bytes / 4;
    grow = (grow + 63) / 64 * 64;
    void* q = std::aligned_alloc(64, grow);
    if (!q) throw std::bad_alloc();
    buffers.p[slot] = q;
    buffers.size[slot] = grow;
  }
  return static_cast<float*>(buffers.p[slot]);
}

// An owned, 64-byte aligned float array (packed weights).
class AlignedFloats {
 public:
  AlignedFloats() = default;
  explicit AlignedFloats(size_t n) { resize(n); }
  ~AlignedFloats() { std::free(p_); }
  AlignedFloats(AlignedFloats&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  AlignedFloats& operator=(AlignedFloats&& o) noexcept {
    if (this != &o) { std::free(p_); p_ = o.p_; n_ = o.n_; o.p_ = nullptr; o.n_ = 0; }
    return *this;
  }
  void resize(size_t n) {
    std::free(p_);
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    p_ = static_cast<float*>(std::aligned_alloc(64, bytes ? bytes : 64));
    if (!p_) throw std::bad_alloc();
    n_ = n;
  }
  float* data() { return p_; }
  const float* data() const { return p_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }

 private:
  float* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace nxrt::cpu
