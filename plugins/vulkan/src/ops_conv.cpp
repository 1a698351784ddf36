// Conv (1-D and 2-D, groups, dilations, auto pads, optional bias, fused
// activation epilogue): an implicit GEMM (matmul.comp built with CONV) when
// each group has >= 16 output channels and a reduction of >= 16, else a
// direct convolution (conv_direct.comp).
#include "gemm_tiles.hpp"
#include "op_kernel.hpp"
#include "shape_math.hpp"
#include "spatial_geometry.hpp"

#include <fmt/format.h>

namespace nxrt::vk {

using sdk::fail;
using sdk::refuse;

namespace {

struct ConvPush {
  uint32_t M, N, K, Cin, H, W, Cout, OW, KH, KW, sh, sw;
  int32_t ph, pw;
  uint32_t dh, dw, groups, flags;
  float lo, hi;
};
struct ConvDirectPush {
  uint32_t n, Cin, H, W, Cout, OH, OW, KH, KW, sh, sw;
  int32_t ph, pw;
  uint32_t dh, dw, cin_g, cout_g, flags;
  float lo, hi;
};

R check_conv(const IrGraph& g, const IrNode& n) {
  if (auto r = check_spatial_attrs(g, n)) return r;
  auto w = g.in(n, 1);
  if (w->rank >= 0 && w->rank != g.in(n, 0)->rank) return refuse(NXRT_REFUSE_SHAPE, "Conv weight rank {}", w->rank);
  if (attr_i(n, "group", 1) < 1) return refuse(NXRT_REFUSE_ATTRIBUTE, "Conv group < 1");
  return std::nullopt;
}

void infer_conv(const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  const Shape &x = *in[0], &w = *in[1];
  int64_t grp = attr_i(n, "group", 1);
  if (x[1] != w[1] * grp || w[0] % grp) fail(NXRT_INVALID_ARGUMENT, "Conv channels: input {} weight {}x{} group {}", x[1], w[0], w[1], grp);
  Geo ge = geometry(n, x, x.size() == 3 ? 1 : w[2], w.back(), false);
  out[0] = spatial_out(x, w[0], ge);
}

void emit_conv(Emitter& e, const EmitArgs& a) {
  const IrNode& n = a.n;
  const std::vector<Loc>& il = a.il;
  const Shape &X = *a.is[0], &Wt = *a.is[1];
  int64_t grp = attr_i(n, "group", 1);
  Geo ge = geometry(n, X, X.size() == 3 ? 1 : Wt[2], Wt.back(), false);
  int64_t Cin = X[1], Cout = Wt[0], cin_g = Cin / grp, cout_g = Cout / grp;
  Loc bias = il.size() > 2 ? il[2] : Loc{};
  int64_t K = cin_g * ge.KH * ge.KW;
  if (cout_g >= 16 && K >= 16) {
    ConvPush p{u32(cout_g), u32(ge.OH * ge.OW), u32(K), u32(Cin), u32(ge.H), u32(ge.W), u32(Cout), u32(ge.OW),
               u32(ge.KH), u32(ge.KW), u32(ge.sh), u32(ge.sw), int32_t(ge.ph0), int32_t(ge.pw0), u32(ge.dh), u32(ge.dw),
               u32(grp), bias.a ? 1u : 0u, n.act_a, n.act_b};
    auto spec = tile_spec(cout_g, ge.OH * ge.OW);
    spec.push_back(act_spec(n));
    uint32_t tx = u32((ge.OH * ge.OW + spec[2] - 1) / spec[2]), ty = u32((cout_g + spec[1] - 1) / spec[1]);
    e.dispatch(a.f16 ? Shader::conv_gemm_f16 : Shader::conv_gemm, spec, {il[1], il[0], bias.a ? bias : il[1], a.ol[0]}, 1, p,
               tx, ty, u32(X[0] * grp));
  } else {
    ConvDirectPush p{u32(a.ny), u32(Cin), u32(ge.H), u32(ge.W), u32(Cout), u32(ge.OH), u32(ge.OW), u32(ge.KH), u32(ge.KW),
                     u32(ge.sh), u32(ge.sw), int32_t(ge.ph0), int32_t(ge.pw0), u32(ge.dh), u32(ge.dw), u32(cin_g),
                     u32(cout_g), bias.a ? 1u : 0u, n.act_a, n.act_b};
    uint32_t gx, gy;
    Emitter::grid(uint64_t(a.ny), 256, gx, gy);
    std::vector<uint32_t> spec;
    if (n.act >= 0) spec.push_back(act_spec(n));
    e.dispatch(a.f16 ? Shader::conv_direct_f16 : Shader::conv_direct, spec, {il[0], il[1], bias.a ? bias : il[1], a.ol[0]}, 1,
               p, gx, gy);
  }
}

}  // namespace

std::vector<OpKernel> conv_ops() {
  return {
      {.names = {"Conv"},
       .types = kFloatTypes,
       .attrs = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"},
       .check = check_conv,
       .infer = infer_conv,
       .emit = emit_conv},
  };
}

}  // namespace nxrt::vk
