// The CUDA plugin's own copy of a claimed group: values (with static shapes where the
// graph knows them, and host copies of small constants such as Reshape shapes) and
// nodes in topological order. Built once in kernel_create; independent of the host's
// graph view (which lives only for that call), so the ops' checks, shape logic and the
// epilogue fusion are plain C++ over it and unit-tested without a GPU.
#pragma once
#include <nxrt_ep.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernel_math.hpp"

namespace nxrt::cuda {

using Shape = std::vector<int64_t>;

// The op of a node that stands for an ElementwiseChain (never an ONNX op name).
inline const std::string kChainOp = "nxrt.ElementwiseChain";

struct Attr {
  nxrt_attribute_type type = NXRT_ATTR_UNDEFINED;
  int64_t i = 0;
  float f = 0.f;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
};

struct IrValue {
  std::string name;
  nxrt_dtype dtype = NXRT_DTYPE_UNDEFINED;
  int64_t rank = -1;  // -1: unknown before run time
  Shape dims;         // -1 entries: unknown
  bool is_const = false;
  bool has_data = false;  // small constant copied to the host side of the IR
  Shape data_dims;
  std::vector<uint8_t> data;
  int group_input = -1;   // index among the group's inputs, or -1
  int group_output = -1;  // index among the group's outputs, or -1
};

// An activation applied by the producing kernel to its result (Conv/Gemm/MatMul
// epilogue, binary ops), instead of by a separate node.
struct Epilogue {
  math::Unary op = math::Unary::Identity;
  float alpha = 0.f, beta = 0.f;
  size_t node_index = SIZE_MAX;  // the model node folded in, for messages
};

struct IrNode {
  std::string op;
  int64_t opset = 0;
  size_t index = 0;  // the model's node index
  std::map<std::string, Attr> attrs;
  std::vector<int> in, out;  // value ids; -1 for an absent optional
  Epilogue epilogue;
  bool fused_away = false;  // folded into its producer's epilogue, or into an element-wise chain
  int chain = -1;           // op kChainOp: its index in IrGraph::chains

  int64_t attr_int(const char* k, int64_t fallback) const {
    auto it = attrs.find(k);
    return it == attrs.end() ? fallback : it->second.i;
  }
  float attr_float(const char* k, float fallback) const {
    auto it = attrs.find(k);
    return it == attrs.end() ? fallback : it->second.f;
  }
  std::string attr_string(const char* k, std::string fallback) const {
    auto it = attrs.find(k);
    return it == attrs.end() ? fallback : it->second.s;
  }
  std::optional<std::vector<int64_t>> attr_ints(const char* k) const {
    auto it = attrs.find(k);
    if (it == attrs.end()) return std::nullopt;
    return it->second.ints;
  }
  bool has_input(size_t i) const { return i < in.size() && in[i] >= 0; }
};

// Element-wise nodes fused into one generated kernel (elementwise_chain.hpp): the nodes as
// they were (value ids of this graph), reading `input` (every tensor they read has its
// shape) and scalar constants, writing `output`; every other value they make stays in
// registers.
struct ElementwiseChain {
  int input = -1, output = -1;
  std::vector<IrNode> nodes;
};

struct IrGraph {
  std::vector<IrValue> values;
  std::vector<IrNode> nodes;
  std::vector<ElementwiseChain> chains;
  std::vector<int> inputs, outputs;  // value ids in the host's order

  int add_value(IrValue v) {
    values.push_back(std::move(v));
    return int(values.size()) - 1;
  }
  const IrValue& value(int id) const { return values.at(size_t(id)); }
  // The integers of a small constant (int32 or int64), or nullopt.
  std::optional<std::vector<int64_t>> const_ints(int id) const;
  // A small float32/float16 constant's scalar value, or nullopt.
  std::optional<float> const_scalar(int id) const;
  // Nodes of the group that read value `id`.
  std::vector<size_t> consumers(int id) const;
};

}  // namespace nxrt::cuda
