// Unary op codes of unary.comp, shared by the elementwise family and by the
// GEMM/conv fused epilogue (which applies the same activation on store).
#pragma once
#include "ir.hpp"

#include <optional>
#include <string>

namespace nxrt::vk {

enum UnaryOp { U_RELU, U_ERF, U_SIGMOID, U_TANH, U_EXP, U_LOG, U_SQRT, U_NEG, U_ABS, U_RECIP, U_CLIP, U_LEAKY, U_IDENT,
               U_FLOOR, U_CEIL, U_ELU, U_HSIG, U_SOFTPLUS, U_SIN, U_COS, U_HSWISH, U_SILU, U_SIGN };

// The code of an ONNX unary op with a kernel (nullopt for others).
std::optional<UnaryOp> unary_op(const std::string& op);
// The two float parameters of a unary op (unary.comp's alpha/beta, also the
// fused epilogue's): LeakyRelu/Elu alpha, HardSigmoid alpha/beta, Clip bounds.
void unary_params(const IrGraph& g, const IrNode& n, float& alpha, float& beta);

}  // namespace nxrt::vk
