// Graph-output buffers handed back by released outputs, reused by the next runs.
//
// Each run returns its outputs in fresh host buffers the caller owns. Allocating and
// first-touching those every run is not free: on a virtual machine a page fault costs
// ~10 us, so a 384 KiB output (the transformer's) took 0.05-1.1 ms per run to allocate and
// zero. Released outputs (nxrt_outputs_release) give their buffers here, and the session
// binds its next outputs to them, as ONNX Runtime's arena does for its OrtValues.
#pragma once
#include "host_tensor.hpp"

#include <cstddef>
#include <mutex>
#include <vector>

namespace nxrt {

class OutputBuffers {
 public:
  // max_buffers: how many released buffers are kept (the largest are dropped first).
  explicit OutputBuffers(size_t max_buffers) : max_buffers_(max_buffers) {}

  // A buffer of exactly `bytes` (contents unspecified) when a kept one fits (at most 1/4
  // larger, so a small output does not pin a large buffer); else an empty one.
  Bytes take(size_t bytes);
  // Sizes an output's buffer to `bytes`: a kept one (take) when it has none yet.
  void size_output(Bytes& data, size_t bytes) {
    if (data.empty()) data = take(bytes);
    data.resize(bytes);
  }
  // Keeps `b` for a later take when it is owned and at least kMinBytes; else frees it.
  void give(Bytes&& b);

  static constexpr size_t kMinBytes = size_t(64) << 10;  // smaller ones come from malloc's bins

 private:
  std::mutex mu_;
  std::vector<Bytes> kept_;
  size_t max_buffers_;
};

}  // namespace nxrt
