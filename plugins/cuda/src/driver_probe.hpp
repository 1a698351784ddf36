// Finds out, without linking the driver, whether this process can use a CUDA device,
// and if not, says precisely why: the driver library is missing, the driver is older
// than the toolkit the plugin was built with, CUDA_VISIBLE_DEVICES hides every device,
// or the driver sees no device.
#pragma once
#include <string>

namespace nxrt::cuda {

struct ProbeResult {
  int device_count = 0;
  int driver_version = 0;   // cuDriverGetVersion, e.g. 13000; 0 when no driver
  int runtime_version = 0;  // CUDART_VERSION the plugin was built with
  std::string reason;       // empty when device_count > 0
};

// The driver is dlopen'ed ("libcuda.so.1", or $NXRT_CUDA_DRIVER for tests) and asked
// through cuInit/cuDriverGetVersion/cuDeviceGetCount; the CUDA runtime is touched only
// when the driver reports a device. Cheap enough to run once per plugin instance.
ProbeResult probe_cuda();

// The driver library the probe loaded (nullptr: none); stays loaded for the process.
void* driver_library();

// The reason for a driver answer, as text (pure; unit-tested).
std::string no_device_reason(bool driver_loaded, const std::string& load_error, int driver_version, int runtime_version,
                             int init_result, int device_count, const char* visible_devices);

}  // namespace nxrt::cuda
