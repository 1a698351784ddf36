// The loader (model_loader.cpp): ONNX file or bytes -> checked, shape-inferred IR,
// control-flow bodies included (GRAPH attributes), then the optimizer's passes.
#pragma once
#include "ir.hpp"
#include "mapped_file.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace nxrt {

// Parses, checks and shape-infers a model, then builds the IR. Throws HostError.
std::unique_ptr<nxrt_model_ir> load_model_file(const std::string& path);
// The same for a file already mapped whose XXH64 the caller computed (`digest`; 0: not yet).
std::unique_ptr<nxrt_model_ir> load_model_file(std::shared_ptr<const MappedFile> file, uint64_t digest);
std::unique_ptr<nxrt_model_ir> load_model_bytes(const void* data, size_t size, const std::string& base_dir);
// The graph and weights entries of a compiled-model container (artifact.hpp), their
// checksums already matched: no ONNX checker, no shape inference (both ran when it was
// compiled). `path` names the model in messages. With `keep` (what keeps `weights` mapped)
// constants are views of `weights`, not copies. Throws HostError(MODEL).
std::unique_ptr<nxrt_model_ir> load_model_artifact(std::span<const uint8_t> graph, std::span<const uint8_t> weights,
                                                   const std::string& path, std::shared_ptr<const void> keep = {});

}  // namespace nxrt
