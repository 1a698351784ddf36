// Small graph edits the optimizer's passes share.
#include "optimizer/graph_edit.hpp"

#include <algorithm>
#include <cstring>

namespace nxrt::edit {
namespace {

void collect_outer_names(const std::vector<std::unique_ptr<nxrt_node>>& nodes, std::set<std::string>& names) {
  for (auto& n : nodes)
    for (auto& a : n->attributes)
      if (a.graph) {
        for (const nxrt_value* v : a.graph->outer) names.insert(v->name);
        collect_outer_names(a.graph->nodes, names);
      }
}

}  // namespace

std::set<std::string> names_read_by_bodies(const nxrt_model_ir& m) {
  std::set<std::string> names;
  collect_outer_names(m.nodes, names);
  return names;
}

bool used(const nxrt_value* v, const std::set<std::string>& body_names) {
  return v && (!v->consumers.empty() || v->is_graph_output || body_names.count(v->name));
}

void replace_uses(nxrt_model_ir& m, nxrt_value* from, nxrt_value* to) {
  for (int c : from->consumers) {
    for (auto& in : m.nodes[size_t(c)]->inputs)
      if (in == from) in = to;
    to->consumers.push_back(c);
  }
  // A node reading `from` twice was listed twice and appended twice: counts stay right.
  from->consumers.clear();
}

void drop_use(nxrt_value* v, const nxrt_node& n, const std::set<std::string>& body_names) {
  if (!v) return;
  auto& c = v->consumers;
  auto it = std::find(c.begin(), c.end(), int(n.index));
  if (it != c.end()) c.erase(it);
  if (!used(v, body_names)) v->constant.reset();  // free weights nobody reads
}

void remove_node(nxrt_node& n, const std::set<std::string>& body_names) {
  for (auto* in : n.inputs) drop_use(in, n, body_names);
  for (auto* out : n.outputs)
    if (out && out->producer == int(n.index)) out->producer = -1;
  n.removed = true;
}

nxrt_value* new_constant(nxrt_model_ir& m, std::string name, std::shared_ptr<HostTensor> t) {
  auto v = std::make_unique<nxrt_value>();
  v->id = m.values.size();
  v->name = std::move(name);
  v->dtype = t->dtype;
  v->rank = int64_t(t->dims.size());
  v->dims = t->dims;
  v->constant = std::move(t);
  m.values.push_back(std::move(v));
  return m.values.back().get();
}

bool is_op(const nxrt_node& n, const char* op) { return !n.removed && n.domain.empty() && n.op_type == op; }

nxrt_node* producer(const nxrt_model_ir& m, const nxrt_value* v, const char* op) {
  if (!v || v->producer < 0 || v->body) return nullptr;
  nxrt_node* n = m.nodes[size_t(v->producer)].get();
  if (n->removed || (op && !is_op(*n, op))) return nullptr;
  return n;
}

nxrt_node* sole_consumer(const nxrt_model_ir& m, const nxrt_value* v, const std::set<std::string>& body_names) {
  if (!v || v->consumers.size() != 1 || v->is_graph_output || body_names.count(v->name)) return nullptr;
  nxrt_node* n = m.nodes[size_t(v->consumers[0])].get();
  return n->removed ? nullptr : n;
}

bool scalar_constant(const nxrt_value* v, double* out) {
  if (!v || !v->constant || v->constant->numel() != 1) return false;
  const auto& t = *v->constant;
  if (t.dtype == NXRT_DTYPE_FLOAT32) {
    float f;
    std::memcpy(&f, t.data.data(), 4);
    *out = f;
    return true;
  }
  if (t.dtype == NXRT_DTYPE_FLOAT64) {
    std::memcpy(out, t.data.data(), 8);
    return true;
  }
  return false;
}

}  // namespace nxrt::edit
