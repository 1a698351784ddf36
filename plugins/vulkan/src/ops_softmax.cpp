// Softmax and LogSoftmax (softmax.comp, one invocation per row): over one
// axis from opset 13, over the flattened trailing dims before.
#include "op_kernel.hpp"
#include "shape_math.hpp"

#include <fmt/format.h>

namespace nxrt::vk {

using sdk::refuse;

namespace {

struct SoftmaxPush { uint32_t rows, len, inner, log; };

R check_softmax(const IrGraph& g, const IrNode& n) {
  if (g.in(n, 0)->rank < 0) return refuse(NXRT_REFUSE_SHAPE, "{} needs a known rank", n.op);
  return std::nullopt;
}

void emit_softmax(Emitter& e, const EmitArgs& a) {
  const IrNode& n = a.n;
  const Shape& X = *a.is[0];
  int64_t r = int64_t(X.size());
  int64_t ax = norm_axis(attr_i(n, "axis", n.opset >= 13 ? -1 : 1), r);
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t i = 0; i < r; ++i) {
    if (i < ax) outer *= X[size_t(i)];
    else if (i == ax || n.opset < 13) len *= X[size_t(i)];
    else inner *= X[size_t(i)];
  }
  SoftmaxPush p{u32(outer * inner), u32(len), u32(inner), n.op == "LogSoftmax" ? 1u : 0u};
  uint32_t gx, gy;
  Emitter::grid(uint64_t(outer * inner), 1, gx, gy);
  e.dispatch(a.f16 ? Shader::softmax_f16 : Shader::softmax, {}, {a.il[0], a.ol[0]}, 1, p, gx, gy);
}

}  // namespace

std::vector<OpKernel> softmax_ops() {
  return {
      {.names = {"Softmax", "LogSoftmax"},
       .types = kFloatTypes,
       .attrs = {"axis"},
       .check = check_softmax,
       .infer = same_shape,
       .emit = emit_softmax},
  };
}

}  // namespace nxrt::vk
