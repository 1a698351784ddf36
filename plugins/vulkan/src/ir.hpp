// The plugin's own copy of a graph view (one node during get_capability, one
// claimed group during kernel_create), so op code and unit tests do not
// depend on the host's graph services.
#pragma once
#include "half.hpp"

#include <nxrt_ep.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace nxrt::vk {

struct ConstData {
  nxrt_dtype dtype = NXRT_DTYPE_UNDEFINED;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};

struct Attr {
  nxrt_attribute_type type = NXRT_ATTR_UNDEFINED;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  ConstData t;
};

struct IrValue {
  std::string name;
  nxrt_dtype dtype = NXRT_DTYPE_UNDEFINED;
  int64_t rank = -1;  // -1 unknown
  std::vector<int64_t> dims;  // -1 for unknown dims
  bool is_const = false;
  bool has_data = false;  // `data` holds the constant (small constants only)
  ConstData data;
};

struct IrNode {
  std::string op, domain;
  int64_t opset = 0;
  size_t index = 0;
  std::string name;
  std::map<std::string, Attr> attrs;
  std::vector<int> in, out;  // value ids, -1 for an absent optional
  // Fused epilogue, set by fuse_epilogues() on a Conv/MatMul/Gemm: the
  // activation (a unary op code, see unary_ops.hpp) applied on store, with its two
  // float parameters; `fused` names the activation node that was folded in.
  int act = -1;
  float act_a = 0, act_b = 0;
  std::string fused;
};

struct IrGraph {
  std::vector<IrValue> values;
  std::vector<IrNode> nodes;
  std::vector<int> inputs, outputs;  // value ids, kernel order

  int add_value(IrValue v) {
    values.push_back(std::move(v));
    return int(values.size()) - 1;
  }
  const IrValue* in(const IrNode& n, size_t i) const {
    return i < n.in.size() && n.in[i] >= 0 ? &values[size_t(n.in[i])] : nullptr;
  }
  const IrValue* out(const IrNode& n, size_t i) const {
    return i < n.out.size() && n.out[i] >= 0 ? &values[size_t(n.out[i])] : nullptr;
  }
};

inline const Attr* find_attr(const IrNode& n, const char* name) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? nullptr : &it->second;
}
inline int64_t attr_i(const IrNode& n, const char* name, int64_t d) {
  auto a = find_attr(n, name);
  return a ? a->i : d;
}
inline float attr_f(const IrNode& n, const char* name, float d) {
  auto a = find_attr(n, name);
  return a ? a->f : d;
}
inline std::string attr_s(const IrNode& n, const char* name, std::string d) {
  auto a = find_attr(n, name);
  return a ? a->s : d;
}
inline std::vector<int64_t> attr_ints(const IrNode& n, const char* name, std::vector<int64_t> d = {}) {
  auto a = find_attr(n, name);
  return a ? a->ints : d;
}

// Integer contents of a constant (int64 or int32); nullopt when unavailable.
inline std::optional<std::vector<int64_t>> const_ints(const IrValue* v) {
  if (!v || !v->has_data) return std::nullopt;
  const auto& d = v->data;
  std::vector<int64_t> out;
  if (d.dtype == NXRT_DTYPE_INT64) {
    out.resize(d.bytes.size() / 8);
    std::memcpy(out.data(), d.bytes.data(), out.size() * 8);
  } else if (d.dtype == NXRT_DTYPE_INT32) {
    std::vector<int32_t> t(d.bytes.size() / 4);
    std::memcpy(t.data(), d.bytes.data(), t.size() * 4);
    out.assign(t.begin(), t.end());
  } else {
    return std::nullopt;
  }
  return out;
}
// float32 or float16 constant data, widened to float.
inline std::optional<std::vector<float>> const_floats(const IrValue* v) {
  if (!v || !v->has_data) return std::nullopt;
  if (v->data.dtype == NXRT_DTYPE_FLOAT16) {
    std::vector<float> out(v->data.bytes.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, v->data.bytes.data() + i * 2, 2);
      out[i] = half_to_float(h);
    }
    return out;
  }
  if (v->data.dtype != NXRT_DTYPE_FLOAT32) return std::nullopt;
  std::vector<float> out(v->data.bytes.size() / 4);
  std::memcpy(out.data(), v->data.bytes.data(), out.size() * 4);
  return out;
}

}  // namespace nxrt::vk
