// cuBLASLt and cuDNN through the plugin's dlopen tables (cuda_libs.cpp): where the toolkit
// has them, every function the plugin calls binds and the versions are the ones it was built
// against; where a library is missing, the reason names it. Needs no GPU.
#include <doctest/doctest.h>

#include "cuda_libs.hpp"

#include <string>

using namespace nxrt::cuda;

TEST_CASE("cuBLASLt loads by soname and every function binds") {
  std::string why;
  const CublasLt* lt = CublasLt::get(&why);
  if (!lt) {
    INFO(why);
    CHECK(why.find("libcublasLt") != std::string::npos);
    return;
  }
  CHECK(bool(lt->cublasLtMatmul));
  CHECK(bool(lt->cublasLtMatmulAlgoGetHeuristic));
  CHECK(lt->cublasLtGetVersion() / 10000 == CUBLAS_VER_MAJOR);
  CHECK(CublasLt::get(nullptr) == lt);  // loaded once per process
}

#if NXRT_CUDA_HAVE_CUDNN
TEST_CASE("cuDNN loads by soname, every function binds, and its major is the headers'") {
  std::string why;
  const Cudnn* d = Cudnn::get(&why);
  if (!d) {
    INFO(why);
    CHECK(!why.empty());
    return;
  }
  CHECK(bool(d->cudnnConvolutionForward));
  CHECK(d->cudnnGetVersion() / 10000 == CUDNN_MAJOR);
}
#endif
