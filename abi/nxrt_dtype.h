/*
 * Element-type helpers for the nxrt EP ABI: size and name of each nxrt_dtype.
 * C11, header-only, no state. Shared by the host, the SDK and any plugin, so the
 * three never disagree on a type's size or spelling. Part of ABI 2.0 (string size:
 * 2.3); a new dtype constant added by a minor is added here too.
 */
#ifndef NXRT_DTYPE_H
#define NXRT_DTYPE_H

#include "nxrt_ep.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes per element; 0 for undefined. A STRING element is an nxrt_string (2.3). */
static inline size_t nxrt_dtype_size(nxrt_dtype t) {
  switch (t) {
    case NXRT_DTYPE_STRING: return sizeof(nxrt_string);
    case NXRT_DTYPE_FLOAT32: case NXRT_DTYPE_INT32: case NXRT_DTYPE_UINT32: return 4;
    case NXRT_DTYPE_UINT8: case NXRT_DTYPE_INT8: case NXRT_DTYPE_BOOL: return 1;
    case NXRT_DTYPE_UINT16: case NXRT_DTYPE_INT16: case NXRT_DTYPE_FLOAT16: case NXRT_DTYPE_BFLOAT16: return 2;
    case NXRT_DTYPE_INT64: case NXRT_DTYPE_FLOAT64: case NXRT_DTYPE_UINT64: return 8;
    default: return 0;
  }
}

/* "float32", "int64"...; "undefined" for an unknown code. A static string. */
static inline const char* nxrt_dtype_name(nxrt_dtype t) {
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NXRT_DTYPE_H */
