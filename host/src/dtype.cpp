#include "dtype.hpp"

namespace nxrt {

size_t dtype_size(nxrt_dtype t) {
  switch (t) {
    case NXRT_DTYPE_FLOAT32: case NXRT_DTYPE_INT32: case NXRT_DTYPE_UINT32: return 4;
    case NXRT_DTYPE_UINT8: case NXRT_DTYPE_INT8: case NXRT_DTYPE_BOOL: return 1;
    case NXRT_DTYPE_UINT16: case NXRT_DTYPE_INT16: case NXRT_DTYPE_FLOAT16: case NXRT_DTYPE_BFLOAT16: return 2;
    case NXRT_DTYPE_INT64: case NXRT_DTYPE_FLOAT64: case NXRT_DTYPE_UINT64: return 8;
    default: return 0;
  }
}

const char* dtype_name(nxrt_dtype t) {
  switch (t) {
    case NXRT_DTYPE_FLOAT32: return "float32";
    case NXRT_DTYPE_UINT8: return "uint8";
    case NXRT_DTYPE_INT8: return "int8";
    case NXRT_DTYPE_UINT16: return "uint16";
    case NXRT_DTYPE_INT16: return "int16";
    case NXRT_DTYPE_INT32: return "int32";
    case NXRT_DTYPE_INT64: return "int64";
    case NXRT_DTYPE_STRING: return "string";
    case NXRT_DTYPE_BOOL: return "bool";
    case NXRT_DTYPE_FLOAT16: return "float16";
    case NXRT_DTYPE_FLOAT64: return "float64";
    case NXRT_DTYPE_UINT32: return "uint32";
    case NXRT_DTYPE_UINT64: return "uint64";
    case NXRT_DTYPE_BFLOAT16: return "bfloat16";
    default: return "undefined";
  }
}

}  // namespace nxrt
