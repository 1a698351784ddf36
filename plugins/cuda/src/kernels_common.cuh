// Device-side helpers shared by the .cu files: float16/float32 loads and stores, grid
// sizing for element-wise kernels.
#pragma once
#include "kernels.hpp"

#include <cuda_fp16.h>

#include <type_traits>

namespace nxrt::cuda::k {

__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }

constexpr int kThreads = 256;
inline unsigned grid_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 65535 * 32 ? (b > 0 ? b : 1) : 65535 * 32);
}

// Runs f<float> or f<__half> for the tensor's storage type.
template <typename F>
cudaError_t by_float(Float t, F&& f) {
  if (t == Float::F16) return f(static_cast<__half*>(nullptr));
  return f(static_cast<float*>(nullptr));
}

#define NXRT_GRID_STRIDE(i, n) \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

}  // namespace nxrt::cuda::k
