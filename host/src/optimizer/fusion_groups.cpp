// Level 3: recognised subgraphs are offered to plugins as claimable groups. Nothing is
// rewritten: each node of a group carries the annotations "nxrt.fusion" (the pattern) and
// "nxrt.fusion_group" (the group's node indices), which a plugin asks for by name with
// node_attribute (they are not listed among the node's attributes) and may claim as one
// group (NXRT_FEATURE_FUSED_GROUPS). Unclaimed, the
// nodes run one by one as before. Patterns: LayerNormalization written out
// (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div [, Mul [, Add]]), GELU with erf
// (Div|Mul, Erf, Add, Mul, Mul) and attention (MatMul [, Div|Mul] [, Add], Softmax, MatMul).
#include "optimizer.hpp"
#include "optimizer/graph_edit.hpp"

#include <algorithm>
#include <cmath>

namespace nxrt::passes {
namespace {

struct Matcher {
  const nxrt_model_ir& m;
  const std::set<std::string>& body_names;

  // The only reader of n's first output, of type op.
  nxrt_node* next(const nxrt_node* n, const char* op) const {
    if (!n || n->outputs.empty() || !n->outputs[0]) return nullptr;
    nxrt_node* c = edit::sole_consumer(m, n->outputs[0], body_names);
    return c && edit::is_op(*c, op) ? c : nullptr;
  }
  // The input of binary node n that is not `known`.
  static const nxrt_value* other(const nxrt_node* n, const nxrt_value* known) {
    if (!n || n->inputs.size() != 2) return nullptr;
    return n->inputs[0] == known ? n->inputs[1] : n->inputs[1] == known ? n->inputs[0] : nullptr;
  }
  static bool is_scalar(const nxrt_value* v, double want) {
    double d;
    return edit::scalar_constant(v, &d) && std::abs(d - want) < 1e-3 * std::max(1.0, std::abs(want));
  }
};

std::vector<nxrt_node*> layer_norm(const Matcher& mt, nxrt_node& mean) {
  if (!edit::is_op(mean, "ReduceMean") || mean.inputs.empty()) return {};
  const nxrt_value* x = mean.inputs[0];
  // x feeds both the mean and the Sub; the mean's only reader is the Sub.
  nxrt_node* sub = mt.next(&mean, "Sub");
  if (!sub || sub->inputs.size() != 2 || sub->inputs[0] != x || sub->inputs[1] != mean.outputs[0]) return {};
  const nxrt_value* d = sub->outputs[0];
  if (!d || d->consumers.size() != 2 || d->is_graph_output || mt.body_names.count(d->name)) return {};
  nxrt_node* pow = nullptr;
  nxrt_node* div = nullptr;
  for (int c : d->consumers) {
    nxrt_node* n = mt.m.nodes[size_t(c)].get();
    if (edit::is_op(*n, "Pow") && n->inputs.size() == 2 && n->inputs[0] == d && Matcher::is_scalar(n->inputs[1], 2.0)) pow = n;
    else if (edit::is_op(*n, "Div") && n->inputs.size() == 2 && n->inputs[0] == d) div = n;
  }
  if (!pow || !div) return {};
  nxrt_node* var = mt.next(pow, "ReduceMean");
  nxrt_node* add = mt.next(var, "Add");
  if (!add || !Matcher::other(add, var->outputs[0]) || !Matcher::other(add, var->outputs[0])->constant) return {};
  nxrt_node* sqrt = mt.next(add, "Sqrt");
  if (!sqrt || mt.next(sqrt, "Div") != div || div->inputs[1] != sqrt->outputs[0]) return {};
  std::vector<nxrt_node*> g = {&mean, sub, pow, var, add, sqrt, div};
  if (nxrt_node* scale = mt.next(div, "Mul"); scale && Matcher::other(scale, div->outputs[0]) &&
                                              Matcher::other(scale, div->outputs[0])->constant) {
    g.push_back(scale);
    if (nxrt_node* shift = mt.next(scale, "Add"); shift && Matcher::other(shift, scale->outputs[0]) &&
                                                  Matcher::other(shift, scale->outputs[0])->constant)
      g.push_back(shift);
  }
  return g;
}

// 0.5 * x * (1 + erf(x / sqrt(2))), the halving before or after the product.
std::vector<nxrt_node*> gelu(const Matcher& mt, nxrt_node& erf) {
  if (!edit::is_op(erf, "Erf") || erf.inputs.empty()) return {};
  nxrt_node* pre = edit::producer(mt.m, erf.inputs[0]);
  if (!pre || pre->inputs.size() != 2 || mt.next(pre, "Erf") != &erf) return {};
  const nxrt_value* x = pre->inputs[0];
  if (!(edit::is_op(*pre, "Div") && Matcher::is_scalar(pre->inputs[1], std::sqrt(2.0))) &&
      !(edit::is_op(*pre, "Mul") && Matcher::is_scalar(pre->inputs[1], 1.0 / std::sqrt(2.0))))
    return {};
  nxrt_node* add = mt.next(&erf, "Add");
  if (!add || !Matcher::is_scalar(Matcher::other(add, erf.outputs[0]), 1.0)) return {};
  nxrt_node* mul = mt.next(add, "Mul");
  if (!mul) return {};
  const nxrt_value* o = Matcher::other(mul, add->outputs[0]);
  if (o == x) {
    nxrt_node* half = mt.next(mul, "Mul");
    if (!half || !Matcher::is_scalar(Matcher::other(half, mul->outputs[0]), 0.5)) return {};
    return {pre, &erf, add, mul, half};
  }
  nxrt_node* half = edit::producer(mt.m, o, "Mul");
  if (!half || mt.next(half, "Mul") != mul || !Matcher::is_scalar(Matcher::other(half, x), 0.5)) return {};
  return {half, pre, &erf, add, mul};
}

// softmax(Q K^T [* scale] [+ mask]) V, found from its Softmax.
std::vector<nxrt_node*> attention(const Matcher& mt, nxrt_node& softmax) {
  if (!edit::is_op(softmax, "Softmax") || softmax.inputs.empty()) return {};
  nxrt_node* av = mt.next(&softmax, "MatMul");
  if (!av || av->inputs[0] != softmax.outputs[0]) return {};
  std::vector<nxrt_node*> g = {&softmax, av};
  nxrt_node* n = edit::producer(mt.m, softmax.inputs[0]);
  auto single_use = [&](nxrt_node* p) { return p && mt.next(p, g.front()->op_type.c_str()) == g.front(); };
  if (n && edit::is_op(*n, "Add") && single_use(n)) {  // mask
    g.insert(g.begin(), n);
    n = edit::producer(mt.m, n->inputs[0]);
  }
  if (n && (edit::is_op(*n, "Div") || edit::is_op(*n, "Mul")) && n->inputs.size() == 2 && n->inputs[1] &&
      n->inputs[1]->constant && single_use(n)) {  // scale
    g.insert(g.begin(), n);
    n = edit::producer(mt.m, n->inputs[0]);
  }
  if (!n || !edit::is_op(*n, "MatMul") || !single_use(n)) return {};
  g.insert(g.begin(), n);
  return g;
}

}  // namespace

size_t mark_fusion_groups(nxrt_model_ir& m) {
  const auto body_names = edit::names_read_by_bodies(m);
  const Matcher mt{m, body_names};
  std::set<const nxrt_node*> taken;
  size_t changed = 0;
  auto mark = [&](const char* pattern, std::vector<nxrt_node*> g) {
    if (g.empty()) return;
    for (auto* n : g)
      if (taken.count(n) || !n->annotations.empty()) return;
    std::vector<int64_t> indices;
    for (auto* n : g) indices.push_back(int64_t(n->index));
    std::sort(indices.begin(), indices.end());
    for (auto* n : g) {
      taken.insert(n);
      nxrt_attribute kind;
      kind.name = kFusionAttr;
      kind.type = NXRT_ATTR_STRING;
      kind.s = pattern;
      nxrt_attribute members;
      members.name = kFusionGroupAttr;
      members.type = NXRT_ATTR_INTS;
      members.ints = indices;
      n->annotations.push_back(std::move(kind));
      n->annotations.push_back(std::move(members));
    }
    ++changed;
  };
  for (auto& n : m.nodes) {
    if (n->removed) continue;
    if (n->op_type == "ReduceMean") mark("LayerNormalization", layer_norm(mt, *n));
    else if (n->op_type == "Erf") mark("Gelu", gelu(mt, *n));
    else if (n->op_type == "Softmax") mark("Attention", attention(mt, *n));
  }
  return changed;
}

}  // namespace nxrt::passes
