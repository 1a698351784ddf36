#include "elementwise_chain.hpp"

#include "ops.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

namespace nxrt::cuda {
namespace {

bool float_type(nxrt_dtype t) { return t == NXRT_DTYPE_FLOAT32 || t == NXRT_DTYPE_FLOAT16; }

// The tensors a chainable node computes on (Clip's bounds are constants of the op).
std::vector<int> operands(const IrNode& n) {
  if (binary_of(n.op)) return {n.in.at(0), n.in.at(1)};
  return {n.in.at(0)};
}

bool chainable(const IrGraph& g, const IrNode& n) {
  if (n.fused_away || n.op == kChainOp || n.out.empty() || n.out[0] < 0) return false;
  if (!binary_of(n.op) && !unary_of(g, n)) return false;
  if (binary_of(n.op) && (n.in.size() != 2 || n.in[0] < 0 || n.in[1] < 0)) return false;
  if (n.in.empty() || n.in[0] < 0) return false;
  for (size_t i = 1; i < n.out.size(); ++i)
    if (n.out[i] >= 0) return false;
  return float_type(g.value(n.out[0]).dtype);
}

// A constant the kernel can take as a literal without changing the result's shape: one
// element, of a rank the chain's input (rank `x_rank`, -1 unknown) has at least.
bool scalar_operand(const IrGraph& g, int v, int64_t x_rank) {
  const IrValue& c = g.value(v);
  if (!c.has_data || !g.const_scalar(v)) return false;
  const auto rank = int64_t(c.data_dims.size());
  return rank == 0 || (x_rank >= 0 && rank <= x_rank);
}

}  // namespace

std::string chain_kernel_name(size_t i) { return fmt::format("nxrt_chain_{}", i); }

size_t fuse_elementwise_chains(IrGraph& g) {
  std::vector<bool> taken(g.nodes.size(), false);
  size_t fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (taken[i] || !chainable(g, g.nodes[i])) continue;
    // The chain's input: the one tensor operand that is not a scalar constant.
    int x = -1;
    for (int v : operands(g.nodes[i]))
      if (x < 0 && !g.value(v).has_data) x = v;
    if (x < 0 || g.value(x).dtype != g.value(g.nodes[i].out[0]).dtype) continue;
    const nxrt_dtype dt = g.value(x).dtype;
    const int64_t x_rank = g.value(x).rank;
    bool ok = true;
    for (int v : operands(g.nodes[i])) ok = ok && (v == x || scalar_operand(g, v, x_rank));
    if (!ok) continue;
    // A path: each next node reads the previous one's output and only x, values of the
    // path and scalar constants.
    std::vector<size_t> path = {i};
    std::set<int> made = {g.nodes[i].out[0]};
    for (;;) {
      const int last = g.nodes[path.back()].out[0];
      if (g.value(last).group_output >= 0) break;
      size_t next = SIZE_MAX;
      for (size_t c : g.consumers(last))
        if (c > path.back() && !g.nodes[c].fused_away && (next == SIZE_MAX || c < next)) next = c;
      if (next == SIZE_MAX || taken[next] || !chainable(g, g.nodes[next]) || g.value(g.nodes[next].out[0]).dtype != dt) break;
      bool reads_ok = true;
      for (int v : operands(g.nodes[next]))
        reads_ok = reads_ok && (v == x || made.count(v) || scalar_operand(g, v, x_rank));
      if (!reads_ok) break;
      path.push_back(next);
      made.insert(g.nodes[next].out[0]);
    }
    // The longest prefix whose values (but its last) are read by the prefix only.
    size_t len = path.size();
    for (; len >= 2; --len) {
      std::set<size_t> inside(path.begin(), path.begin() + std::ptrdiff_t(len));
      bool closed = true;
      for (size_t k = 0; k + 1 < len && closed; ++k) {
        const int v = g.nodes[path[k]].out[0];
        if (g.value(v).group_output >= 0) closed = false;
        for (size_t c : g.consumers(v))
          if (!g.nodes[c].fused_away && !inside.count(c)) closed = false;
      }
      if (closed) break;
    }
    if (len < 2) continue;
    ElementwiseChain chain;
    chain.input = x;
    chain.output = g.nodes[path[len - 1]].out[0];
    for (size_t k = 0; k < len; ++k) {
      chain.nodes.push_back(g.nodes[path[k]]);
      taken[path[k]] = true;
      if (k + 1 < len) g.nodes[path[k]].fused_away = true;
    }
    IrNode& carrier = g.nodes[path[len - 1]];
    carrier.op = kChainOp;
    carrier.in = {x};
    carrier.out = {chain.output};
    carrier.attrs.clear();
    carrier.epilogue = Epilogue{};
    carrier.chain = int(g.chains.size());
    g.chains.push_back(std::move(chain));
    ++fused;
  }
  return fused;
}

namespace {

// An exact float literal (any value, NaN and infinities included).
std::string literal(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return fmt::format("__int_as_float(0x{:08x})", bits);
}

std::string unary_call(const Epilogue& e, const std::string& arg) {
  return fmt::format("m::unary(m::Unary({}), {}, {}, {})", int(e.op), arg, literal(e.alpha), literal(e.beta));
}

std::string operand_text(const ChainOperand& o) { return o.value >= 0 ? fmt::format("v{}", o.value) : literal(o.literal); }

}  // namespace

std::vector<ChainStep> chain_steps(const IrGraph& g, const ElementwiseChain& c) {
  std::set<int> registers = {c.input};
  auto operand = [&](int v) {
    ChainOperand o;
    if (registers.count(v)) o.value = v;
    else o.literal = *g.const_scalar(v);  // fuse_elementwise_chains took only scalar constants
    return o;
  };
  std::vector<ChainStep> steps;
  for (const auto& n : c.nodes) {
    ChainStep s;
    s.out = n.out[0];
    s.node_index = n.index;
    s.op = n.op;
    if (auto b = binary_of(n.op)) {
      s.binary = true;
      s.bop = *b;
      s.a = operand(n.in[0]);
      s.b = operand(n.in[1]);
    } else {
      s.uop = *unary_of(g, n);
      s.a = operand(n.in[0]);
    }
    s.epilogue = n.epilogue;
    registers.insert(s.out);
    steps.push_back(std::move(s));
  }
  return steps;
}

float eval_chain(const IrGraph& g, const ElementwiseChain& c, float x) {
  std::map<int, float> reg = {{c.input, x}};
  auto get = [&](const ChainOperand& o) { return o.value >= 0 ? reg.at(o.value) : o.literal; };
  for (const ChainStep& s : chain_steps(g, c)) {
    float v = s.binary ? math::binary(s.bop, get(s.a), get(s.b)) : math::unary(s.uop.op, get(s.a), s.uop.alpha, s.uop.beta);
    if (s.epilogue.op != math::Unary::Identity) v = math::unary(s.epilogue.op, v, s.epilogue.alpha, s.epilogue.beta);
    reg[s.out] = v;
  }
  return reg.at(c.output);
}

std::string chain_source(const IrGraph& g) {
  if (g.chains.empty()) return "";
  std::string s =
      "// Generated by the nxrt CUDA plugin: element-wise chains (elementwise_chain.cpp).\n"
      "#include \"kernel_math.hpp\"\n"
      "namespace m = nxrt::cuda::math;\n"
      "__device__ __forceinline__ float nxrt_ld(const float* p, long long i) { return p[i]; }\n"
      "__device__ __forceinline__ float nxrt_ld(const unsigned short* p, long long i) {\n"
      "  float f; unsigned short h = p[i]; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
      "__device__ __forceinline__ void nxrt_st(float* p, long long i, float v) { p[i] = v; }\n"
      "__device__ __forceinline__ void nxrt_st(unsigned short* p, long long i, float v) {\n"
      "  unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(v)); p[i] = h; }\n";
  for (size_t ci = 0; ci < g.chains.size(); ++ci) {
    const ElementwiseChain& c = g.chains[ci];
    const char* t = g.value(c.input).dtype == NXRT_DTYPE_FLOAT16 ? "unsigned short" : "float";
    s += fmt::format("extern \"C\" __global__ void {}(const void* xp, void* yp, long long n) {{\n", chain_kernel_name(ci));
    s += fmt::format("  const {0}* x = static_cast<const {0}*>(xp);\n  {0}* y = static_cast<{0}*>(yp);\n", t);
    s += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
         "       i += (long long)gridDim.x * blockDim.x) {\n";
    s += fmt::format("    const float v{} = nxrt_ld(x, i);\n", c.input);
    for (const ChainStep& st : chain_steps(g, c)) {
      std::string e = st.binary ? fmt::format("m::binary(m::Binary({}), {}, {})", int(st.bop), operand_text(st.a), operand_text(st.b))
                                : unary_call(st.uop, operand_text(st.a));
      if (st.epilogue.op != math::Unary::Identity) e = unary_call(st.epilogue, e);
      s += fmt::format("    const float v{} = {};  // node {} {}\n", st.out, e, st.node_index, st.op);
    }
    s += fmt::format("    nxrt_st(y, i, v{});\n  }}\n}}\n", c.output);
  }
  return s;
}

}  // namespace nxrt::cuda
