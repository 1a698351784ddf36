// Preconditions wrapped around libonnx shape-inference functions that index what a hostile
// model controls without checking it (onnx_guards.cpp).
#pragma once

namespace nxrt {

// Installs the guards in libonnx's schema registry, once per process (thread-safe); the
// loader calls it before shape inference.
void install_onnx_inference_guards();

}  // namespace nxrt
