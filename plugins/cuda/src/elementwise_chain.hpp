// Element-wise chains: runs of float element-wise nodes of a group (unary ops, and binary
// ops whose operands are the chain's input, values of the chain or scalar constants) fused
// into one kernel the plugin generates as CUDA C++ and compiles with NVRTC for the
// session's architecture (nvrtc.hpp). A chain reads its input once and writes its output
// once; what the nodes between make stays in registers. Host C++ only (unit-tested).
#pragma once
#include "ir.hpp"

#include <string>

namespace nxrt::cuda {

// Fuses every chain of at least two nodes found after the epilogue fusion: the chain's
// last node becomes a kChainOp node (input: the chain's input, output: the chain's
// output, `chain` = its index in g.chains), the others are fused away. Returns the count.
size_t fuse_elementwise_chains(IrGraph& g);

// The CUDA C++ of every chain of `g` (empty when it has none): kernel "nxrt_chain_<i>"
// with the signature (const void* x, void* y, long long n) per chain, including
// "kernel_math.hpp" (the same math the nvcc-compiled kernels run).
std::string chain_source(const IrGraph& g);

// The kernel name of chain `i`.
std::string chain_kernel_name(size_t i);

}  // namespace nxrt::cuda
