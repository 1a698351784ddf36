// The no-device reasons (driver_probe.cpp): each case names its cause; the probe itself
// against a missing driver and against a fake libcuda (tests/fake_libcuda.c) that reports
// an old driver or no device.
#include <doctest/doctest.h>

#include "driver_probe.hpp"

#include <cstdlib>
#include <string>

using namespace nxrt::cuda;

namespace {
bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("each no-device case has its own reason") {
  CHECK(has(no_device_reason(false, "libcuda.so.1: cannot open shared object file", 0, 13000, 0, 0, nullptr), "CUDA driver missing"));
  CHECK(has(no_device_reason(true, "", 12040, 13000, 0, 0, nullptr), "CUDA driver too old: it supports CUDA 12.4, the plugin was built with CUDA 13.0"));
  CHECK(has(no_device_reason(true, "", 13000, 13000, 0, 0, ""), "CUDA_VISIBLE_DEVICES is set to an empty list"));
  CHECK(has(no_device_reason(true, "", 13010, 13000, 100, 0, nullptr), "no CUDA device: the driver (CUDA 13.1) reports no GPU"));
  CHECK(has(no_device_reason(true, "", 13010, 13000, 100, 0, "7"), "CUDA_VISIBLE_DEVICES=7"));
  CHECK(has(no_device_reason(true, "", 13010, 13000, 999, 0, nullptr), "cuInit returned CUresult 999"));
  CHECK(no_device_reason(true, "", 13010, 13000, 0, 2, nullptr).empty());
}

TEST_CASE("the probe reports a missing driver library") {
  setenv("NXRT_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  ProbeResult r = probe_cuda();
  unsetenv("NXRT_CUDA_DRIVER");
  CHECK(r.device_count == 0);
  CHECK(has(r.reason, "CUDA driver missing"));
  CHECK(has(r.reason, "/nonexistent/libcuda.so.1"));
}

#ifdef NXRT_FAKE_LIBCUDA
TEST_CASE("the probe reports an old driver and an empty driver through a fake libcuda") {
  // $NXRT_FAKE_LIBCUDA overrides the build-time path (binaries run from another checkout).
  const char* fake = std::getenv("NXRT_FAKE_LIBCUDA");
  setenv("NXRT_CUDA_DRIVER", fake && *fake ? fake : NXRT_FAKE_LIBCUDA, 1);
  setenv("NXRT_FAKE_CUDA_VERSION", "11080", 1);
  ProbeResult r = probe_cuda();
  CHECK(r.device_count == 0);
  CHECK(has(r.reason, "CUDA driver too old: it supports CUDA 11.8"));
  setenv("NXRT_FAKE_CUDA_VERSION", "99000", 1);
  r = probe_cuda();
  CHECK(r.device_count == 0);
  CHECK(has(r.reason, "no CUDA device: the driver (CUDA 99.0) reports no GPU"));
  unsetenv("NXRT_FAKE_CUDA_VERSION");
  unsetenv("NXRT_CUDA_DRIVER");
}
#endif
