// cuBLASLt and cuDNN, dlopen'ed on first use so the plugin loads (and reports its
// devices) without them; a session without cuDNN runs convolutions on the plugin's own
// kernels. Process-wide and thread-safe; the libraries stay loaded until exit.
#pragma once
#include <cublasLt.h>
#if NXRT_CUDA_HAVE_CUDNN
#include <cudnn.h>
#endif

#include <string>

namespace nxrt::cuda {

struct CublasLt {
#define NXRT_LT_FN(name) decltype(&::name) name = nullptr;
  NXRT_LT_FN(cublasLtCreate)
  NXRT_LT_FN(cublasLtDestroy)
  NXRT_LT_FN(cublasLtMatmulDescCreate)
  NXRT_LT_FN(cublasLtMatmulDescDestroy)
  NXRT_LT_FN(cublasLtMatmulDescSetAttribute)
  NXRT_LT_FN(cublasLtMatrixLayoutCreate)
  NXRT_LT_FN(cublasLtMatrixLayoutDestroy)
  NXRT_LT_FN(cublasLtMatrixLayoutSetAttribute)
  NXRT_LT_FN(cublasLtMatmulPreferenceCreate)
  NXRT_LT_FN(cublasLtMatmulPreferenceDestroy)
  NXRT_LT_FN(cublasLtMatmulPreferenceSetAttribute)
  NXRT_LT_FN(cublasLtMatmulAlgoGetHeuristic)
  NXRT_LT_FN(cublasLtMatmul)
  NXRT_LT_FN(cublasLtGetVersion)
#undef NXRT_LT_FN
  // The loaded library, or nullptr with *why set.
  static const CublasLt* get(std::string* why);
};

#if NXRT_CUDA_HAVE_CUDNN
struct Cudnn {
#define NXRT_DNN_FN(name) decltype(&::name) name = nullptr;
  NXRT_DNN_FN(cudnnGetVersion)
  NXRT_DNN_FN(cudnnCreate)
  NXRT_DNN_FN(cudnnDestroy)
  NXRT_DNN_FN(cudnnSetStream)
  NXRT_DNN_FN(cudnnGetErrorString)
  NXRT_DNN_FN(cudnnCreateTensorDescriptor)
  NXRT_DNN_FN(cudnnDestroyTensorDescriptor)
  NXRT_DNN_FN(cudnnSetTensor4dDescriptor)
  NXRT_DNN_FN(cudnnCreateFilterDescriptor)
  NXRT_DNN_FN(cudnnDestroyFilterDescriptor)
  NXRT_DNN_FN(cudnnSetFilter4dDescriptor)
  NXRT_DNN_FN(cudnnCreateConvolutionDescriptor)
  NXRT_DNN_FN(cudnnDestroyConvolutionDescriptor)
  NXRT_DNN_FN(cudnnSetConvolution2dDescriptor)
  NXRT_DNN_FN(cudnnSetConvolutionGroupCount)
  NXRT_DNN_FN(cudnnSetConvolutionMathType)
  NXRT_DNN_FN(cudnnGetConvolutionForwardAlgorithm_v7)
  NXRT_DNN_FN(cudnnGetConvolutionForwardWorkspaceSize)
  NXRT_DNN_FN(cudnnConvolutionForward)
#undef NXRT_DNN_FN
  static const Cudnn* get(std::string* why);
};
#else
struct Cudnn {
  static const Cudnn* get(std::string* why) {
    *why = "built without cuDNN headers";
    return nullptr;
  }
};
#endif

// The loaded libraries' versions as text (cublasLtGetVersion, cudnnGetVersion), "none"
// when one does not load: algorithm choices are kept only for the same version.
std::string cublaslt_version_text();
std::string cudnn_version_text();

}  // namespace nxrt::cuda
