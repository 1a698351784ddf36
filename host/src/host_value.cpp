// SequenceProto / OptionalProto files (onnx-data.proto) to and from host values.
#include "host_value.hpp"

#include "error.hpp"

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <sstream>

namespace nxrt {
namespace {

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) raise(NXRT_ERR_NOT_FOUND, "cannot open '{}'", path.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ValuePtr sequence_of(const onnx::SequenceProto& p, const std::filesystem::path& path) {
  if (p.elem_type() != onnx::SequenceProto::TENSOR && p.elem_type() != onnx::SequenceProto::UNDEFINED)
    raise(NXRT_ERR_UNSUPPORTED, "'{}' is a sequence of non-tensors (elem_type {}); only sequences of tensors are supported",
          path.string(), int(p.elem_type()));
  auto v = std::make_shared<Value>();
  v->kind = Value::Sequence;
  for (const auto& t : p.tensor_values()) {
    v->items.push_back(Value::of(decode_tensor(t)));
    v->elem = v->items.back()->tensor.dtype;
  }
  return v;
}

void encode_sequence(const Value& v, onnx::SequenceProto& p, const std::string& name) {
  p.set_name(name);
  p.set_elem_type(onnx::SequenceProto::TENSOR);
  for (auto& item : v.items) encode_tensor(item->tensor, *p.add_tensor_values());
}

}  // namespace

Value read_value_file(const std::filesystem::path& path, Value::Kind kind) {
  if (kind == Value::Tensor) {
    Value v;
    v.tensor = read_tensor_file(path);
    return v;
  }
  const std::string bytes = read_bytes(path);
  if (kind == Value::Sequence) {
    onnx::SequenceProto p;
    if (!p.ParseFromString(bytes)) raise(NXRT_ERR_INVALID_ARGUMENT, "'{}' is not an ONNX SequenceProto", path.string());
    return *sequence_of(p, path);
  }
  onnx::OptionalProto p;
  if (!p.ParseFromString(bytes)) raise(NXRT_ERR_INVALID_ARGUMENT, "'{}' is not an ONNX OptionalProto", path.string());
  Value v;
  v.kind = Value::Optional;
  if (p.has_tensor_value()) v.items.push_back(Value::of(decode_tensor(p.tensor_value())));
  else if (p.has_sequence_value()) v.items.push_back(sequence_of(p.sequence_value(), path));
  else if (p.elem_type() != onnx::OptionalProto::UNDEFINED && p.elem_type() != onnx::OptionalProto::TENSOR &&
           p.elem_type() != onnx::OptionalProto::SEQUENCE)
    raise(NXRT_ERR_UNSUPPORTED, "'{}' is an optional of elem_type {}; only tensors and sequences are supported", path.string(),
          int(p.elem_type()));
  return v;
}

void write_value_file(const std::filesystem::path& path, const Value& v, const std::string& name) {
  std::string bytes;
  if (v.kind == Value::Tensor) {
    HostTensor t = v.tensor;
    t.name = name;
    write_tensor_file(path, t);
    return;
  }
  if (v.kind == Value::Sequence) {
    onnx::SequenceProto p;
    encode_sequence(v, p, name);
    bytes = p.SerializeAsString();
  } else {
    onnx::OptionalProto p;
    p.set_name(name);
    if (v.items.empty()) {
      p.set_elem_type(onnx::OptionalProto::UNDEFINED);
    } else if (v.items[0]->kind == Value::Sequence) {
      p.set_elem_type(onnx::OptionalProto::SEQUENCE);
      encode_sequence(*v.items[0], *p.mutable_sequence_value(), name);
    } else {
      p.set_elem_type(onnx::OptionalProto::TENSOR);
      encode_tensor(v.items[0]->tensor, *p.mutable_tensor_value());
    }
    bytes = p.SerializeAsString();
  }
  std::ofstream f(path, std::ios::binary);
  if (!f || !f.write(bytes.data(), std::streamsize(bytes.size())))
    raise(NXRT_ERR_INVALID_ARGUMENT, "cannot write '{}'", path.string());
}

}  // namespace nxrt
