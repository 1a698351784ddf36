// Element-wise chains: runs of float element-wise nodes of a group (unary ops, and binary
// ops whose operands are the chain's input, values of the chain or scalar constants) fused
// into one kernel the plugin generates as CUDA C++ and compiles with NVRTC for the
// session's architecture (nvrtc.hpp). A chain reads its input once and writes its output
// once; what the nodes between make stays in registers. Host C++ only (unit-tested).
#pragma once
#include "ir.hpp"

#include <string>
#include <vector>

namespace nxrt::cuda {

// Fuses every chain of at least two nodes found after the epilogue fusion: the chain's
// last node becomes a kChainOp node (input: the chain's input, output: the chain's
// output, `chain` = its index in g.chains), the others are fused away. Returns the count.
size_t fuse_elementwise_chains(IrGraph& g);

// The CUDA C++ of every chain of `g` (empty when it has none): kernel "nxrt_chain_<i>"
// with the signature (const void* x, void* y, long long n) per chain, including
// "kernel_math.hpp" (the same math the nvcc-compiled kernels run).
std::string chain_source(const IrGraph& g);

// One step of a chain as the generated kernel computes it: out = epilogue(op(a[, b])), where
// an operand is a register (a value id: the input or an earlier step's out) or a literal.
struct ChainOperand {
  int value = -1;  // -1: the literal
  float literal = 0.f;
};
struct ChainStep {
  int out = -1;
  bool binary = false;
  math::Binary bop = math::Binary::Add;
  Epilogue uop;  // the unary op with its constants (when !binary)
  ChainOperand a, b;
  Epilogue epilogue;  // Identity: none
  size_t node_index = 0;
  std::string op;
};
std::vector<ChainStep> chain_steps(const IrGraph& g, const ElementwiseChain& c);

// The chain's result for one element on the host, through the same kernel_math.hpp calls
// the generated code makes (unit tests check the operand wiring with it).
float eval_chain(const IrGraph& g, const ElementwiseChain& c, float x);

// The kernel name of chain `i`.
std::string chain_kernel_name(size_t i);

}  // namespace nxrt::cuda
