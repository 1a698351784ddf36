// Reads ONNX TensorProto files (.pb) into host tensors.
#pragma once
#include <string>

#include "minihost.hpp"

namespace onnx { class TensorProto; }

namespace conf {
// "" on success, else why the tensor cannot be read.
std::string decode_tensor(const onnx::TensorProto& t, HostTensor& out, std::string* name = nullptr);
std::string read_tensor_pb(const std::string& path, HostTensor& out, std::string* name = nullptr);
}  // namespace conf
