// Normalizations: BatchNormalization in inference mode (batchnorm.comp, per
// channel scale/bias/mean/var) and LayerNormalization over the trailing axes
// (layernorm.comp, one workgroup per row, full-shape scale and bias).
#include "op_kernel.hpp"
#include "shape_math.hpp"

#include <fmt/format.h>

namespace nxrt::vk {

using sdk::fail;
using sdk::refuse;

namespace {

// ------------------------------------------------------------ BatchNormalization

struct BnPush { uint32_t n, c, spatial; float eps; };

R check_batchnorm(const IrGraph& g, const IrNode& n) {
  if (attr_i(n, "training_mode", 0) != 0) return refuse(NXRT_REFUSE_ATTRIBUTE, "BatchNormalization training_mode=1 is not implemented");
  for (size_t i = 1; i < n.out.size(); ++i)
    if (n.out[i] >= 0) return refuse(NXRT_REFUSE_OTHER, "BatchNormalization training outputs are not implemented");
  if (g.in(n, 0)->rank >= 0 && g.in(n, 0)->rank < 2) return refuse(NXRT_REFUSE_SHAPE, "BatchNormalization needs rank >= 2");
  return std::nullopt;
}

void emit_batchnorm(Emitter& e, const EmitArgs& a) {
  const Shape& X = *a.is[0];
  const auto& is = a.is;
  const auto& il = a.il;
  int64_t C = X[1], sp = a.ny / (X[0] * C);
  for (size_t i = 1; i < 5; ++i)
    if (numel(*is[i]) != C) fail(NXRT_INVALID_ARGUMENT, "BatchNormalization input {} has {} elements, expected {}", i, numel(*is[i]), C);
  BnPush p{u32(a.ny), u32(C), u32(sp), attr_f(a.n, "epsilon", 1e-5f)};
  uint32_t gx, gy;
  Emitter::grid(uint64_t(a.ny), 256, gx, gy);
  e.dispatch(a.f16 ? Shader::batchnorm_f16 : Shader::batchnorm, {}, {il[0], il[1], il[2], il[3], il[4], a.ol[0]}, 1, p, gx, gy);
}

// ------------------------------------------------------------ LayerNormalization

struct LnPush { uint32_t rows, len; float eps; uint32_t has_bias; };

R check_layernorm(const IrGraph& g, const IrNode& n) {
  if (attr_i(n, "stash_type", 1) != 1) return refuse(NXRT_REFUSE_ATTRIBUTE, "LayerNormalization stash_type != 1");
  for (size_t i = 1; i < n.out.size(); ++i)
    if (n.out[i] >= 0) return refuse(NXRT_REFUSE_OTHER, "LayerNormalization Mean/InvStdDev outputs are not implemented");
  auto x = g.in(n, 0), s = g.in(n, 1);
  if (x->rank < 0) return refuse(NXRT_REFUSE_SHAPE, "LayerNormalization needs a known rank");
  int64_t ax = norm_axis(attr_i(n, "axis", -1), x->rank);
  if (s->rank >= 0 && s->rank != x->rank - ax)
    return refuse(NXRT_REFUSE_SHAPE, "LayerNormalization Scale of rank {} (broadcast scale is not implemented)", s->rank);
  if (auto b = g.in(n, 2); b && b->rank >= 0 && b->rank != x->rank - ax)
    return refuse(NXRT_REFUSE_SHAPE, "LayerNormalization B of rank {} (broadcast bias is not implemented)", b->rank);
  return std::nullopt;
}

void emit_layernorm(Emitter& e, const EmitArgs& a) {
  const Shape& X = *a.is[0];
  const auto& is = a.is;
  const auto& il = a.il;
  int64_t r = int64_t(X.size());
  int64_t ax = norm_axis(attr_i(a.n, "axis", -1), r);
  int64_t rows = 1, len = 1;
  for (int64_t i = 0; i < r; ++i) (i < ax ? rows : len) *= X[size_t(i)];
  if (numel(*is[1]) != len) fail(NXRT_UNSUPPORTED, "LayerNormalization scale of {} elements for rows of {}", numel(*is[1]), len);
  bool has_b = il.size() > 2 && il[2].a;
  if (has_b && numel(*is[2]) != len) fail(NXRT_UNSUPPORTED, "LayerNormalization bias of {} elements for rows of {}", numel(*is[2]), len);
  LnPush p{u32(rows), u32(len), attr_f(a.n, "epsilon", 1e-5f), has_b ? 1u : 0u};
  uint32_t gx, gy;
  Emitter::grid(uint64_t(rows), 1, gx, gy);
  e.dispatch(a.f16 ? Shader::layernorm_f16 : Shader::layernorm, {}, {il[0], il[1], has_b ? il[2] : il[1], a.ol[0]}, 1, p, gx, gy);
}

}  // namespace

std::vector<OpKernel> normalization_ops() {
  return {
      {.names = {"BatchNormalization"},
       .opset = {9, "{} before opset 9 is not implemented"},
       .types = kFloatTypes,
       .attrs = {"epsilon", "momentum", "training_mode"},
       .check = check_batchnorm,
       .infer = same_shape,
       .emit = emit_batchnorm},
      {.names = {"LayerNormalization"},
       .types = kFloatTypes,
       .attrs = {"axis", "epsilon", "stash_type"},
       .check = check_layernorm,
       .infer = same_shape,
       .emit = emit_layernorm},
  };
}

}  // namespace nxrt::vk
