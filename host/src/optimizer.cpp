// Host graph optimizations: what every EP benefits from, done once.
//  1. Constant nodes become constant values (no EP needs a Constant kernel).
//  2. Identity and inference-mode Dropout are removed by rewiring consumers.
//  3. Inference BatchNormalization after a Conv with constant weights is folded into the
//     Conv's weights and bias (one pass over the activations instead of two).
#include "error.hpp"
#include "ir.hpp"
#include "optimizer.hpp"

#include <algorithm>
#include <set>
#include <string>
#include <cmath>

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

// Names control-flow bodies read from enclosing graphs (any depth): a body finds them
// by name, so the values must keep their names and producers.
void collect_outer_names(const std::vector<std::unique_ptr<nxrt_node>>& nodes, std::set<std::string>& names) {
  for (auto& n : nodes)
    for (auto& a : n->attributes)
      if (a.graph) {
        for (const nxrt_value* v : a.graph->outer) names.insert(v->name);
        collect_outer_names(a.graph->nodes, names);
      }
}

void remove_noops(nxrt_model_ir& m) {
  std::set<std::string> read_by_bodies;
  collect_outer_names(m.nodes, read_by_bodies);
  for (auto& n : m.nodes) {
    if (n->removed || !is_noop(*n) || !n->outputs[0]) continue;
    nxrt_value* in = n->inputs[0];
    nxrt_value* out = n->outputs[0];
    if (out->is_graph_output || read_by_bodies.count(out->name)) continue;
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

const float* float_constant(const nxrt_value* v, int64_t count) {
  if (!v || !v->constant || v->constant->dtype != NXRT_DTYPE_FLOAT32 || v->constant->numel() != count) return nullptr;
  return reinterpret_cast<const float*>(v->constant->data.data());
}

void drop_use(nxrt_value* v, const nxrt_node& n) {
  auto& c = v->consumers;
  auto it = std::find(c.begin(), c.end(), int(n.index));
  if (it != c.end()) c.erase(it);
  if (c.empty() && !v->is_graph_output) v->constant.reset();  // free weights nobody reads
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

void fold_batchnorm(nxrt_model_ir& m) {
  for (auto& bn_ptr : m.nodes) {
    nxrt_node& bn = *bn_ptr;
    if (bn.removed || bn.op_type != "BatchNormalization" || !bn.domain.empty() || bn.inputs.size() != 5) continue;
    bool extra_outputs = false;
    for (size_t i = 1; i < bn.outputs.size(); ++i) extra_outputs |= bn.outputs[i] != nullptr;
    bool training = false;
    double eps = 1e-5;
    for (auto& a : bn.attributes) {
      if (a.name == "training_mode") training = a.i != 0;
      if (a.name == "epsilon") eps = a.f;
    }
    nxrt_value* x = bn.inputs[0];
    if (bn.outputs.empty() || !bn.outputs[0]) continue;
    if (extra_outputs || training || !x || x->producer < 0 || x->consumers.size() != 1 || x->is_graph_output) continue;
    nxrt_node& conv = *m.nodes[size_t(x->producer)];
    if (conv.removed || conv.op_type != "Conv" || !conv.domain.empty() || conv.outputs.size() != 1 || conv.inputs.size() < 2) continue;
    nxrt_value* w = conv.inputs[1];
    if (!w || !w->constant || w->constant->dtype != NXRT_DTYPE_FLOAT32 || w->constant->dims.size() < 3) continue;
    const int64_t c = w->constant->dims[0];
    const float* scale = float_constant(bn.inputs[1], c);
    const float* shift = float_constant(bn.inputs[2], c);
    const float* mean = float_constant(bn.inputs[3], c);
    const float* var = float_constant(bn.inputs[4], c);
    nxrt_value* b = conv.inputs.size() > 2 ? conv.inputs[2] : nullptr;
    const float* bias = b ? float_constant(b, c) : nullptr;
    if (!scale || !shift || !mean || !var || (b && !bias)) continue;

    // Weights only this Conv reads are scaled in place: no second copy of them in memory.
    auto w2 = w->consumers.size() == 1 && w->constant.use_count() == 1 ? std::const_pointer_cast<HostTensor>(w->constant)
                                                                         : std::make_shared<HostTensor>(*w->constant);
    auto b2 = std::make_shared<HostTensor>();
    b2->dtype = NXRT_DTYPE_FLOAT32;
    b2->dims = {c};
    b2->data.resize(size_t(c) * 4);
    float* wd = reinterpret_cast<float*>(w2->data.data());
    float* bd = reinterpret_cast<float*>(b2->data.data());
    const int64_t per = w2->numel() / c;
    for (int64_t o = 0; o < c; ++o) {
      double k = double(scale[o]) / std::sqrt(double(var[o]) + eps);
      for (int64_t i = 0; i < per; ++i) wd[o * per + i] = float(double(wd[o * per + i]) * k);
      bd[o] = float(((bias ? double(bias[o]) : 0.0) - double(mean[o])) * k + double(shift[o]));
    }
    drop_use(w, conv);
    if (b) drop_use(b, conv);
    for (size_t i = 1; i < 5; ++i) drop_use(bn.inputs[i], bn);
    conv.inputs.resize(3);
    conv.inputs[1] = new_constant(m, w->name + "/folded:" + bn.name, std::move(w2));
    conv.inputs[2] = new_constant(m, conv.name + "/bias:" + bn.name, std::move(b2));
    conv.inputs[1]->consumers.push_back(int(conv.index));
    conv.inputs[2]->consumers.push_back(int(conv.index));
    // The Conv now produces what the BatchNormalization produced.
    nxrt_value* y = bn.outputs[0];
    conv.outputs[0] = y;
    y->producer = int(conv.index);
    x->consumers.clear();
    x->producer = -1;
    bn.removed = true;
  }
}

}  // namespace

void optimize(nxrt_model_ir& model) {
  fold_constants(model);
  remove_noops(model);
  fold_batchnorm(model);
}

}  // namespace nxrt
