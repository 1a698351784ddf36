// cuBLAS directly, as the yardstick for the CUDA plugin's GEMM (tools/gpu_check.sh):
// C = A B for square n x n matrices, float32 (FP32 compute, and TF32) and float16 (FP32
// accumulate), timed with CUDA events over `iters` calls after a warm-up.
// Prints one JSON line per case: {"case": ..., "n": ..., "ms": ..., "tflops": ...}.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

bool ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}
bool ok(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) std::fprintf(stderr, "%s: cuBLAS status %d\n", what, int(s));
  return s == CUBLAS_STATUS_SUCCESS;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 4096;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 50;
  cublasHandle_t h;
  if (!ok(cublasCreate(&h), "cublasCreate")) return 1;
  void *a, *b, *c;
  const size_t bytes = size_t(n) * n * 4;
  if (!ok(cudaMalloc(&a, bytes), "cudaMalloc") || !ok(cudaMalloc(&b, bytes), "cudaMalloc") || !ok(cudaMalloc(&c, bytes), "cudaMalloc"))
    return 1;
  cudaMemset(a, 0, bytes);
  cudaMemset(b, 0, bytes);
  struct Case {
    const char* name;
    cudaDataType_t t;
    cublasComputeType_t compute;
  } cases[] = {{"fp32", CUDA_R_32F, CUBLAS_COMPUTE_32F},
               {"tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32},
               {"fp16", CUDA_R_16F, CUBLAS_COMPUTE_32F}};
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const float alpha = 1.f, beta = 0.f;
  for (const Case& k : cases) {
    auto call = [&] {
      return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, k.t, n, b, k.t, n, &beta, c, k.t, n, k.compute,
                          CUBLAS_GEMM_DEFAULT);
    };
    for (int i = 0; i < 3; ++i)
      if (!ok(call(), k.name)) return 1;
    cudaEventRecord(e0);
    for (int i = 0; i < iters; ++i) call();
    cudaEventRecord(e1);
    if (!ok(cudaEventSynchronize(e1), "cudaEventSynchronize")) return 1;
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    ms /= float(iters);
    std::printf("{\"case\": \"%s\", \"n\": %d, \"ms\": %.4f, \"tflops\": %.2f}\n", k.name, n, ms, 2.0 * n * n * double(n) / (ms * 1e9));
  }
  cublasDestroy(h);
  return 0;
}
