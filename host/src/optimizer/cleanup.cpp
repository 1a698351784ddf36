// Level 1 clean-up passes: Constant nodes to values, no-op removal, common-subexpression
// and dead-node elimination. None of them changes a single output bit.
#include "optimizer.hpp"
#include "optimizer/graph_edit.hpp"

#include <cstring>
#include <fmt/format.h>
#include <map>

namespace nxrt::passes {
namespace {

std::shared_ptr<const HostTensor> constant_payload(const nxrt_node& n) {
  for (const auto& a : n.attributes) {
    if (a.name == "value" && a.tensor) return a.tensor;
    auto t = std::make_shared<HostTensor>();
    auto set = [&](nxrt_dtype dt, const void* p, size_t bytes, std::vector<int64_t> dims) {
      t->dtype = dt;
      t->dims = std::move(dims);
      t->data.assign(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + bytes);
      return t;
    };
    if (a.name == "value_float") return set(NXRT_DTYPE_FLOAT32, &a.f, 4, {});
    if (a.name == "value_int") return set(NXRT_DTYPE_INT64, &a.i, 8, {});
    if (a.name == "value_floats") return set(NXRT_DTYPE_FLOAT32, a.floats.data(), a.floats.size() * 4, {int64_t(a.floats.size())});
    if (a.name == "value_ints") return set(NXRT_DTYPE_INT64, a.ints.data(), a.ints.size() * 8, {int64_t(a.ints.size())});
  }
  return nullptr;  // sparse or string constants stay as nodes; EPs decide
}

// An input Dropout ignores in inference: absent, or a constant false training_mode.
bool inference_dropout(const nxrt_node& n) {
  if (n.outputs.size() > 1 && n.outputs[1]) return false;  // the mask is asked for
  if (n.inputs.empty() || !n.inputs[0]) return false;
  if (n.inputs.size() > 2 && n.inputs[2]) {
    const nxrt_value* mode = n.inputs[2];
    if (!mode->constant || mode->constant->numel() != 1 || mode->constant->data.empty()) return false;
    if (mode->constant->data[0] != 0) return false;
  }
  return true;
}

bool is_noop(const nxrt_node& n) {
  if (!n.domain.empty() || n.outputs.empty() || !n.outputs[0] || n.inputs.empty() || !n.inputs[0]) return false;
  if (n.op_type == "Identity") return n.inputs.size() == 1;
  if (n.op_type == "Dropout") return inference_dropout(n);
  if (n.op_type == "Cast") {
    const nxrt_attribute* to = find_attribute(n, "to");
    return to && n.inputs[0]->dtype != NXRT_DTYPE_UNDEFINED && nxrt_dtype(to->i) == n.inputs[0]->dtype;
  }
  if (n.op_type == "CastLike")
    return n.inputs.size() == 2 && n.inputs[1] && n.inputs[0]->dtype != NXRT_DTYPE_UNDEFINED &&
           n.inputs[0]->dtype == n.inputs[1]->dtype;
  return false;
}

// Random ops give a new answer each run: two of them are not one.
bool nondeterministic(const nxrt_node& n) {
  static const std::set<std::string> random = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                                               "Multinomial", "Bernoulli", "Dropout"};
  return n.domain.empty() && random.count(n.op_type);
}

// What makes two nodes compute the same thing: op, attributes, inputs. Small constants
// are compared by content, so two equal scalars read as one input.
std::string node_key(const nxrt_node& n) {
  std::string k = n.domain + "::" + n.op_type + "(";
  for (const nxrt_value* v : n.inputs) {
    if (!v) k += "-,";
    else if (v->constant && v->constant->data.size() <= 256) {
      const auto& t = *v->constant;
      k += fmt::format("c{}[{}]", int(t.dtype), fmt::join(t.dims, "x"));
      k.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
      k += ",";
    } else {
      k += fmt::format("v{},", v->id);
    }
  }
  k += ")";
  for (const auto& a : n.attributes) {
    k += fmt::format("|{}:{}:{}:", a.name, int(a.type), a.i);
    k.append(reinterpret_cast<const char*>(&a.f), sizeof a.f);
    k += a.s + fmt::format(":{}:", fmt::join(a.ints, ","));
    k.append(reinterpret_cast<const char*>(a.floats.data()), a.floats.size() * sizeof(float));
    for (auto& s : a.strings) k += fmt::format("{}:{}", s.size(), s);
    if (a.tensor) {
      k += fmt::format("t{}[{}]", int(a.tensor->dtype), fmt::join(a.tensor->dims, "x"));
      k.append(reinterpret_cast<const char*>(a.tensor->data.data()), a.tensor->data.size());
    }
  }
  return k;
}

bool comparable(const nxrt_node& n) {
  if (n.removed || nondeterministic(n) || n.outputs.empty()) return false;
  // A quantized model gives each reader of a tensor its own DequantizeLinear, so an EP can
  // run each DequantizeLinear -> op -> QuantizeLinear as one 8-bit kernel: merging the
  // copies would take that away (ONNX Runtime even splits shared ones for the same reason).
  if (n.op_type == "DequantizeLinear" && n.domain.empty()) return false;
  for (const auto& a : n.attributes)
    if (a.graph || a.proto) return false;  // bodies and sparse tensors: not compared
  return true;
}

}  // namespace

size_t fold_constant_nodes(nxrt_model_ir& m) {
  size_t changed = 0;
  for (auto& n : m.nodes) {
    if (n->removed || n->op_type != "Constant" || !n->domain.empty() || n->outputs.size() != 1 || !n->outputs[0]) continue;
    auto payload = constant_payload(*n);
    if (!payload) continue;
    nxrt_value* out = n->outputs[0];
    if (out->is_graph_output) continue;  // keep graph outputs produced by a node
    out->constant = payload;
    out->dtype = payload->dtype;
    out->rank = int64_t(payload->dims.size());
    out->dims = payload->dims;
    out->producer = -1;
    n->removed = true;
    ++changed;
  }
  return changed;
}

size_t remove_noops(nxrt_model_ir& m) {
  const auto body_names = edit::names_read_by_bodies(m);
  size_t changed = 0;
  for (auto& n : m.nodes) {
    if (n->removed || !is_noop(*n)) continue;
    nxrt_value* in = n->inputs[0];
    nxrt_value* out = n->outputs[0];
    if (out->is_graph_output || body_names.count(out->name)) continue;
    edit::replace_uses(m, out, in);
    edit::remove_node(*n, body_names);
    ++changed;
  }
  return changed;
}

size_t eliminate_common_subexpressions(nxrt_model_ir& m) {
  const auto body_names = edit::names_read_by_bodies(m);
  std::map<std::string, nxrt_node*> seen;
  size_t changed = 0;
  for (auto& np : m.nodes) {  // topological: a rewired input makes later duplicates visible
    nxrt_node& n = *np;
    if (!comparable(n)) continue;
    auto [it, fresh] = seen.emplace(node_key(n), &n);
    if (fresh) continue;
    nxrt_node& first = *it->second;
    bool ok = first.outputs.size() == n.outputs.size();
    for (size_t i = 0; ok && i < n.outputs.size(); ++i) {
      const nxrt_value* o = n.outputs[i];
      if (o && (o->is_graph_output || body_names.count(o->name) || !first.outputs[i])) ok = false;
    }
    if (!ok) continue;
    for (size_t i = 0; i < n.outputs.size(); ++i)
      if (n.outputs[i]) edit::replace_uses(m, n.outputs[i], first.outputs[i]);
    edit::remove_node(n, body_names);
    ++changed;
  }
  return changed;
}

size_t eliminate_dead_nodes(nxrt_model_ir& m) {
  const auto body_names = edit::names_read_by_bodies(m);
  size_t changed = 0;
  // Backwards: removing a node can leave its producers dead too.
  for (auto it = m.nodes.rbegin(); it != m.nodes.rend(); ++it) {
    nxrt_node& n = **it;
    if (n.removed) continue;
    bool live = false;
    for (const nxrt_value* out : n.outputs) live |= edit::used(out, body_names);
    if (live) continue;
    edit::remove_node(n, body_names);
    ++changed;
  }
  return changed;
}

}  // namespace nxrt::passes
