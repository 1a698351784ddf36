// The loader (model_loader.cpp): ONNX file or bytes -> checked, shape-inferred IR,
// control-flow bodies included (GRAPH attributes), then the optimizer's passes.
#pragma once
#include "ir.hpp"

#include <memory>
#include <string>

namespace nxrt {

// Parses, checks and shape-infers a model, then builds the IR. Throws HostError.
std::unique_ptr<nxrt_model_ir> load_model_file(const std::string& path);
std::unique_ptr<nxrt_model_ir> load_model_bytes(const void* data, size_t size, const std::string& base_dir);

}  // namespace nxrt
