// Generated code on the device: a cubin (or PTX, JIT-compiled by the driver) loaded with
// cuModuleLoadData through the driver the probe dlopen'ed, its chain kernels looked up by
// name and launched with cuLaunchKernel on the run's stream (capturable in CUDA graphs).
#pragma once
#include "nvrtc.hpp"

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace nxrt::cuda {

class CodeModule {
 public:
  // Loads `image` (a cubin, or NUL-terminated PTX) on `device` and finds kernels
  // nxrt_chain_0 .. nxrt_chain_<chains-1>. Throws sdk::Error (NXRT_UNSUPPORTED with the
  // driver's reason when the driver refuses the image).
  CodeModule(const void* image, int device, size_t chains);
  ~CodeModule();
  CodeModule(const CodeModule&) = delete;
  CodeModule& operator=(const CodeModule&) = delete;

  // y[i] = chain(x[i]) for i < n, on `stream`.
  void launch(size_t chain, const void* x, void* y, int64_t n, cudaStream_t stream) const;

 private:
  int device_;
  void* module_ = nullptr;          // CUmodule
  std::vector<void*> functions_;    // CUfunction per chain
};

}  // namespace nxrt::cuda
