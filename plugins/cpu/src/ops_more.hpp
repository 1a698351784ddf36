// Helpers shared by ops_index.cpp, ops_math.cpp, ops_reduce.cpp and
// ops_pool_more.cpp (shape plumbing, casts, comparisons, reductions, more
// elementwise math and pooling/normalization).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ops.hpp"
#include "tensor_ops.hpp"

namespace nxrt::cpu {

void register_index_ops(Registry& r);
void register_math_ops(Registry& r);
void register_reduce_ops(Registry& r);
void register_pool_more_ops(Registry& r);
void register_gather_ops(Registry& r);
void register_loss_ops(Registry& r);
void register_resize_ops(Registry& r);
void register_deconv_ops(Registry& r);
void register_linalg_ops(Registry& r);
void register_rnn_ops(Registry& r);

inline std::optional<Elem> elem_of(nxrt_dtype t) {
  switch (t) {
    case NXRT_DTYPE_FLOAT32: return Elem::F32;
    case NXRT_DTYPE_FLOAT16: return Elem::F16;
    case NXRT_DTYPE_BFLOAT16: return Elem::BF16;
    case NXRT_DTYPE_FLOAT64: return Elem::F64;
    case NXRT_DTYPE_INT8: return Elem::I8;
    case NXRT_DTYPE_UINT8: return Elem::U8;
    case NXRT_DTYPE_INT16: return Elem::I16;
    case NXRT_DTYPE_UINT16: return Elem::U16;
    case NXRT_DTYPE_INT32: return Elem::I32;
    case NXRT_DTYPE_UINT32: return Elem::U32;
    case NXRT_DTYPE_INT64: return Elem::I64;
    case NXRT_DTYPE_UINT64: return Elem::U64;
    case NXRT_DTYPE_BOOL: return Elem::Bool;
    default: return std::nullopt;
  }
}

// Calls f(T{}) with the C++ type of dtype t (numeric types and bool); fails on others.
template <typename F>
void dispatch_type(nxrt_dtype t, const char* op, F&& f) {
  switch (t) {
    case NXRT_DTYPE_FLOAT32: f(float{}); break;
    case NXRT_DTYPE_FLOAT64: f(double{}); break;
    case NXRT_DTYPE_INT8: f(int8_t{}); break;
    case NXRT_DTYPE_UINT8: f(uint8_t{}); break;
    case NXRT_DTYPE_INT16: f(int16_t{}); break;
    case NXRT_DTYPE_UINT16: f(uint16_t{}); break;
    case NXRT_DTYPE_INT32: f(int32_t{}); break;
    case NXRT_DTYPE_UINT32: f(uint32_t{}); break;
    case NXRT_DTYPE_INT64: f(int64_t{}); break;
    case NXRT_DTYPE_UINT64: f(uint64_t{}); break;
    case NXRT_DTYPE_BOOL: f(bool{}); break;
    default: sdk::fail(NXRT_INVALID_ARGUMENT, "{}: dtype {} is not supported", op, sdk::dtype_name(t));
  }
}

inline constexpr nxrt_dtype kNumeric[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT8,  NXRT_DTYPE_UINT8,
                                          NXRT_DTYPE_INT16,   NXRT_DTYPE_UINT16,  NXRT_DTYPE_INT32, NXRT_DTYPE_UINT32,
                                          NXRT_DTYPE_INT64,   NXRT_DTYPE_UINT64};

// Reads a 1-D (or scalar) int32/int64 tensor as int64 values.
inline std::vector<int64_t> read_ints(const ConstTensorView& t, const char* op, const char* what) {
  std::vector<int64_t> v(size_t(t.numel()));
  if (t.dtype() == NXRT_DTYPE_INT64) {
    const int64_t* p = t.data<int64_t>();
    v.assign(p, p + t.numel());
  } else if (t.dtype() == NXRT_DTYPE_INT32) {
    const int32_t* p = t.data<int32_t>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else {
    sdk::fail(NXRT_INVALID_ARGUMENT, "{}: {} must be int32 or int64, got {}", op, what, sdk::dtype_name(t.dtype()));
  }
  return v;
}

// Refuses unless input i (when present) is int32 or int64 (or only int64 when int32 is false).
inline Check index_dtype(const Node& n, size_t i, const char* what, bool int32 = true) {
  auto v = n.input(i);
  if (!v.present()) return std::nullopt;
  if (v.dtype() == NXRT_DTYPE_INT64 || (int32 && v.dtype() == NXRT_DTYPE_INT32)) return std::nullopt;
  return sdk::refuse(NXRT_REFUSE_DTYPE, "{} input {} ({}) is {}, only {} is implemented", n.op_type(), i, what,
                     sdk::dtype_name(v.dtype()), int32 ? "int32/int64" : "int64");
}

// Refuses any attribute not in `known` (so a new attribute is never silently ignored).
inline Check known_attrs(const Node& n, std::initializer_list<const char*> known) {
  for (size_t i = 0; i < n.attribute_count(); ++i) {
    const std::string name(n.attribute_at(i).name());
    bool ok = false;
    for (auto k : known) ok = ok || name == k;
    if (!ok) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: attribute '{}' is not implemented", n.op_type(), name);
  }
  return std::nullopt;
}

}  // namespace nxrt::cpu
