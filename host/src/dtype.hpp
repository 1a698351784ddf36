// Element-type helpers of the host (names, sizes). The host does not use the plugin SDK:
// these follow the ABI's nxrt_dtype numbering (ONNX TensorProto.DataType).
#pragma once
#include <nxrt_ep.h>

#include <cstddef>

namespace nxrt {

// Bytes per element; 0 for types without a fixed size (string, undefined).
size_t dtype_size(nxrt_dtype t);
// "float32", "int64"...; "undefined" for an unknown code.
const char* dtype_name(nxrt_dtype t);

}  // namespace nxrt
