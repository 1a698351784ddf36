// Windowed pooling, 1-D and 2-D (pool.comp): MaxPool (dilations; no Indices
// output) and AveragePool (count_include_pad), ceil_mode and auto pads.
// The global pools are reductions: see ops_reduce.cpp.
#include "op_kernel.hpp"
#include "spatial_geometry.hpp"

#include <fmt/format.h>

namespace nxrt::vk {

using sdk::refuse;

namespace {

struct PoolPush {
  uint32_t n, H, W, OH, OW, KH, KW, sh, sw;
  int32_t ph, pw, ph1, pw1;
  uint32_t dh, dw, mode, cip;
};

R check_pool(const IrGraph& g, const IrNode& n) {
  if (auto r = check_spatial_attrs(g, n)) return r;
  if (n.out.size() > 1 && n.out[1] >= 0) return refuse(NXRT_REFUSE_OTHER, "MaxPool Indices output is not implemented");
  if (attr_ints(n, "kernel_shape").empty()) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} without kernel_shape", n.op);
  return std::nullopt;
}

Geo pool_geometry(const IrNode& n, const Shape& x) {
  auto k = attr_ints(n, "kernel_shape");
  return geometry(n, x, k.size() == 1 ? 1 : k[0], k.back(), attr_i(n, "ceil_mode", 0) != 0);
}

void infer_pool(const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  out[0] = spatial_out(*in[0], (*in[0])[1], pool_geometry(n, *in[0]));
}

void emit_pool(Emitter& e, const EmitArgs& a) {
  const IrNode& n = a.n;
  Geo ge = pool_geometry(n, *a.is[0]);
  PoolPush p{u32(a.ny), u32(ge.H), u32(ge.W), u32(ge.OH), u32(ge.OW), u32(ge.KH), u32(ge.KW), u32(ge.sh), u32(ge.sw),
             int32_t(ge.ph0), int32_t(ge.pw0), int32_t(ge.ph1), int32_t(ge.pw1), u32(ge.dh), u32(ge.dw),
             n.op == "MaxPool" ? 0u : 1u, u32(attr_i(n, "count_include_pad", 0))};
  uint32_t gx, gy;
  Emitter::grid(uint64_t(a.ny), 256, gx, gy);
  e.dispatch(a.f16 ? Shader::pool_f16 : Shader::pool, {}, {a.il[0], a.ol[0]}, 1, p, gx, gy);
}

}  // namespace

std::vector<OpKernel> pool_ops() {
  return {
      {.names = {"MaxPool"},
       .types = kFloatTypes,
       .attrs = {"auto_pad", "ceil_mode", "kernel_shape", "pads", "strides", "dilations", "storage_order"},
       .check = check_pool,
       .infer = infer_pool,
       .emit = emit_pool},
      {.names = {"AveragePool"},
       .types = kFloatTypes,
       .attrs = {"auto_pad", "ceil_mode", "kernel_shape", "pads", "strides", "count_include_pad"},
       .check = check_pool,
       .infer = infer_pool,
       .emit = emit_pool},
  };
}

}  // namespace nxrt::vk
