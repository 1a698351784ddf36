// Writes an IR back as an ONNX model (model_writer.cpp): what `nxrt optimize` saves.
#pragma once
#include "ir.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace nxrt {

// The live graph: inputs, outputs, constants as initializers, live nodes with their
// attributes (not the optimizer's annotations). Throws HostError.
void save_model(const nxrt_model_ir& model, const std::string& path);

// The model as a compiled-model container keeps it (artifact.hpp): the same graph with
// every value's inferred type in value_info (loading it back needs no shape inference) and
// tensor constants of 64 bytes or more moved to `weights` (64-byte aligned), referenced as
// external data at location "nxrt:weights". Returns the serialized ModelProto.
std::vector<uint8_t> artifact_graph(const nxrt_model_ir& model, std::vector<uint8_t>* weights);

}  // namespace nxrt
