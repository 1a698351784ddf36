// Level 1 constant folding: every node whose inputs are all constant (or made by such
// nodes) runs once, at session creation, on the CPU plugin through the ABI: the nodes go
// into a small model of their own, that model gets a session on the CPU EP and one run,
// and its outputs become constants. The host computes no op math itself.
#include "claims.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "optimizer.hpp"
#include "optimizer/graph_edit.hpp"
#include "session.hpp"
#include "status.hpp"

#include <fmt/format.h>

#include <map>

namespace nxrt::passes {
namespace {

bool foldable_op(const nxrt_node& n, const std::set<std::string>& body_names) {
  static const std::set<std::string> random = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                                               "Multinomial", "Bernoulli", "Dropout"};
  if (n.removed || !n.domain.empty() || random.count(n.op_type) || n.inputs.empty() || n.outputs.empty()) return false;
  // DequantizeLinear of constant weights stays: it is what marks a quantized model's weights
  // (the QDQ groups an EP runs as 8-bit kernels), and folding it would store them as float32,
  // four times the bytes. ONNX Runtime keeps these nodes for the same reason.
  if (n.op_type == "DequantizeLinear") return false;
  for (const auto& a : n.attributes)
    if (a.graph || a.proto) return false;  // control flow, sparse tensors: left to the EPs
  bool any_used = false;
  for (const nxrt_value* out : n.outputs) {
    if (!out) continue;
    // A graph output keeps its producer (a body reads a value by name): not folded.
    if (out->is_graph_output || body_names.count(out->name) || out->dtype == NXRT_DTYPE_UNDEFINED ||
        out->dtype == NXRT_DTYPE_STRING)
      return false;
    any_used |= !out->consumers.empty();
  }
  return any_used;
}

// Folding computes a node at session creation and keeps its result for the session's life.
// A node whose output is known to be larger than this stays in the graph: a fuzzed model's
// 1 GiB ConstantOfShape took 4 s to fold (23 s under ASan) only for the model to be refused
// right after; a real model computes such a tensor per run, where the memory plan can reuse it.
constexpr uint64_t kMaxFoldBytes = uint64_t(64) << 20;

bool output_too_large(const nxrt_node& n) {
  for (const nxrt_value* out : n.outputs) {
    if (!out || out->rank < 0) continue;
    uint64_t bytes = dtype_size(out->dtype);
    bool known = true;
    for (int64_t d : out->dims) {
      if (d < 0) {
        known = false;
        break;
      }
      bytes = d != 0 && bytes > kMaxFoldBytes / uint64_t(d) ? kMaxFoldBytes + 1 : bytes * uint64_t(d);
    }
    if (known && bytes > kMaxFoldBytes) return true;
  }
  return false;
}

// The candidate nodes as a model of their own: constants in, every output out.
struct FoldModel {
  std::shared_ptr<nxrt_model_ir> ir;
  std::vector<size_t> origin;                // mini node index -> model node index
  std::vector<const nxrt_value*> produced;   // mini output k -> model value
};

FoldModel build(const nxrt_model_ir& m, const std::vector<size_t>& nodes) {
  FoldModel f;
  f.ir = std::make_shared<nxrt_model_ir>();
  auto& ir = *f.ir;
  ir.opsets = m.opsets;
  ir.path = m.path;
  ir.ir_version = m.ir_version;
  std::map<const nxrt_value*, nxrt_value*> copy;
  auto value = [&](const nxrt_value* v) {
    auto it = copy.find(v);
    if (it != copy.end()) return it->second;
    auto c = std::make_unique<nxrt_value>();
    c->id = ir.values.size();
    c->name = v->name;
    c->dtype = v->dtype;
    c->rank = v->rank;
    c->dims = v->dims;
    c->constant = v->constant;
    nxrt_value* raw = c.get();
    ir.values.push_back(std::move(c));
    copy[v] = raw;
    return raw;
  };
  for (size_t idx : nodes) {
    const nxrt_node& src = *m.nodes[idx];
    auto n = std::make_unique<nxrt_node>();
    n->index = ir.nodes.size();
    n->name = src.name;
    n->op_type = src.op_type;
    n->domain = src.domain;
    n->attributes = src.attributes;
    for (const nxrt_value* in : src.inputs) {
      nxrt_value* v = in ? value(in) : nullptr;
      if (v) v->consumers.push_back(int(n->index));
      n->inputs.push_back(v);
    }
    for (const nxrt_value* out : src.outputs) {
      nxrt_value* v = out ? value(out) : nullptr;
      if (v) {
        v->producer = int(n->index);
        v->is_graph_output = true;
        ir.outputs.push_back(v);
        f.produced.push_back(out);
      }
      n->outputs.push_back(v);
    }
    f.origin.push_back(idx);
    ir.nodes.push_back(std::move(n));
  }
  return f;
}

// The nodes of f the CPU plugin claims (any grouping).
std::set<size_t> claimed(const FoldModel& f, EpInstance& ep) {
  nxrt_graph view;
  view.model = f.ir.get();
  for (auto& n : f.ir->nodes) view.nodes.push_back(n.get());
  view.outputs.assign(f.ir->outputs.begin(), f.ir->outputs.end());
  nxrt_claim_sink sink;
  sink.view = &view;
  sink.plugin = ep.lib->name();
  sink.fused_allowed = ep.lib->has(NXRT_FEATURE_FUSED_GROUPS);
  for (size_t i = 0; i < f.ir->nodes.size(); ++i) sink.in_view.insert(i);
  check_plugin(*ep.lib, guarded(ep.lib->name(), "get_capability", [&] { return ep.lib->api().get_capability(ep.session, &view, &sink); }),
               "asking which constant nodes it can fold");
  if (!sink.error.empty()) raise(NXRT_ERR_PLUGIN, "plugin '{}' broke the claim protocol: {}", ep.lib->name(), sink.error);
  return sink.claimed;
}

}  // namespace

size_t fold_constants(nxrt_model_ir& m, const std::shared_ptr<PluginLibrary>& cpu, std::string* note) {
  if (!cpu || cpu->devices().empty()) {
    if (note) *note = "skipped: the CPU plugin is not loaded";
    return 0;
  }
  const auto body_names = edit::names_read_by_bodies(m);
  // Candidates, in topological order: all inputs constant or made by a candidate.
  std::vector<char> candidate(m.nodes.size(), 0);
  auto inputs_known = [&](const nxrt_node& n) {
    for (const nxrt_value* in : n.inputs)
      if (in && !in->constant && !(in->producer >= 0 && !in->body && candidate[size_t(in->producer)])) return false;
    return true;
  };
  size_t too_large = 0;
  for (auto& n : m.nodes)
    if (foldable_op(*n, body_names) && inputs_known(*n)) {
      if (output_too_large(*n)) ++too_large;
      else candidate[n->index] = 1;
    }
  auto large_note = [&] {
    return too_large ? fmt::format("; {} node(s) left: an output above {} MiB", too_large, kMaxFoldBytes >> 20) : "";
  };
  try {
    std::unique_ptr<EpInstance> ep;
    FoldModel f;
    std::vector<HostTensor> results;
    for (;;) {
      // Nodes the plugin refuses stay, and so do the candidates that read them.
      for (;;) {
        std::vector<size_t> nodes;
        for (auto& n : m.nodes)
          if (candidate[n->index]) {
            if (inputs_known(*n)) nodes.push_back(n->index);
            else candidate[n->index] = 0;
          }
        if (nodes.empty()) {
          if (note && too_large) *note = fmt::format("on the {} plugin{}", cpu->name(), large_note());
          return 0;
        }
        f = build(m, nodes);
        if (!ep) ep = EpInstance::create(cpu, 0, 1);
        const auto ok = claimed(f, *ep);
        if (ok.size() == nodes.size()) break;
        for (size_t i = 0; i < nodes.size(); ++i)
          if (!ok.count(i)) candidate[nodes[i]] = 0;
      }
      std::vector<std::unique_ptr<EpInstance>> eps;
      eps.push_back(std::move(ep));
      Session session(f.ir, std::move(eps), false, {}, 1, 0);
      // An output sized only at run time (a shape computed by another folded node) gets the
      // same cap as a known one: its node stays and the fold runs again without it.
      session.cap_dynamic_values(kMaxFoldBytes);
      try {
        session.run(nullptr, 0, results);
        break;
      } catch (const ValueTooLarge& e) {
        if (!e.value || e.value->producer < 0 || size_t(e.value->producer) >= f.origin.size()) throw;
        candidate[f.origin[size_t(e.value->producer)]] = 0;
        ++too_large;
      }
    }
    if (results.size() != f.produced.size())
      raise(NXRT_ERR_RUNTIME, "the fold run returned {} outputs for {} values", results.size(), f.produced.size());
    for (size_t k = 0; k < results.size(); ++k) {
      nxrt_value* v = m.values[f.produced[k]->id].get();
      auto t = std::make_shared<HostTensor>(std::move(results[k]));
      t->name.clear();
      v->dtype = t->dtype;
      v->rank = int64_t(t->dims.size());
      v->dims = t->dims;
      v->constant = std::move(t);
    }
    for (size_t idx : f.origin) edit::remove_node(*m.nodes[idx], body_names);
    if (note) *note = fmt::format("on the {} plugin{}", cpu->name(), large_note());
    return f.origin.size();
  } catch (const HostError& e) {
    // The nodes stay: the model's own run reports the problem where it belongs.
    if (note) *note = fmt::format("skipped: {}", e.what());
    return 0;
  }
}

}  // namespace nxrt::passes
