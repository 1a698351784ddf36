// The partitioner: offers the unassigned nodes to each EP in order (then, with
// fallback, to the fallback EPs), keeps convex claims whole and splits the others,
// and orders the claims for execution.
#include "partitioner.hpp"

#include "claims.hpp"
#include "control_flow.hpp"
#include "error.hpp"
#include "session.hpp"
#include "status.hpp"

#include <fmt/format.h>

#include <queue>
#include <set>

namespace nxrt {

const char* refusal_name(nxrt_refusal r) {
  switch (r) {
    case NXRT_REFUSE_OP: return "op";
    case NXRT_REFUSE_OPSET: return "opset";
    case NXRT_REFUSE_DTYPE: return "dtype";
    case NXRT_REFUSE_SHAPE: return "shape";
    case NXRT_REFUSE_ATTRIBUTE: return "attribute";
    default: return "other";
  }
}

namespace {

// Per value id: the nodes whose bodies read it (control flow's implicit inputs).
std::vector<std::vector<int>> body_readers(const nxrt_model_ir& m) {
  std::vector<std::vector<int>> readers(m.values.size());
  for (const nxrt_node* n : m.live_nodes())
    for (auto& a : n->attributes)
      if (a.graph) {
        for (const nxrt_value* v : implicit_inputs(m, *n)) readers[v->id].push_back(int(n->index));
        break;
      }
  return readers;
}

// A group is convex when no path leaves it and comes back (through a body's read of a
// value too: the control-flow node depends on it).
bool convex(const nxrt_model_ir& m, const std::set<size_t>& g) {
  std::vector<char> seen(m.nodes.size(), 0);
  std::vector<size_t> stack;
  const auto implicit = body_readers(m);
  auto consumers = [&](const nxrt_value* out) {
    std::vector<int> c = out->consumers;
    c.insert(c.end(), implicit[out->id].begin(), implicit[out->id].end());
    return c;
  };
  auto push_consumers = [&](size_t n) {
    for (auto* out : m.nodes[n]->outputs)
      if (out) for (int c : consumers(out)) stack.push_back(size_t(c));
  };
  for (size_t n : g) push_consumers(n);
  // Walk only outside the group; reaching the group again breaks convexity.
  std::vector<size_t> frontier;
  for (size_t c : stack) if (!g.count(c)) frontier.push_back(c);
  while (!frontier.empty()) {
    size_t c = frontier.back();
    frontier.pop_back();
    if (seen[c]) continue;
    seen[c] = 1;
    for (auto* out : m.nodes[c]->outputs) {
      if (!out) continue;
      for (int cc : consumers(out)) {
        if (g.count(size_t(cc))) return false;
        frontier.push_back(size_t(cc));
      }
    }
  }
  return true;
}

// A plugin sees only unassigned nodes, so it cannot know whether a group is convex in the
// whole model. A convex claim is kept whole; any other is split into runs that are
// consecutive in the model's topological order, which are convex, and convex units always
// form an acyclic order.
}  // namespace

std::vector<std::vector<size_t>> convex_parts(const nxrt_model_ir& m, const std::set<size_t>& g) {
  if (g.size() <= 1 || convex(m, g)) return {std::vector<size_t>(g.begin(), g.end())};
  std::vector<std::vector<size_t>> parts;
  bool open = false;
  for (const nxrt_node* n : m.live_nodes()) {
    if (!g.count(n->index)) {
      open = false;
      continue;
    }
    if (!open) parts.emplace_back();
    parts.back().push_back(n->index);
    open = true;
  }
  return parts;
}

namespace {

bool touches_string(const nxrt_node& n) {
  for (auto* v : n.inputs)
    if (v && v->dtype == NXRT_DTYPE_STRING) return true;
  for (auto* v : n.outputs)
    if (v && v->dtype == NXRT_DTYPE_STRING) return true;
  return false;
}

}  // namespace

void Session::partition(bool fallback, const std::vector<std::shared_ptr<PluginLibrary>>& fallback_libs, int threads,
                        uint32_t device) {
  assign_.assign(model_->nodes.size(), Assignment{});
  std::set<size_t> unassigned;
  for (auto* n : model_->live_nodes()) unassigned.insert(n->index);

  auto offer = [&](int ep_index, bool fell_back) {
    EpInstance& ep = *eps_[size_t(ep_index)];
    if (unassigned.empty()) return;
    nxrt_graph view;
    view.model = model_.get();
    // Nodes that read or write a string tensor are shown only to an EP that declares
    // string tensors and works in host memory (nxrt_string elements are host pointers).
    const bool strings_ok = ep.lib->has(NXRT_FEATURE_STRING_TENSORS) && ep.location == 0;
    std::set<size_t> hidden;
    for (size_t n : unassigned) {
      if (!strings_ok && touches_string(*model_->nodes[n])) {
        hidden.insert(n);
        continue;
      }
      view.nodes.push_back(model_->nodes[n].get());
    }
    view.inputs.assign(model_->inputs.begin(), model_->inputs.end());
    view.outputs.assign(model_->outputs.begin(), model_->outputs.end());
    nxrt_claim_sink sink;
    sink.view = &view;
    sink.plugin = ep.lib->name();
    sink.fused_allowed = ep.lib->has(NXRT_FEATURE_FUSED_GROUPS);
    for (auto* n : view.nodes) sink.in_view.insert(n->index);
    check_plugin(*ep.lib, guarded(ep.lib->name(), "get_capability", [&] { return ep.lib->api().get_capability(ep.session, &view, &sink); }),
                 "asking which nodes it supports");
    if (!sink.error.empty()) raise(NXRT_ERR_PLUGIN, "plugin '{}' broke the claim protocol: {}", ep.lib->name(), sink.error);
    for (auto& group : sink.groups) {
      for (auto& part : convex_parts(*model_, std::set<size_t>(group.begin(), group.end()))) {
        for (size_t n : part) {
          assign_[n].ep = ep_index;
          assign_[n].fell_back = fell_back;
          unassigned.erase(n);
        }
        groups_.push_back(std::move(part));
        group_ep_.push_back(ep_index);
      }
    }
    for (size_t n : unassigned) {
      auto it = sink.refusals.find(n);
      std::string why = hidden.count(n) ? (ep.location == 0 ? "the node touches a string tensor and the plugin does not declare string tensors (dtype)"
                                                            : "the node touches a string tensor, which lives in host memory only (dtype)")
                        : it == sink.refusals.end() ? "no verdict given"
                                                    : fmt::format("{} ({})", it->second.second, refusal_name(it->second.first));
      if (!assign_[n].reasons.empty()) assign_[n].reasons += "; ";
      assign_[n].reasons += fmt::format("{}: {}", ep.lib->name(), why);
    }
  };

  std::string requested;
  for (size_t i = 0; i < eps_.size(); ++i) {
    requested += (i ? "," : "") + eps_[i]->lib->name();
    offer(int(i), false);
  }
  // Control flow no requested EP took is the host's (before any fallback EP is opened for it).
  for (auto it = unassigned.begin(); it != unassigned.end();) {
    if (!is_host_op(*model_->nodes[*it])) {
      ++it;
      continue;
    }
    assign_[*it].host = true;
    groups_.push_back({*it});
    group_ep_.push_back(-1);
    it = unassigned.erase(it);
  }
  if (!unassigned.empty() && fallback) {
    for (auto& lib : fallback_libs) {
      if (unassigned.empty()) break;
      bool used = false;
      for (auto& e : eps_) used |= e->lib == lib;
      if (used || lib->devices().empty()) continue;
      auto inst = EpInstance::create(lib, device < lib->devices().size() ? device : 0, threads, ep_options_, policy_);
      eps_.push_back(std::move(inst));
      offer(int(eps_.size() - 1), true);
    }
  }
  if (!unassigned.empty()) {
    std::string list;
    size_t shown = 0;
    for (size_t n : unassigned) {
      if (shown++ == 5) {
        list += fmt::format("; ... and {} more", unassigned.size() - 5);
        break;
      }
      const auto& node = *model_->nodes[n];
      list += fmt::format("{}node '{}' ({}{}{}): {}", shown > 1 ? "; " : "", node.name, node.domain,
                          node.domain.empty() ? "" : "::", node.op_type, assign_[n].reasons.empty() ? "no EP offered" : assign_[n].reasons);
    }
    raise(NXRT_ERR_UNSUPPORTED, "{} node(s) are not supported by the requested EPs ({}){}: {}", unassigned.size(), requested,
          fallback ? " or any fallback EP" : "; pass --fallback to place them on another EP", list);
  }
}

// Orders claims topologically (claims are convex, so their quotient graph is a DAG).
std::vector<size_t> order_groups(const nxrt_model_ir& m, const std::vector<std::vector<size_t>>& groups) {
  std::vector<int> unit_of(m.nodes.size(), -1);
  for (size_t u = 0; u < groups.size(); ++u) for (size_t n : groups[u]) unit_of[n] = int(u);
  std::vector<std::set<size_t>> succ(groups.size());
  std::vector<size_t> indeg(groups.size(), 0);
  for (size_t u = 0; u < groups.size(); ++u)
    for (size_t n : groups[u]) {
      // A control-flow node also depends on what its bodies read from this graph.
      std::vector<const nxrt_value*> ins(m.nodes[n]->inputs.begin(), m.nodes[n]->inputs.end());
      for (const nxrt_value* v : implicit_inputs(m, *m.nodes[n])) ins.push_back(v);
      for (const nxrt_value* in : ins)
        if (in && in->producer >= 0) {
          int p = unit_of[size_t(in->producer)];
          if (p >= 0 && size_t(p) != u && succ[size_t(p)].insert(u).second) indeg[u]++;
        }
    }
  auto first = [&](size_t u) { return groups[u].front(); };
  auto cmp = [&](size_t a, size_t b) { return first(a) > first(b); };
  std::priority_queue<size_t, std::vector<size_t>, decltype(cmp)> ready(cmp);
  for (size_t u = 0; u < groups.size(); ++u) if (indeg[u] == 0) ready.push(u);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t u = ready.top();
    ready.pop();
    order.push_back(u);
    for (size_t s : succ[u]) if (--indeg[s] == 0) ready.push(s);
  }
  if (order.size() != groups.size()) raise(NXRT_ERR_RUNTIME, "claims form a cycle; cannot order them");
  return order;
}

}  // namespace nxrt
