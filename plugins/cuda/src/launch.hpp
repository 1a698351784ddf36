// Enqueues one IR node on a stream: the plugin's own kernels (kernels.hpp), cuBLASLt for
// MatMul/Gemm and convolution GEMMs, cuDNN for convolutions when it loads.
#pragma once
#include "device.hpp"
#include "ir.hpp"
#include "kernels.hpp"
#include "schedule.hpp"

#include <set>
#include <vector>

namespace nxrt::cuda {

// Where a node's work goes and where its temporaries come from.
struct LaunchEnv {
  DeviceContext& dev;
  cudaStream_t stream;
  bool capturing = false;  // inside a CUDA graph capture
  bool deferred = false;   // a temporary waits for the stream (external allocator)
  // Where the GEMM / convolution algorithm keys used are recorded (a kernel exports their choices).
  std::set<std::vector<int64_t>>* gemm_keys = nullptr;
  std::set<std::vector<int64_t>>* conv_keys = nullptr;
  void* temp(uint64_t bytes) { return dev.temp_alloc(bytes, stream, capturing); }
  void release(void* p) { dev.temp_free(p, stream, capturing, &deferred); }
};

void launch_node(LaunchEnv& env, const IrGraph& g, const IrNode& n, const NodeIo& io);

// Row-major C[m,n] = alpha * op(A)[m,k] op(B)[k,n] over `batch` matrices (strides in
// elements, 0 to broadcast), with an optional bias per column of C and Relu, through
// cuBLASLt. Exposed for the GEMM benchmark of tools/gpu_check.sh.
struct GemmDesc {
  k::Float t = k::Float::F32;
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
  float alpha = 1.f;
  const void* bias = nullptr;  // [n], C's element type
  bool relu = false;
};
void gemm(LaunchEnv& env, const GemmDesc& d);

}  // namespace nxrt::cuda
