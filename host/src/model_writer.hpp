// Writes an IR back as an ONNX model (model_writer.cpp): what `nxrt optimize` saves.
#pragma once
#include "ir.hpp"

#include <string>

namespace nxrt {

// The live graph: inputs, outputs, constants as initializers, live nodes with their
// attributes (not the optimizer's annotations). Throws HostError.
void save_model(const nxrt_model_ir& model, const std::string& path);

}  // namespace nxrt
