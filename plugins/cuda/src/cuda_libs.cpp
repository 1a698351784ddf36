#include "cuda_libs.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>

namespace nxrt::cuda {
namespace {

// dlopen by soname (RUNPATH, LD_LIBRARY_PATH, ldconfig), then from the toolkit the
// plugin was built against.
void* open_library(const char* soname, std::string* why) {
  if (void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL)) return h;
  std::string first = dlerror() ? dlerror() : "";
  const std::string path = fmt::format("{}/{}", NXRT_CUDA_LIB_DIR, soname);
  if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  const char* e = dlerror();
  *why = fmt::format("cannot load {} ({})", soname, e ? e : first);
  return nullptr;
}

template <typename T>
bool bind(void* lib, const char* name, T& fn, std::string* why) {
  fn = reinterpret_cast<T>(dlsym(lib, name));
  if (!fn) *why = fmt::format("{} lacks {}", "library", name);
  return fn != nullptr;
}

}  // namespace

const CublasLt* CublasLt::get(std::string* why) {
  static std::once_flag once;
  static CublasLt lib;
  static const CublasLt* loaded = nullptr;
  static std::string error;
  std::call_once(once, [] {
    void* h = open_library("libcublasLt.so." NXRT_CUBLAS_MAJOR, &error);
    if (!h) return;
    CublasLt l;
    bool ok = true;
#define NXRT_BIND(name) ok = ok && bind(h, #name, l.name, &error);
    NXRT_BIND(cublasLtCreate) NXRT_BIND(cublasLtDestroy) NXRT_BIND(cublasLtMatmulDescCreate)
    NXRT_BIND(cublasLtMatmulDescDestroy) NXRT_BIND(cublasLtMatmulDescSetAttribute) NXRT_BIND(cublasLtMatrixLayoutCreate)
    NXRT_BIND(cublasLtMatrixLayoutDestroy) NXRT_BIND(cublasLtMatrixLayoutSetAttribute)
    NXRT_BIND(cublasLtMatmulPreferenceCreate) NXRT_BIND(cublasLtMatmulPreferenceDestroy)
    NXRT_BIND(cublasLtMatmulPreferenceSetAttribute) NXRT_BIND(cublasLtMatmulAlgoGetHeuristic) NXRT_BIND(cublasLtMatmul)
    NXRT_BIND(cublasLtGetVersion)
#undef NXRT_BIND
    if (!ok) return;
    lib = l;
    loaded = &lib;
  });
  if (!loaded && why) *why = error;
  return loaded;
}

#if NXRT_CUDA_HAVE_CUDNN
const Cudnn* Cudnn::get(std::string* why) {
  static std::once_flag once;
  static Cudnn lib;
  static const Cudnn* loaded = nullptr;
  static std::string error;
  std::call_once(once, [] {
    void* h = open_library("libcudnn.so." NXRT_CUDNN_MAJOR, &error);
    if (!h) return;
    Cudnn l;
    bool ok = true;
#define NXRT_BIND(name) ok = ok && bind(h, #name, l.name, &error);
    NXRT_BIND(cudnnGetVersion) NXRT_BIND(cudnnCreate) NXRT_BIND(cudnnDestroy) NXRT_BIND(cudnnSetStream)
    NXRT_BIND(cudnnGetErrorString) NXRT_BIND(cudnnCreateTensorDescriptor) NXRT_BIND(cudnnDestroyTensorDescriptor)
    NXRT_BIND(cudnnSetTensor4dDescriptor) NXRT_BIND(cudnnCreateFilterDescriptor) NXRT_BIND(cudnnDestroyFilterDescriptor)
    NXRT_BIND(cudnnSetFilter4dDescriptor) NXRT_BIND(cudnnCreateConvolutionDescriptor)
    NXRT_BIND(cudnnDestroyConvolutionDescriptor) NXRT_BIND(cudnnSetConvolution2dDescriptor)
    NXRT_BIND(cudnnSetConvolutionGroupCount) NXRT_BIND(cudnnSetConvolutionMathType)
    NXRT_BIND(cudnnGetConvolutionForwardAlgorithm_v7) NXRT_BIND(cudnnGetConvolutionForwardWorkspaceSize)
    NXRT_BIND(cudnnConvolutionForward)
#undef NXRT_BIND
    if (!ok) return;
    // cuDNN 9 needs its sub-libraries (cudnn_cnn...) next to it; a failing version call
    // means a broken install.
    if (l.cudnnGetVersion() / 10000 != CUDNN_MAJOR) {
      error = fmt::format("libcudnn reports version {}, the plugin was built for cuDNN {}", l.cudnnGetVersion(), CUDNN_MAJOR);
      return;
    }
    lib = l;
    loaded = &lib;
  });
  if (!loaded && why) *why = error;
  return loaded;
}
#endif

}  // namespace nxrt::cuda

namespace nxrt::cuda {

std::string cublaslt_version_text() {
  const CublasLt* l = CublasLt::get(nullptr);
  return l ? std::to_string(l->cublasLtGetVersion()) : "none";
}

std::string cudnn_version_text() {
#if NXRT_CUDA_HAVE_CUDNN
  const Cudnn* d = Cudnn::get(nullptr);
  return d ? std::to_string(d->cudnnGetVersion()) : "none";
#else
  return "none";
#endif
}

}  // namespace nxrt::cuda
