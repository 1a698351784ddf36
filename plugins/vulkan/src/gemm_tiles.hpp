// Specialization constants of the tiled GEMM kernels (matmul.comp, shared by
// MatMul/Gemm and the implicit-GEMM Conv): tile sizes and fused activation.
#pragma once
#include "ir.hpp"

#include <cstdint>
#include <vector>

namespace nxrt::vk {

// {threads, BM, BN, BK, TM, TN} for an M x N output.
std::vector<uint32_t> tile_spec(int64_t M, int64_t N);
// The ACT specialization constant: 0 none, else the fused activation's unary
// op code + 1 (one pipeline per activation, so the plain kernels are
// unchanged); its parameters go in the push constants' lo/hi.
inline uint32_t act_spec(const IrNode& n) { return n.act >= 0 ? uint32_t(n.act) + 1 : 0u; }

}  // namespace nxrt::vk
