#include "driver_probe.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>

namespace nxrt::cuda {
namespace {

std::string version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

// CUresult values the probe distinguishes (cuda.h is not included: no driver link).
constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorNoDevice = 100;

std::atomic<void*> g_driver{nullptr};

}  // namespace

void* driver_library() { return g_driver.load(); }

std::string no_device_reason(bool driver_loaded, const std::string& load_error, int driver_version, int runtime_version,
                             int init_result, int device_count, const char* visible_devices) {
  if (!driver_loaded)
    return fmt::format("CUDA driver missing: cannot load libcuda.so.1 ({}); install the NVIDIA driver", load_error);
  if (driver_version > 0 && driver_version < runtime_version)
    return fmt::format("CUDA driver too old: it supports CUDA {}, the plugin was built with CUDA {}",
                       version_text(driver_version), version_text(runtime_version));
  const bool hidden = visible_devices && visible_devices[0] == '\0';
  if (hidden) return "no CUDA device visible: CUDA_VISIBLE_DEVICES is set to an empty list";
  if (init_result == kCudaErrorNoDevice || (init_result == kCudaSuccess && device_count == 0)) {
    if (visible_devices)
      return fmt::format("no CUDA device: the driver (CUDA {}) sees none of CUDA_VISIBLE_DEVICES={}",
                         version_text(driver_version), visible_devices);
    return fmt::format("no CUDA device: the driver (CUDA {}) reports no GPU", version_text(driver_version));
  }
  if (init_result != kCudaSuccess)
    return fmt::format("CUDA driver failed to initialise: cuInit returned CUresult {}", init_result);
  return "";
}

ProbeResult probe_cuda() {
  ProbeResult r;
  r.runtime_version = CUDART_VERSION;
  const char* override_path = std::getenv("NXRT_CUDA_DRIVER");
  const char* path = override_path && *override_path ? override_path : "libcuda.so.1";
  // Kept open for the process: the runtime and the virtual-memory arena use the driver too.
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!lib) {
    const char* e = dlerror();
    r.reason = no_device_reason(false, e ? e : path, 0, r.runtime_version, 0, 0, visible);
    return r;
  }
  g_driver.store(lib);
  using InitFn = int (*)(unsigned);
  using VersionFn = int (*)(int*);
  using CountFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto version = reinterpret_cast<VersionFn>(dlsym(lib, "cuDriverGetVersion"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  if (!init || !version || !count) {
    r.reason = no_device_reason(false, fmt::format("{} lacks cuInit/cuDriverGetVersion/cuDeviceGetCount", path), 0,
                                r.runtime_version, 0, 0, visible);
    return r;
  }
  version(&r.driver_version);
  int init_result = kCudaSuccess, n = 0;
  if (r.driver_version >= r.runtime_version) {
    init_result = init(0);
    if (init_result == kCudaSuccess && count(&n) != kCudaSuccess) n = 0;
  }
  r.reason = no_device_reason(true, "", r.driver_version, r.runtime_version, init_result, n, visible);
  if (!r.reason.empty()) return r;
  // The runtime agrees (it applies the same CUDA_VISIBLE_DEVICES); its count is the one
  // device indices refer to.
  int rt = 0;
  cudaError_t e = cudaGetDeviceCount(&rt);
  if (e != cudaSuccess || rt == 0) {
    r.reason = fmt::format("no CUDA device: the CUDA runtime says {} ({})", cudaGetErrorName(e), cudaGetErrorString(e));
    return r;
  }
  r.device_count = rt;
  return r;
}

}  // namespace nxrt::cuda
