// The description of one Vulkan kernel: the ONNX ops it implements, the
// opsets and types it accepts, the attributes it reads, and its three parts
// (claim check, shape function, command emission). Each family file
// (ops_<family>.cpp) returns its descriptions; ops_registry.cpp lists the
// families; ops.cpp runs the common claim checks and dispatches through them.
#pragma once
#include "command_emitter.hpp"
#include "ops.hpp"

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace nxrt::vk {

using R = std::optional<sdk::Refusal>;

// Opsets of the default domain the kernel claims. A node below `since` is
// refused (NXRT_REFUSE_OPSET) with `refusal`, a format string given the op name.
struct OpsetRange {
  int64_t since = 1;
  const char* refusal = nullptr;  // required when since > 1
  int64_t until = std::numeric_limits<int64_t>::max();
};

// Element types of the data inputs/outputs (inputs and outputs listed in
// meta_inputs/meta_outputs are exempt).
struct TypeConstraint {
  std::vector<nxrt_dtype> dtypes;
  // A float16-storage variant of the kernel exists: float16 nodes (all data
  // tensors float16) are claimed where the device has 16-bit storage.
  bool f16 = false;
};
// Arithmetic kernels: float32, float16 storage.
inline const TypeConstraint kFloatTypes = {{NXRT_DTYPE_FLOAT32}, true};
// Copy kernels move raw elements: 32-bit words, and 16-bit units for float16.
inline const TypeConstraint kMoveTypes = {{NXRT_DTYPE_FLOAT32, NXRT_DTYPE_INT32, NXRT_DTYPE_INT64}, true};
// Views alias their input (a materialised graph output is a byte copy) and
// Shape reads only the shape: no kernel, so float16 needs no device feature.
inline const TypeConstraint kViewTypes = {{NXRT_DTYPE_FLOAT32, NXRT_DTYPE_INT32, NXRT_DTYPE_INT64, NXRT_DTYPE_FLOAT16}, false};

// What an emit function sees of its node: input/output locations (absent
// optional inputs have a null Loc.a) and run-time shapes.
struct EmitArgs {
  const IrGraph& g;
  const IrNode& n;
  const std::vector<Loc>& il;
  const std::vector<const Shape*>& is;
  const std::vector<Loc>& ol;
  const std::vector<Shape>& os;
  int64_t ny;  // elements of output 0 (never 0: empty outputs emit nothing)
  bool f16;    // the node is float16 (check_node claims float16 only with every data tensor float16)
};

using CheckFn = R (*)(const IrGraph&, const IrNode&);
using TypeCheckFn = R (*)(const IrGraph&, const IrNode&, const DeviceLimits&);
using InferFn = void (*)(const IrGraph&, const IrNode&, const std::vector<const Shape*>&, std::vector<Shape>&);
using EmitFn = void (*)(Emitter&, const EmitArgs&);

struct OpKernel {
  std::vector<std::string> names;  // ONNX ops (default domain)
  OpsetRange opset;
  TypeConstraint types;
  std::set<size_t> meta_inputs;   // exempt from `types` (indices, shapes, axes...)
  std::set<size_t> meta_outputs;
  std::set<std::string> attrs;    // every attribute the kernel implements
  TypeCheckFn check_types = nullptr;  // replaces the `types` check (Cast: input and output types differ)
  CheckFn check = nullptr;            // op-specific claim checks, after the common ones
  InferFn infer = nullptr;            // output shapes from input shapes
  EmitFn emit = nullptr;              // records the node's commands
  bool view = false;                  // output aliases input 0; emit materialises a graph output
};

// The kernel for an op of the default domain, or null.
const OpKernel* find_kernel(const std::string& op);
// Every op with a kernel, sorted.
std::vector<std::string> kernel_ops();

}  // namespace nxrt::vk
