// Elementwise ops: the unary activations/math of unary.comp (one code each)
// and the broadcasting binary ops of binary.comp. float32, float16 storage.
#include "op_kernel.hpp"
#include "shape_math.hpp"
#include "unary_ops.hpp"

#include <fmt/format.h>

#include <limits>
#include <map>

namespace nxrt::vk {

using sdk::fail;
using sdk::refuse;

namespace {

const std::map<std::string, UnaryOp> kUnary = {
    {"Relu", U_RELU}, {"Erf", U_ERF}, {"Sigmoid", U_SIGMOID}, {"Tanh", U_TANH}, {"Exp", U_EXP}, {"Log", U_LOG},
    {"Sqrt", U_SQRT}, {"Neg", U_NEG}, {"Abs", U_ABS}, {"Reciprocal", U_RECIP}, {"Clip", U_CLIP}, {"LeakyRelu", U_LEAKY},
    {"Floor", U_FLOOR}, {"Ceil", U_CEIL}, {"Elu", U_ELU}, {"HardSigmoid", U_HSIG}, {"Softplus", U_SOFTPLUS},
    {"Sin", U_SIN}, {"Cos", U_COS}, {"HardSwish", U_HSWISH}, {"Sign", U_SIGN}};
const std::map<std::string, uint32_t> kBinary = {{"Add", 0}, {"Sub", 1}, {"Mul", 2}, {"Div", 3}, {"Pow", 4},
                                                 {"Max", 5}, {"Min", 6}, {"PRelu", 7}};

// ------------------------------------------------------------ unary

struct UnaryPush { uint32_t n, op; float alpha, beta; };

R check_clip(const IrGraph& g, const IrNode& n) {
  for (size_t i = 1; i < 3; ++i) {
    auto v = g.in(n, i);
    if (v && (!v->is_const || !const_floats(v) || v->dtype != g.in(n, 0)->dtype))
      return refuse(NXRT_REFUSE_ATTRIBUTE, "Clip {} must be a constant of the input's type", i == 1 ? "min" : "max");
  }
  return std::nullopt;
}

void emit_unary(Emitter& e, const EmitArgs& a) {
  UnaryPush p{u32(a.ny), uint32_t(kUnary.at(a.n.op)), 0.f, 0.f};
  unary_params(a.g, a.n, p.alpha, p.beta);
  uint32_t gx, gy;
  Emitter::grid(uint64_t(a.ny), 256, gx, gy);
  e.dispatch(a.f16 ? Shader::unary_f16 : Shader::unary, {}, {a.il[0], a.ol[0]}, 1, p, gx, gy);
}

// ------------------------------------------------------------ binary

struct BinaryPush { uint32_t n, op, rank, pad, dims[6], sa[6], sb[6]; };

R check_binary(const IrGraph&, const IrNode& n) {
  if (n.in.size() != 2) return refuse(NXRT_REFUSE_OTHER, "{} with {} inputs (only 2 are implemented)", n.op, n.in.size());
  return std::nullopt;
}

void infer_binary(const IrGraph&, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  out[0] = broadcast(*in[0], *in[1]);
  if (n.op == "PRelu" && out[0] != *in[0]) fail(NXRT_INVALID_ARGUMENT, "PRelu slope does not broadcast to X");
}

// Output dims with per-input element strides (0 where broadcast), unit dims
// dropped and dims contiguous in both inputs merged (rank <= 6 after that).
void emit_binary(Emitter& e, const EmitArgs& a) {
  const Shape& y = a.os[0];
  BinaryPush p{};
  p.n = u32(a.ny);
  p.op = kBinary.at(a.n.op);
  const Shape &A = *a.is[0], &B = *a.is[1];
  if (A == y && B == y) {
    p.rank = 0;
  } else {
    size_t r = y.size();
    Shape ap(r, 1), bp(r, 1);
    std::copy(A.begin(), A.end(), ap.begin() + long(r - A.size()));
    std::copy(B.begin(), B.end(), bp.begin() + long(r - B.size()));
    Shape sa = dense_strides(ap), sb = dense_strides(bp);
    for (size_t i = 0; i < r; ++i) {
      if (ap[i] == 1) sa[i] = 0;
      if (bp[i] == 1) sb[i] = 0;
    }
    Shape d2;
    std::vector<int64_t> sa2, sb2;
    for (size_t i = 0; i < r; ++i) {
      if (y[i] == 1) continue;
      if (!d2.empty() && sa2.back() == sa[i] * y[i] && sb2.back() == sb[i] * y[i]) {
        d2.back() *= y[i];
        sa2.back() = sa[i];
        sb2.back() = sb[i];
        continue;
      }
      d2.push_back(y[i]);
      sa2.push_back(sa[i]);
      sb2.push_back(sb[i]);
    }
    if (d2.empty()) {
      d2 = {1};
      sa2 = {0};
      sb2 = {0};
    }
    if (d2.size() > 6) fail(NXRT_UNSUPPORTED, "{}: broadcast of rank {} after collapsing (max 6)", a.n.op, d2.size());
    p.rank = u32(int64_t(d2.size()));
    for (size_t i = 0; i < d2.size(); ++i) {
      p.dims[i] = u32(d2[i]);
      p.sa[i] = u32(sa2[i]);
      p.sb[i] = u32(sb2[i]);
    }
  }
  uint32_t gx, gy;
  Emitter::grid(uint64_t(a.ny), 256, gx, gy);
  e.dispatch(a.f16 ? Shader::binary_f16 : Shader::binary, {}, {a.il[0], a.il[1], a.ol[0]}, 1, p, gx, gy);
}

}  // namespace

std::optional<UnaryOp> unary_op(const std::string& op) {
  auto it = kUnary.find(op);
  if (it == kUnary.end()) return std::nullopt;
  return it->second;
}

void unary_params(const IrGraph& g, const IrNode& n, float& alpha, float& beta) {
  const std::string& op = n.op;
  if (op == "LeakyRelu") alpha = attr_f(n, "alpha", 0.01f);
  if (op == "Elu") alpha = attr_f(n, "alpha", 1.0f);
  if (op == "HardSigmoid") {
    alpha = attr_f(n, "alpha", 0.2f);
    beta = attr_f(n, "beta", 0.5f);
  }
  if (op == "Clip") {
    alpha = -std::numeric_limits<float>::infinity();
    beta = std::numeric_limits<float>::infinity();
    if (n.opset < 11) {
      alpha = attr_f(n, "min", alpha);
      beta = attr_f(n, "max", beta);
    } else {
      if (auto v = const_floats(g.in(n, 1)); v && !v->empty()) alpha = (*v)[0];
      if (auto v = const_floats(g.in(n, 2)); v && !v->empty()) beta = (*v)[0];
    }
  }
}

std::vector<OpKernel> elementwise_ops() {
  return {
      {.names = {"Abs", "Ceil", "Cos", "Erf", "Exp", "Floor", "HardSwish", "Log", "Neg", "Reciprocal", "Relu", "Sigmoid",
                 "Sign", "Sin", "Softplus", "Sqrt", "Tanh"},
       .types = kFloatTypes,
       .infer = same_shape,
       .emit = emit_unary},
      {.names = {"LeakyRelu", "Elu"}, .types = kFloatTypes, .attrs = {"alpha"}, .infer = same_shape, .emit = emit_unary},
      {.names = {"HardSigmoid"}, .types = kFloatTypes, .attrs = {"alpha", "beta"}, .infer = same_shape, .emit = emit_unary},
      // Bounds: attributes before opset 11, constant inputs after.
      {.names = {"Clip"},
       .types = kFloatTypes,
       .meta_inputs = {1, 2},
       .attrs = {"min", "max"},
       .check = check_clip,
       .infer = same_shape,
       .emit = emit_unary},
      {.names = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu"},
       .opset = {7, "{} before opset 7 (legacy broadcast) is not implemented"},
       .types = kFloatTypes,
       .check = check_binary,
       .infer = infer_binary,
       .emit = emit_binary},
  };
}

}  // namespace nxrt::vk
