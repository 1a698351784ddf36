// Epilogue fusion: an activation folded into the Conv/MatMul/Gemm that
// produces its only input (see fuse_epilogues in ops.hpp).
#include "ops.hpp"
#include "unary_ops.hpp"

namespace nxrt::vk {

size_t fuse_epilogues(IrGraph& g) {
  std::vector<size_t> uses(g.values.size(), 0);
  for (auto& n : g.nodes)
    for (int v : n.in)
      if (v >= 0) uses[size_t(v)]++;
  for (int v : g.outputs)
    if (v >= 0) uses[size_t(v)]++;
  std::vector<int> producer(g.values.size(), -1);
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (int v : g.nodes[k].out)
      if (v >= 0) producer[size_t(v)] = int(k);
  std::vector<bool> drop(g.nodes.size(), false);
  size_t fused = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    IrNode& a = g.nodes[k];
    if (a.op != "Relu" && a.op != "Clip" && a.op != "LeakyRelu" && a.op != "Sigmoid" && a.op != "HardSwish") continue;
    if (a.in.empty() || a.in[0] < 0 || a.out.size() != 1 || a.out[0] < 0) continue;
    const int v = a.in[0];
    if (uses[size_t(v)] != 1 || producer[size_t(v)] < 0) continue;
    IrNode& p = g.nodes[size_t(producer[size_t(v)])];
    if ((p.op != "Conv" && p.op != "MatMul" && p.op != "Gemm") || p.act >= 0 || p.out.size() != 1) continue;
    if (g.values[size_t(v)].dtype != g.values[size_t(a.out[0])].dtype) continue;
    if (a.op == "Clip" && a.opset >= 11) {  // bounds must be constants the IR holds
      bool ok = true;
      for (size_t i = 1; i < a.in.size(); ++i)
        if (a.in[i] >= 0 && !const_floats(g.in(a, i))) ok = false;
      if (!ok) continue;
    }
    p.act = int(*unary_op(a.op));
    unary_params(g, a, p.act_a, p.act_b);
    p.fused = a.op;
    p.out[0] = a.out[0];
    producer[size_t(a.out[0])] = producer[size_t(v)];
    drop[k] = true;
    fused++;
  }
  if (fused) {
    std::vector<IrNode> kept;
    for (size_t k = 0; k < g.nodes.size(); ++k)
      if (!drop[k]) kept.push_back(std::move(g.nodes[k]));
    g.nodes = std::move(kept);
  }
  return fused;
}

}  // namespace nxrt::vk
