// Sequences and optionals: values the host holds itself (no EP sees them). A run keeps
// them per slot beside the tensors; sequence ops, Optional and control flow pass them on
// by reference (a sequence op shares the elements it does not change).
#pragma once
#include "host_tensor.hpp"

#include <memory>
#include <vector>

namespace nxrt {

struct Value;
using ValuePtr = std::shared_ptr<const Value>;

struct Value {
  enum Kind { Tensor, Sequence, Optional } kind = Tensor;
  HostTensor tensor;            // Tensor
  std::vector<ValuePtr> items;  // Sequence: its tensors; Optional: none, or the one value
  nxrt_dtype elem = NXRT_DTYPE_UNDEFINED;  // Sequence: the element type (an empty one has it too)

  static ValuePtr of(HostTensor t) {
    auto v = std::make_shared<Value>();
    v->tensor = std::move(t);
    return v;
  }
};

// .pb files as the ONNX backend tests store them: a TensorProto (Tensor), SequenceProto
// (Sequence) or OptionalProto (Optional) holding tensors or a sequence of them.
// Throws HostError naming the file.
Value read_value_file(const std::filesystem::path& path, Value::Kind kind);
void write_value_file(const std::filesystem::path& path, const Value& v, const std::string& name);

}  // namespace nxrt
