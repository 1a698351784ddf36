// Level 2 rewrites: the same math in fewer nodes, float rounding may differ in the last
// bits. MatMul+Add -> Gemm; inference BatchNormalization folded into the Conv before it.
#include "optimizer.hpp"
#include "optimizer/graph_edit.hpp"

#include <cmath>

namespace nxrt::passes {
namespace {

const float* float_constant(const nxrt_value* v, int64_t count) {
  if (!v || !v->constant || v->constant->dtype != NXRT_DTYPE_FLOAT32 || v->constant->numel() != count) return nullptr;
  return reinterpret_cast<const float*>(v->constant->data.data());
}

// C can be added to an [M, N] Gemm result as Gemm broadcasts it (unidirectionally).
bool gemm_bias_fits(const nxrt_value* c, int64_t rows, int64_t cols) {
  if (!c || c->rank < 0 || c->rank > 2 || c->dtype != NXRT_DTYPE_FLOAT32) return false;
  const int64_t want[2] = {rows, cols};
  for (int64_t i = 0; i < c->rank; ++i) {
    const int64_t d = c->dims[size_t(i)];
    const int64_t w = want[2 - c->rank + i];
    if (d != 1 && (d < 0 || d != w)) return false;
  }
  return true;
}

}  // namespace

size_t fuse_matmul_add(nxrt_model_ir& m) {
  auto op = m.opsets.find("");
  if (op == m.opsets.end() || op->second < 11) return 0;  // Gemm's C is optional and broadcast from opset 11
  const auto body_names = edit::names_read_by_bodies(m);
  size_t changed = 0;
  for (auto& np : m.nodes) {
    nxrt_node& mm = *np;
    if (!edit::is_op(mm, "MatMul") || mm.inputs.size() != 2 || mm.outputs.size() != 1 || !mm.outputs[0]) continue;
    nxrt_value* a = mm.inputs[0];
    nxrt_value* b = mm.inputs[1];
    nxrt_value* y = mm.outputs[0];
    if (!a || !b || a->rank != 2 || b->rank != 2 || a->dtype != NXRT_DTYPE_FLOAT32 || b->dtype != NXRT_DTYPE_FLOAT32) continue;
    nxrt_node* add = edit::sole_consumer(m, y, body_names);
    if (!add || !edit::is_op(*add, "Add") || add->inputs.size() != 2 || add->outputs.size() != 1) continue;
    nxrt_value* c = add->inputs[0] == y ? add->inputs[1] : add->inputs[0];
    if (c == y || !add->outputs[0] || add->outputs[0]->rank != 2) continue;
    // The result's shape must be Gemm's [M, N]: C may not widen it.
    if (!gemm_bias_fits(c, a->dims[0], b->dims[1])) continue;
    // The Add becomes the Gemm (it comes after every input in topological order).
    add->op_type = "Gemm";
    add->name = mm.name;
    add->attributes.clear();
    add->inputs = {a, b, c};
    // c keeps its one use by this node; a and b gain one each.
    a->consumers.push_back(int(add->index));
    b->consumers.push_back(int(add->index));
    y->consumers.clear();
    edit::remove_node(mm, body_names);
    ++changed;
  }
  return changed;
}

size_t fold_batchnorm(nxrt_model_ir& m) {
  const auto body_names = edit::names_read_by_bodies(m);
  size_t changed = 0;
  for (auto& bn_ptr : m.nodes) {
    nxrt_node& bn = *bn_ptr;
    if (!edit::is_op(bn, "BatchNormalization") || bn.inputs.size() != 5) continue;
    bool extra_outputs = false;
    for (size_t i = 1; i < bn.outputs.size(); ++i) extra_outputs |= bn.outputs[i] != nullptr;
    const auto* mode = find_attribute(bn, "training_mode");
    const auto* epsilon = find_attribute(bn, "epsilon");
    const bool training = mode && mode->i != 0;
    const double eps = epsilon ? epsilon->f : 1e-5;
    nxrt_value* x = bn.inputs[0];
    if (bn.outputs.empty() || !bn.outputs[0] || extra_outputs || training) continue;
    if (!x || edit::sole_consumer(m, x, body_names) != &bn) continue;
    nxrt_node* conv_ptr = edit::producer(m, x, "Conv");
    if (!conv_ptr) continue;
    nxrt_node& conv = *conv_ptr;
    if (conv.outputs.size() != 1 || conv.inputs.size() < 2) continue;
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
    // Weights that are a view (a compiled model's mapped file) are written scaled into new
    // memory in one pass, never copied first.
    const bool only_reader = w->consumers.size() == 1 && !body_names.count(w->name) && !w->is_graph_output;
    std::shared_ptr<const HostTensor> w_src = w->constant;  // keeps the source alive while we read it
    const bool in_place = only_reader && w->constant.use_count() == 2 && !w_src->data.is_view();
    std::shared_ptr<HostTensor> w2;
    if (in_place) {
      w2 = std::const_pointer_cast<HostTensor>(w_src);
    } else {
      w2 = std::make_shared<HostTensor>();
      w2->name = w_src->name;
      w2->dtype = w_src->dtype;
      w2->dims = w_src->dims;
      w2->data = Bytes(w_src->data.size());
    }
    const float* ws = reinterpret_cast<const float*>(w_src->data.data());
    auto b2 = std::make_shared<HostTensor>();
    b2->dtype = NXRT_DTYPE_FLOAT32;
    b2->dims = {c};
    b2->data.resize(size_t(c) * 4);
    float* wd = reinterpret_cast<float*>(w2->data.data());
    float* bd = reinterpret_cast<float*>(b2->data.data());
    const int64_t per = w2->numel() / c;
    for (int64_t o = 0; o < c; ++o) {
      double k = double(scale[o]) / std::sqrt(double(var[o]) + eps);
      for (int64_t i = 0; i < per; ++i) wd[o * per + i] = float(double(ws[o * per + i]) * k);
      bd[o] = float(((bias ? double(bias[o]) : 0.0) - double(mean[o])) * k + double(shift[o]));
    }
    edit::drop_use(w, conv, body_names);
    if (b) edit::drop_use(b, conv, body_names);
    for (size_t i = 1; i < 5; ++i) edit::drop_use(bn.inputs[i], bn, body_names);
    conv.inputs.resize(3);
    conv.inputs[1] = edit::new_constant(m, w->name + "/folded:" + bn.name, std::move(w2));
    conv.inputs[2] = edit::new_constant(m, conv.name + "/bias:" + bn.name, std::move(b2));
    conv.inputs[1]->consumers.push_back(int(conv.index));
    conv.inputs[2]->consumers.push_back(int(conv.index));
    // The Conv now produces what the BatchNormalization produced.
    nxrt_value* y = bn.outputs[0];
    conv.outputs[0] = y;
    y->producer = int(conv.index);
    x->consumers.clear();
    x->producer = -1;
    bn.removed = true;
    ++changed;
  }
  return changed;
}

}  // namespace nxrt::passes
