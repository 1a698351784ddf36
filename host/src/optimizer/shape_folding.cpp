// Level 1 shape folding: Shape, Size and Gather-of-Shape over dimensions shape inference
// already knows, and Concat of the int64 vectors that result, become constants. This is
// the host reading its own metadata (static dims), not computing op math.
#include "optimizer.hpp"
#include "optimizer/graph_edit.hpp"

#include <cstring>

namespace nxrt::passes {
namespace {

std::shared_ptr<HostTensor> int64_tensor(const std::vector<int64_t>& values, std::vector<int64_t> dims) {
  auto t = std::make_shared<HostTensor>();
  t->dtype = NXRT_DTYPE_INT64;
  t->dims = std::move(dims);
  t->data.resize(values.size() * 8);
  if (!values.empty()) std::memcpy(t->data.data(), values.data(), values.size() * 8);
  return t;
}

// The dims a Shape node reports (start/end of opset 15 applied), -1 where unknown;
// false when the rank is unknown.
bool shape_of(const nxrt_node& shape, std::vector<int64_t>* dims) {
  const nxrt_value* x = shape.inputs.empty() ? nullptr : shape.inputs[0];
  if (!x || x->rank < 0) return false;
  const int64_t r = x->rank;
  int64_t start = 0, end = r;
  if (auto* a = find_attribute(shape, "start")) start = a->i;
  if (auto* a = find_attribute(shape, "end")) end = a->i;
  auto clamp = [&](int64_t v) { return v < 0 ? std::max<int64_t>(v + r, 0) : std::min(v, r); };
  start = clamp(start);
  end = clamp(end);
  dims->assign(x->dims.begin() + start, x->dims.begin() + std::max(start, end));
  return true;
}

bool all_static(const std::vector<int64_t>& d) {
  for (int64_t v : d)
    if (v < 0) return false;
  return true;
}

// Node n now produces constant t at output 0: the node goes, its output stays as a value.
void become_constant(nxrt_node& n, std::shared_ptr<HostTensor> t, const std::set<std::string>& body_names) {
  nxrt_value* out = n.outputs[0];
  out->dtype = t->dtype;
  out->rank = int64_t(t->dims.size());
  out->dims = t->dims;
  out->constant = std::move(t);
  edit::remove_node(n, body_names);
}

std::vector<int64_t> int64_values(const HostTensor& t) {
  std::vector<int64_t> v(size_t(t.numel()));
  if (v.empty()) return v;  // memcpy from an empty tensor's null data is undefined (UBSan, fuzz_graph_view)
  if (t.dtype == NXRT_DTYPE_INT64) std::memcpy(v.data(), t.data.data(), v.size() * 8);
  else
    for (size_t i = 0; i < v.size(); ++i) {
      int32_t x;
      std::memcpy(&x, t.data.data() + i * 4, 4);
      v[i] = x;
    }
  return v;
}

}  // namespace

size_t fold_shapes(nxrt_model_ir& m) {
  const auto body_names = edit::names_read_by_bodies(m);
  size_t changed = 0;
  for (auto& np : m.nodes) {
    nxrt_node& n = *np;
    if (n.removed || !n.domain.empty() || n.outputs.empty() || !n.outputs[0] || n.outputs[0]->is_graph_output) continue;
    std::vector<int64_t> dims;
    if (n.op_type == "Shape" && shape_of(n, &dims) && all_static(dims)) {
      become_constant(n, int64_tensor(dims, {int64_t(dims.size())}), body_names);
      ++changed;
    } else if (n.op_type == "Size" && !n.inputs.empty() && n.inputs[0] && n.inputs[0]->static_shape()) {
      // static_shape(): every dim known; the loader refused shapes whose element count overflows.
      int64_t count = 1;
      for (int64_t d : n.inputs[0]->dims) count *= d;
      become_constant(n, int64_tensor({count}, {}), body_names);
      ++changed;
    } else if (n.op_type == "Gather" && n.inputs.size() == 2 && n.inputs[1] && n.inputs[1]->constant) {
      // Gather(Shape(x), k): known when the dims it picks are, even if others are not.
      const nxrt_node* shape = edit::producer(m, n.inputs[0], "Shape");
      const auto* axis = find_attribute(n, "axis");
      const HostTensor& idx = *n.inputs[1]->constant;
      if (!shape || (axis && axis->i != 0) || !shape_of(*shape, &dims) || idx.dims.size() > 1 ||
          (idx.dtype != NXRT_DTYPE_INT64 && idx.dtype != NXRT_DTYPE_INT32))
        continue;
      std::vector<int64_t> picked;
      bool known = true;
      for (int64_t k : int64_values(idx)) {
        if (k < 0) k += int64_t(dims.size());
        if (k < 0 || k >= int64_t(dims.size()) || dims[size_t(k)] < 0) {
          known = false;  // out of range is the kernel's error to report
          break;
        }
        picked.push_back(dims[size_t(k)]);
      }
      if (!known) continue;
      become_constant(n, int64_tensor(picked, idx.dims), body_names);
      ++changed;
    } else if (n.op_type == "Concat" && !n.inputs.empty()) {
      // Concat of int64 vectors that are all known: the shape a Reshape will read.
      std::vector<int64_t> all;
      bool known = true;
      for (const nxrt_value* in : n.inputs) {
        if (!in || !in->constant || in->constant->dtype != NXRT_DTYPE_INT64 || in->constant->dims.size() != 1) {
          known = false;
          break;
        }
        auto v = int64_values(*in->constant);
        all.insert(all.end(), v.begin(), v.end());
      }
      if (!known) continue;
      become_constant(n, int64_tensor(all, {int64_t(all.size())}), body_names);
      ++changed;
    }
  }
  return changed;
}

}  // namespace nxrt::passes
