// Element-type helpers of the host: the ABI's own (abi/nxrt_dtype.h), so the host,
// the SDK and plugins agree; the host does not use the plugin SDK.
#pragma once
#include <nxrt_dtype.h>

#include <cstddef>

namespace nxrt {

inline size_t dtype_size(nxrt_dtype t) { return nxrt_dtype_size(t); }
inline const char* dtype_name(nxrt_dtype t) { return nxrt_dtype_name(t); }

}  // namespace nxrt
