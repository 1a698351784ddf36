// Element types: sizes, names and the C++ type of each.
//
// Ownership: none (constants and pure functions). Thread class: any thread.
#pragma once
#include <nxrt_dtype.h>

#include <cstddef>
#include <cstdint>

namespace nxrt::sdk {

// Sizes and names are the ABI's (abi/nxrt_dtype.h), shared with the host.
inline size_t dtype_size(nxrt_dtype t) { return nxrt_dtype_size(t); }
inline const char* dtype_name(nxrt_dtype t) { return nxrt_dtype_name(t); }

template <typename T> constexpr nxrt_dtype dtype_of();
template <> constexpr nxrt_dtype dtype_of<float>() { return NXRT_DTYPE_FLOAT32; }
template <> constexpr nxrt_dtype dtype_of<double>() { return NXRT_DTYPE_FLOAT64; }
template <> constexpr nxrt_dtype dtype_of<int8_t>() { return NXRT_DTYPE_INT8; }
template <> constexpr nxrt_dtype dtype_of<uint8_t>() { return NXRT_DTYPE_UINT8; }
template <> constexpr nxrt_dtype dtype_of<int16_t>() { return NXRT_DTYPE_INT16; }
template <> constexpr nxrt_dtype dtype_of<uint16_t>() { return NXRT_DTYPE_UINT16; }
template <> constexpr nxrt_dtype dtype_of<int32_t>() { return NXRT_DTYPE_INT32; }
template <> constexpr nxrt_dtype dtype_of<uint32_t>() { return NXRT_DTYPE_UINT32; }
template <> constexpr nxrt_dtype dtype_of<int64_t>() { return NXRT_DTYPE_INT64; }
template <> constexpr nxrt_dtype dtype_of<uint64_t>() { return NXRT_DTYPE_UINT64; }
template <> constexpr nxrt_dtype dtype_of<bool>() { return NXRT_DTYPE_BOOL; }
// ABI 2.3: string elements (host memory; the plugin declares NXRT_FEATURE_STRING_TENSORS).
template <> constexpr nxrt_dtype dtype_of<nxrt_string>() { return NXRT_DTYPE_STRING; }

}  // namespace nxrt::sdk
