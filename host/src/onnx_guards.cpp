// libonnx's shape inference trusts some shapes it reads. Where the loader cannot refuse the lie
// before inference (the shape is only known during it), the schema's inference function is
// wrapped: the wrapper checks what the original would read out of bounds and fails inference
// (an error naming the problem) or stops it for that node, then calls the original.
#include "onnx_guards.hpp"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <mutex>
#include <set>
#include <string>

namespace nxrt {
namespace {

// MaxUnpool with two inputs (no output_shape) copies dim 1 of the indices input I into its
// output's shape, unchecked (onnx 1.12 to 1.17 maxUnpoolShapeInference): an I of rank 0 or 1, or
// one of unknown type, is a read past the end (found by fuzz_model_session,
// host/fuzz/regressions/fuzz_model_session/maxunpool_indices_rank1.onnx). I must have X's rank.
void guard_maxunpool(onnx::OpSchema& schema) {
  auto original = schema.GetTypeAndShapeInferenceFunction();
  schema.TypeAndShapeInferenceFunction([original](onnx::InferenceContext& ctx) {
    if (ctx.getNumInputs() == 2 && onnx::hasInputShape(ctx, 0)) {
      const auto* i = ctx.getInputType(1);
      if (!i || i->value_case() != onnx::TypeProto::kTensorType || !i->tensor_type().has_shape()) {
        // I's shape unknown here: the output's type, not its shape (the kernel checks at run time).
        onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
        return;
      }
      const int rank = i->tensor_type().shape().dim_size();
      if (rank < 2)
        fail_shape_inference("MaxUnpool: indices input I has rank ", rank, "; it must have the rank of X (at least 2)");
    }
    original(ctx);
  });
}

}  // namespace

void install_onnx_inference_guards() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Every registered version of each guarded op (Schema(name, v) is the newest <= v).
    std::set<const onnx::OpSchema*> seen;
    const int newest = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at(onnx::ONNX_DOMAIN).second;
    for (int v = newest; v >= 1; --v) {
      const auto* s = onnx::OpSchemaRegistry::Schema("MaxUnpool", v);
      if (!s || !seen.insert(s).second) continue;
      // The registry owns its schemas as non-const objects; Schema() only hands out const views.
      guard_maxunpool(const_cast<onnx::OpSchema&>(*s));
    }
  });
}

}  // namespace nxrt
