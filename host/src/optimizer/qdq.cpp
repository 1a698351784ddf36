// One DequantizeLinear per reader (level 1, exact).
//
// A QDQ model marks an 8-bit operator as DequantizeLinear -> op -> QuantizeLinear, and an EP
// runs that whole pattern as one integer kernel only when each DequantizeLinear feeds that op
// alone. Quantizers often share one DequantizeLinear between the readers of a tensor (ONNX
// Runtime's quantize_static does by default: a residual block's input feeds its first conv
// and the Add), which left those ops in float. Each extra reader gets its own copy, placed
// right after the original, as ONNX Runtime's EnsureUniqueDQForNodeUnit does. The values
// are the same; a copy that no pattern absorbs costs one more dequantization.
#include "optimizer.hpp"
#include "optimizer/graph_edit.hpp"

#include <algorithm>
#include <vector>

namespace nxrt::passes {

size_t split_shared_dequantize(nxrt_model_ir& m) {
  const auto body_names = edit::names_read_by_bodies(m);
  // For each DequantizeLinear: the readers (distinct nodes) past the first.
  std::vector<std::vector<int>> extra(m.nodes.size());
  size_t added = 0;
  for (auto& n : m.nodes) {
    if (!edit::is_op(*n, "DequantizeLinear") || n->outputs.size() != 1 || !n->outputs[0]) continue;
    const nxrt_value* y = n->outputs[0];
    if (y->is_graph_output || body_names.count(y->name)) continue;
    std::vector<int> readers;
    for (int c : y->consumers)
      if (std::find(readers.begin(), readers.end(), c) == readers.end()) readers.push_back(c);
    if (readers.size() < 2) continue;
    extra[n->index].assign(readers.begin() + 1, readers.end());
    added += readers.size() - 1;
  }
  if (!added) return 0;
  // New order: each copy right after its original, so the order stays topological.
  struct Copy {
    nxrt_node* node;
    nxrt_value* original;  // the shared output
    int reader;            // old index of the reader it serves
  };
  std::vector<Copy> copies;
  std::vector<std::unique_ptr<nxrt_node>> order;
  order.reserve(m.nodes.size() + added);
  std::vector<int> new_index(m.nodes.size());
  const size_t first_new_value = m.values.size();
  for (auto& n : m.nodes) {
    const size_t old = n->index;
    new_index[old] = int(order.size());
    nxrt_node* dq = n.get();
    order.push_back(std::move(n));
    int k = 0;
    for (int reader : extra[old]) {
      auto c = std::make_unique<nxrt_node>(*dq);
      c->name = dq->name + "/reader" + std::to_string(++k);
      auto y = std::make_unique<nxrt_value>(*dq->outputs[0]);
      y->id = m.values.size();
      y->name = dq->outputs[0]->name + "/reader" + std::to_string(k);
      y->consumers.clear();
      c->outputs[0] = y.get();
      m.values.push_back(std::move(y));
      copies.push_back({c.get(), dq->outputs[0], reader});
      order.push_back(std::move(c));
    }
  }
  // Node indices are positions: renumber, and the producers and readers of the values with them.
  for (size_t i = 0; i < order.size(); ++i) order[i]->index = i;
  for (size_t id = 0; id < first_new_value; ++id) {
    nxrt_value& v = *m.values[id];
    if (v.body) continue;  // body-local indices
    if (v.producer >= 0) v.producer = new_index[size_t(v.producer)];
    for (int& c : v.consumers) c = new_index[size_t(c)];
  }
  m.nodes = std::move(order);
  for (const Copy& c : copies) {
    const int reader = new_index[size_t(c.reader)], copy = int(c.node->index);
    nxrt_value* y = c.node->outputs[0];
    y->producer = copy;
    for (nxrt_value* in : c.node->inputs)
      if (in) in->consumers.push_back(copy);
    auto& uses = c.original->consumers;
    uses.erase(std::remove(uses.begin(), uses.end(), reader), uses.end());
    for (nxrt_value*& in : m.nodes[size_t(reader)]->inputs)
      if (in == c.original) {
        in = y;
        y->consumers.push_back(reader);
      }
  }
  return added;
}

}  // namespace nxrt::passes
