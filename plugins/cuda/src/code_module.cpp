#include "code_module.hpp"

#include "driver_probe.hpp"
#include "elementwise_chain.hpp"

#include <cuda.h>  // types only: the functions come from the probe's libcuda handle
#include <dlfcn.h>
#include <fmt/format.h>
#include <nxrt_sdk/status.hpp>

namespace nxrt::cuda {
namespace {

struct Driver {
  decltype(&::cuModuleLoadData) load = nullptr;
  decltype(&::cuModuleUnload) unload = nullptr;
  decltype(&::cuModuleGetFunction) function = nullptr;
  decltype(&::cuLaunchKernel) launch = nullptr;
  decltype(&::cuGetErrorString) error_string = nullptr;

  static const Driver& get() {
    static const Driver d = [] {
      Driver r;
      void* lib = driver_library();
      if (!lib) return r;
      auto sym = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name)); };
      sym(r.load, "cuModuleLoadData");
      sym(r.unload, "cuModuleUnload");
      sym(r.function, "cuModuleGetFunction");
      sym(r.launch, "cuLaunchKernel");
      sym(r.error_string, "cuGetErrorString");
      return r;
    }();
    if (!d.load || !d.unload || !d.function || !d.launch || !d.error_string)
      sdk::fail(NXRT_UNSUPPORTED, "the CUDA driver lacks cuModuleLoadData/cuModuleGetFunction/cuLaunchKernel");
    return d;
  }
  std::string text(CUresult r) const {
    const char* s = nullptr;
    error_string(r, &s);
    return fmt::format("CUresult {} ({})", int(r), s ? s : "unknown");
  }
};

}  // namespace

CodeModule::CodeModule(const void* image, int device, size_t chains) : device_(device) {
  const Driver& d = Driver::get();
  if (cudaSetDevice(device) != cudaSuccess) sdk::fail(NXRT_INTERNAL, "cudaSetDevice({}) failed", device);
  CUmodule m = nullptr;
  if (CUresult r = d.load(&m, image); r != CUDA_SUCCESS)
    sdk::fail(NXRT_UNSUPPORTED, "the CUDA driver did not load the generated code: {}", d.text(r));
  module_ = m;
  for (size_t i = 0; i < chains; ++i) {
    CUfunction f = nullptr;
    const std::string name = chain_kernel_name(i);
    if (CUresult r = d.function(&f, m, name.c_str()); r != CUDA_SUCCESS) {
      d.unload(m);
      module_ = nullptr;
      sdk::fail(NXRT_UNSUPPORTED, "the generated code has no kernel {}: {}", name, d.text(r));
    }
    functions_.push_back(f);
  }
}

CodeModule::~CodeModule() {
  if (!module_) return;
  cudaSetDevice(device_);
  Driver::get().unload(static_cast<CUmodule>(module_));
}

void CodeModule::launch(size_t chain, const void* x, void* y, int64_t n, cudaStream_t stream) const {
  if (n <= 0) return;
  const Driver& d = Driver::get();
  constexpr int64_t kThreads = 256;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 32);
  long long count = n;
  void* args[] = {&x, &y, &count};
  CUresult r = d.launch(static_cast<CUfunction>(functions_.at(chain)), unsigned(blocks), 1, 1, unsigned(kThreads), 1, 1, 0,
                        reinterpret_cast<CUstream>(stream), args, nullptr);
  if (r != CUDA_SUCCESS) sdk::fail(NXRT_INTERNAL, "cuLaunchKernel of {}: {}", chain_kernel_name(chain), d.text(r));
}

}  // namespace nxrt::cuda
