// The product version (CMake's project VERSION), sent to plugins as the host's
// release (nxrt_negotiate_request.host_version) and returned by nxrt_version().
#pragma once

#ifndef NXRT_PRODUCT_VERSION
#define NXRT_PRODUCT_VERSION "0.0.0"
#endif

namespace nxrt {
inline constexpr const char* kHostName = "nxrt";
inline constexpr const char* kHostVersion = NXRT_PRODUCT_VERSION;
}  // namespace nxrt
