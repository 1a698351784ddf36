// I/O binding: tensors that live in an EP session's memory, and what one run reads
// from and writes to them (nxrt_binding in the C API). The executor places bound
// inputs and outputs straight into the kernels' slots, so a run whose inputs and
// outputs stay on the device copies nothing through the host.
#pragma once
#include "host_value.hpp"
#include "session.hpp"

#include <memory>
#include <string>
#include <vector>

namespace nxrt {

// Memory of one EP session holding one dense tensor. Keeps the EP session (and so its
// plugin) alive: a tensor may outlive the host session that made it.
struct DeviceTensor {
  std::shared_ptr<EpInstance> ep;
  nxrt_dtype dtype = NXRT_DTYPE_UNDEFINED;
  std::vector<int64_t> dims;
  void* handle = nullptr;
  uint64_t offset = 0;
  uint64_t bytes = 0;

  bool imported = false;  // memory the caller or another plugin owns (import)

  // Allocates through ep->alloc_device (counted, capped).
  static std::shared_ptr<DeviceTensor> allocate(std::shared_ptr<EpInstance> ep, nxrt_dtype dtype, std::vector<int64_t> dims);
  // The tensor at the start of `native` (a HOST_POINTER; a VULKAN_BUFFER whose value is
  // the tensor's byte offset in the buffer...), imported by the EP without a copy
  // (NXRT_FEATURE_MEMORY_IMPORT). The memory stays its owner's, who keeps it alive while
  // the tensor lives. NXRT_ERR_UNSUPPORTED with the plugin's reason when it cannot.
  static std::shared_ptr<DeviceTensor> import(std::shared_ptr<EpInstance> ep, const nxrt_native_handle& native,
                                              nxrt_dtype dtype, std::vector<int64_t> dims);
  // Synchronous transfers between this tensor and host memory of exactly `bytes` bytes.
  void upload(const void* data, uint64_t bytes) const;
  void download(void* data, uint64_t bytes) const;
  // Copies `src` (same dtype and shape) into `dst`, synchronously and by the shortest way:
  // within one EP session; between two sessions of one plugin instance with copy_peer
  // (NXRT_FEATURE_PEER_COPY); else through host memory (directly from or into a
  // host-addressable side); else by one plugin importing the other's memory
  // (NXRT_FEATURE_MEMORY_IMPORT) and copying on its own device; else via the source
  // plugin's pinned memory when it has some, or plain host memory.
  static void copy(const DeviceTensor& src, const DeviceTensor& dst);
  ~DeviceTensor();

 private:
  static bool copy_by_import(const DeviceTensor& src, const DeviceTensor& dst);
};

// One graph input of a run: host memory (the caller's), a device tensor, or (value set)
// a sequence or optional for an input of that kind.
struct BoundInput {
  std::string name;
  nxrt_dtype dtype = NXRT_DTYPE_UNDEFINED;
  std::vector<int64_t> dims;
  const void* host = nullptr;
  std::shared_ptr<DeviceTensor> device;
  ValuePtr value;
};

// One graph output of a run.
struct BoundOutput {
  enum Kind { Host, Device, Leave } kind = Host;
  std::shared_ptr<DeviceTensor> tensor;  // Device: the caller's buffer; Leave: set by the run
  int ep = -1;                           // Leave: the EP whose memory keeps it
};

// A caller's stream for one EP of the session: the run's work for that EP is queued on
// it, and when nothing of the run needs the host the run returns without waiting.
struct CallerStream {
  int ep = -1;
  nxrt_stream* stream = nullptr;
};

}  // namespace nxrt
