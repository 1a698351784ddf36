// One session's device state: the device ordinal, its stream-ordered memory pool (the
// session's arena), the handle table and counters (arena.hpp), the caller's allocator,
// pinned host memory, an internal stream, and the cuBLASLt/cuDNN handles. Streams and
// events of the ABI wrap cudaStream_t / cudaEvent_t.
#pragma once
#include "arena.hpp"
#include "cuda_libs.hpp"
#include "vmm_arena.hpp"

#include <nxrt_sdk/plugin.hpp>

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace nxrt::cuda {

// Throws an sdk::Error for a failed CUDA call (out of memory stays retryable).
void cuda_check(cudaError_t e, const char* what);

// Makes `device` current on this thread for the scope (CUDA's current device is per thread).
struct DeviceGuard {
  explicit DeviceGuard(int device);
};

struct SessionOptions {
  int device = 0;
  bool allow_tf32 = false;   // cuda.allow_tf32: float32 GEMMs/convs may use TF32 tensor cores
  bool cuda_graph = false;   // cuda.cuda_graph: capture a group's launches once, replay them
  bool use_cudnn = true;     // cuda.cudnn: convolutions through cuDNN when it loads
  uint64_t pool_release_threshold = UINT64_MAX;  // bytes the arena keeps when idle
  bool vmm_arena = false;    // cuda.vmm_arena: DEVICE allocations from a growable virtual-memory arena
};

class CudaStream : public sdk::Stream {
 public:
  CudaStream(int device, cudaStream_t s, bool owned) : device_(device), s_(s), owned_(owned) {}
  ~CudaStream() override;
  void synchronize() override;
  void wait(sdk::Event& e) override;
  cudaStream_t get() const { return s_; }
  int device() const { return device_; }

 private:
  int device_;
  cudaStream_t s_;
  bool owned_;
};

class CudaEvent : public sdk::Event {
 public:
  explicit CudaEvent(int device);
  ~CudaEvent() override;
  void record(sdk::Stream& s) override;
  void synchronize() override;
  cudaEvent_t get() const { return e_; }

 private:
  int device_;
  cudaEvent_t e_ = nullptr;
};

class DeviceContext {
 public:
  explicit DeviceContext(const SessionOptions& o);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  const SessionOptions& options() const { return opt_; }
  int device() const { return opt_.device; }
  cudaStream_t internal_stream() const { return stream_; }

  // ABI memory: DEVICE handles are DeviceBlock*; HOST_PINNED handles are host pointers.
  void* alloc(nxrt_memory_kind kind, uint64_t bytes, uint64_t alignment);
  void free(nxrt_memory_kind kind, void* handle);
  void* import(const nxrt_native_handle& n);
  void set_allocator(const nxrt_device_allocator& a);
  nxrt_memory_stats stats();
  void copy(std::span<const nxrt_copy_region> regions, cudaStream_t stream, bool sync);
  void copy_peer(DeviceContext& src, std::span<const nxrt_copy_region> regions, cudaStream_t stream, bool sync);
  nxrt_native_handle native_memory(const void* handle) const;

  // The device address of a tensor (DEVICE handle + offset, or pinned host memory).
  const void* address(nxrt_memory_kind kind, const void* handle, uint64_t offset, uint64_t bytes, const char* what) const;

  // Temporaries of a kernel, ordered on `stream` (the pool), or through the caller's
  // allocator (then freed only once the stream is synchronized: `deferred` is set).
  void* temp_alloc(uint64_t bytes, cudaStream_t stream, bool capturing);
  void temp_free(void* p, cudaStream_t stream, bool capturing, bool* deferred);
  void release_deferred();
  bool external_allocator() const { return external_.active(); }

  // Library handles, made on first use; nullptr (with the reason) when unavailable.
  cublasLtHandle_t cublas(std::string* why);
#if NXRT_CUDA_HAVE_CUDNN
  cudnnHandle_t cudnn(std::string* why);
  std::mutex& cudnn_mutex() { return cudnn_mu_; }
#endif
  sdk::MemoryCounters& counters() { return table_.counters(); }

  // cuBLASLt algorithms chosen per GEMM shape (the heuristic query costs tens of
  // microseconds; a run repeats the same shapes).
  bool cached_algo(const std::vector<int64_t>& key, cublasLtMatmulHeuristicResult_t* out) {
    std::lock_guard lock(algo_mu_);
    auto it = algos_.find(key);
    if (it == algos_.end()) return false;
    *out = it->second;
    return true;
  }
  void cache_algo(const std::vector<int64_t>& key, const cublasLtMatmulHeuristicResult_t& r) {
    std::lock_guard lock(algo_mu_);
    algos_[key] = r;
  }
#if NXRT_CUDA_HAVE_CUDNN
  // cuDNN forward algorithms per convolution shape (same reason).
  bool cached_conv_algo(const std::vector<int64_t>& key, cudnnConvolutionFwdAlgoPerf_t* out) {
    std::lock_guard lock(algo_mu_);
    auto it = conv_algos_.find(key);
    if (it == conv_algos_.end()) return false;
    *out = it->second;
    return true;
  }
  void cache_conv_algo(const std::vector<int64_t>& key, const cudnnConvolutionFwdAlgoPerf_t& r) {
    std::lock_guard lock(algo_mu_);
    conv_algos_[key] = r;
  }
#endif

 private:
  void* device_alloc(uint64_t bytes, uint64_t alignment, DeviceBlock* block);
  SessionOptions opt_;
  cudaStream_t stream_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
  AllocationTable table_;
  sdk::ExternalAllocator external_;
  std::mutex mu_;
  std::map<void*, std::pair<uint64_t, nxrt_native_handle>> pinned_;  // pointer -> (bytes, external handle)
  std::map<void*, nxrt_native_handle> external_temps_;
  std::vector<void*> deferred_;
  std::map<void*, uint64_t> temp_sizes_;
  std::unique_ptr<VmmArena> vmm_;
  std::mutex algo_mu_;
  std::map<std::vector<int64_t>, cublasLtMatmulHeuristicResult_t> algos_;
#if NXRT_CUDA_HAVE_CUDNN
  std::map<std::vector<int64_t>, cudnnConvolutionFwdAlgoPerf_t> conv_algos_;
#endif
  std::mutex lib_mu_;
  cublasLtHandle_t lt_ = nullptr;
#if NXRT_CUDA_HAVE_CUDNN
  cudnnHandle_t dnn_ = nullptr;
  std::mutex cudnn_mu_;
#endif
};

}  // namespace nxrt::cuda
