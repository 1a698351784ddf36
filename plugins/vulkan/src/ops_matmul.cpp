// MatMul (numpy batching, up to two broadcast batch dims after collapsing)
// and Gemm (transA/transB, alpha/beta, broadcast C), both on the tiled GEMM
// of matmul.comp, with an optional fused activation epilogue.
#include "gemm_tiles.hpp"
#include "op_kernel.hpp"
#include "shape_math.hpp"

#include <fmt/format.h>

namespace nxrt::vk {

using sdk::fail;
using sdk::refuse;

namespace {

struct MatmulPush {
  uint32_t M, N, K, sam, sak, sbk, sbn, batch2, sab1, sab2, sbb1, sbb2, scm, scn, flags;
  float alpha, beta, lo, hi;
};

// C[b1,b2] = alpha * A[b1,b2] x B[b1,b2] + beta * bias, strides in elements.
void emit_gemm_kernel(Emitter& e, Loc a, Loc b, Loc bias, Loc c, int64_t M, int64_t N, int64_t K, int64_t sam, int64_t sak,
                      int64_t sbk, int64_t sbn, int64_t batch1, int64_t batch2, int64_t sab1, int64_t sab2, int64_t sbb1,
                      int64_t sbb2, int64_t scm, int64_t scn, float alpha, float beta, bool f16, const IrNode& n) {
  if (M == 0 || N == 0) return;
  MatmulPush p{u32(M), u32(N), u32(K), u32(sam), u32(sak), u32(sbk), u32(sbn), u32(batch2), u32(sab1), u32(sab2),
               u32(sbb1), u32(sbb2), u32(scm), u32(scn), bias.a ? 1u : 0u, alpha, beta, n.act_a, n.act_b};
  auto spec = tile_spec(M, N);
  spec.push_back(act_spec(n));
  uint32_t gx = u32((N + spec[2] - 1) / spec[2]), gy = u32((M + spec[1] - 1) / spec[1]);
  e.dispatch(f16 ? Shader::matmul_f16 : Shader::matmul, spec, {a, b, bias.a ? bias : a, c}, 1, p, gx, gy, u32(batch1 * batch2));
}

// ------------------------------------------------------------ MatMul

R check_matmul(const IrGraph& g, const IrNode& n) {
  auto a = g.in(n, 0), b = g.in(n, 1);
  if (a->rank < 0 || b->rank < 0) return refuse(NXRT_REFUSE_SHAPE, "MatMul needs known ranks");
  if (std::max(a->rank, b->rank) > 4) return refuse(NXRT_REFUSE_SHAPE, "MatMul with rank > 4 is not implemented");
  return std::nullopt;
}

void infer_matmul(const IrGraph&, const IrNode&, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  Shape a = *in[0], b = *in[1];
  bool a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), 1);
  if (b1) b.push_back(1);
  if (a[a.size() - 1] != b[b.size() - 2]) fail(NXRT_INVALID_ARGUMENT, "MatMul inner dims {} vs {}", a.back(), b[b.size() - 2]);
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  Shape o = broadcast(ba, bb);
  if (!a1) o.push_back(a[a.size() - 2]);
  if (!b1) o.push_back(b.back());
  out[0] = o;
}

void emit_matmul(Emitter& e, const EmitArgs& a) {
  Shape A = *a.is[0], B = *a.is[1];
  if (A.size() == 1) A.insert(A.begin(), 1);
  if (B.size() == 1) B.push_back(1);
  int64_t M = A[A.size() - 2], K = A.back(), N = B.back();
  Shape ba(A.begin(), A.end() - 2), bb(B.begin(), B.end() - 2);
  Shape ob = broadcast(ba, bb);
  size_t r = ob.size();
  Shape ap(r, 1), bp(r, 1);
  std::copy(ba.begin(), ba.end(), ap.begin() + long(r - ba.size()));
  std::copy(bb.begin(), bb.end(), bp.begin() + long(r - bb.size()));
  Shape sa = dense_strides(ap), sb = dense_strides(bp);
  for (size_t i = 0; i < r; ++i) {
    sa[i] = ap[i] == 1 ? 0 : sa[i] * M * K;
    sb[i] = bp[i] == 1 ? 0 : sb[i] * K * N;
  }
  Shape d2;
  std::vector<int64_t> sa2, sb2;
  for (size_t i = 0; i < r; ++i) {
    if (ob[i] == 1) continue;
    if (!d2.empty() && sa2.back() == sa[i] * ob[i] && sb2.back() == sb[i] * ob[i]) {
      d2.back() *= ob[i];
      sa2.back() = sa[i];
      sb2.back() = sb[i];
      continue;
    }
    d2.push_back(ob[i]);
    sa2.push_back(sa[i]);
    sb2.push_back(sb[i]);
  }
  if (d2.size() > 2) fail(NXRT_UNSUPPORTED, "MatMul batch broadcast needs {} batch dims (max 2)", d2.size());
  while (d2.size() < 2) {
    d2.insert(d2.begin(), 1);
    sa2.insert(sa2.begin(), 0);
    sb2.insert(sb2.begin(), 0);
  }
  emit_gemm_kernel(e, a.il[0], a.il[1], Loc{}, a.ol[0], M, N, K, K, 1, N, 1, d2[0], d2[1], sa2[0], sa2[1], sb2[0], sb2[1], 0, 0,
                   1.f, 0.f, a.f16, a.n);
}

// ------------------------------------------------------------ Gemm

R check_gemm(const IrGraph& g, const IrNode& n) {
  if (g.in(n, 0)->rank != 2 || g.in(n, 1)->rank != 2) return refuse(NXRT_REFUSE_SHAPE, "Gemm needs rank-2 A and B");
  if (auto c = g.in(n, 2); c && (c->rank < 0 || c->rank > 2)) return refuse(NXRT_REFUSE_SHAPE, "Gemm C of rank {}", c->rank);
  return std::nullopt;
}

void infer_gemm(const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  const Shape &a = *in[0], &b = *in[1];
  int64_t M = attr_i(n, "transA", 0) ? a[1] : a[0], K = attr_i(n, "transA", 0) ? a[0] : a[1];
  int64_t K2 = attr_i(n, "transB", 0) ? b[1] : b[0], N = attr_i(n, "transB", 0) ? b[0] : b[1];
  if (K != K2) fail(NXRT_INVALID_ARGUMENT, "Gemm inner dims {} vs {}", K, K2);
  out[0] = {M, N};
  if (in.size() > 2 && in[2]) broadcast(*in[2], out[0]);
}

void emit_gemm(Emitter& e, const EmitArgs& a) {
  const IrNode& n = a.n;
  const Shape& A = *a.is[0];
  const Shape& y = a.os[0];
  bool ta = attr_i(n, "transA", 0), tb = attr_i(n, "transB", 0);
  int64_t M = y[0], N = y[1], K = ta ? A[0] : A[1];
  int64_t scm = 0, scn = 0;
  Loc bias;
  if (a.il.size() > 2 && a.il[2].a) {
    bias = a.il[2];
    Shape C = *a.is[2];
    while (C.size() < 2) C.insert(C.begin(), 1);
    scm = C[0] == 1 ? 0 : C[1];
    scn = C[1] == 1 ? 0 : 1;
  }
  emit_gemm_kernel(e, a.il[0], a.il[1], bias, a.ol[0], M, N, K, ta ? 1 : K, ta ? M : 1, tb ? 1 : N, tb ? K : 1, 1, 1, 0, 0, 0, 0,
                   scm, scn, attr_f(n, "alpha", 1.f), attr_f(n, "beta", 1.f), a.f16, n);
}

}  // namespace

std::vector<OpKernel> matmul_ops() {
  return {
      {.names = {"MatMul"}, .types = kFloatTypes, .check = check_matmul, .infer = infer_matmul, .emit = emit_matmul},
      {.names = {"Gemm"},
       .opset = {7, "{} before opset 7 is not implemented"},
       .types = kFloatTypes,
       .attrs = {"alpha", "beta", "transA", "transB"},
       .check = check_gemm,
       .infer = infer_gemm,
       .emit = emit_gemm},
  };
}

}  // namespace nxrt::vk
