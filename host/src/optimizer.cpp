// Host graph optimizations: what every EP benefits from, done once.
//  1. Constant nodes become constant values (no EP needs a Constant kernel).
//  2. Identity and inference-mode Dropout are removed by rewiring consumers.
#include "error.hpp"
#include "ir.hpp"

#include <algorithm>

namespace nxrt {
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

void fold_constants(nxrt_model_ir& m) {
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
  }
}

bool is_noop(const nxrt_node& n) {
  if (!n.domain.empty()) return false;
  if (n.op_type == "Identity") return n.inputs.size() == 1 && n.inputs[0];
  if (n.op_type == "Dropout") {
    // Inference: output = input, unless a mask is requested or training_mode is given.
    bool mask = n.outputs.size() > 1 && n.outputs[1];
    return !mask && n.inputs.size() == 1 && n.inputs[0];
  }
  return false;
}

void remove_noops(nxrt_model_ir& m) {
  for (auto& n : m.nodes) {
    if (n->removed || !is_noop(*n) || !n->outputs[0]) continue;
    nxrt_value* in = n->inputs[0];
    nxrt_value* out = n->outputs[0];
    if (out->is_graph_output) continue;
    for (int c : out->consumers) {
      auto& consumer = *m.nodes[size_t(c)];
      for (auto& v : consumer.inputs) if (v == out) v = in;
      in->consumers.push_back(c);
    }
    out->consumers.clear();
    auto& ic = in->consumers;
    ic.erase(std::find(ic.begin(), ic.end(), int(n->index)));
    n->removed = true;
  }
}

}  // namespace

void optimize(nxrt_model_ir& model) {
  fold_constants(model);
  remove_noops(model);
}

}  // namespace nxrt
