// The host's graph IR. Its node/value/attribute types are the definitions of
// the ABI's opaque nxrt_node / nxrt_value / nxrt_attribute, so the graph view a
// plugin reads is the IR itself, with no copy.
#pragma once
#include "host_tensor.hpp"

#include <nxrt_ep.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace onnx { class AttributeProto; class ModelProto; }
namespace nxrt {
struct GraphBody;
class Artifact;
// What a value holds: a tensor (what EPs see), or a sequence / optional the host holds.
enum class ValueKind : uint8_t { Tensor, Sequence, Optional };
}  // namespace nxrt

struct nxrt_value {
  size_t id = 0;
  std::string name;
  nxrt_dtype dtype = NXRT_DTYPE_UNDEFINED;  // tensors only (undefined for sequences and optionals)
  nxrt::ValueKind kind = nxrt::ValueKind::Tensor;
  int64_t rank = -1;            // -1: unknown
  std::vector<int64_t> dims;    // -1 for a dimension not known before run time
  std::shared_ptr<const nxrt::HostTensor> constant;  // initializer or folded Constant
  int producer = -1;            // node id, -1 for graph inputs and constants
  std::vector<int> consumers;   // node ids (a node appears once per use)
  bool is_graph_input = false;
  bool is_graph_output = false;  // for a body value: one of the body's formal outputs
  // The control-flow body the value belongs to; nullptr for the main graph. In a body,
  // producer and consumers are body-local node indices.
  const nxrt::GraphBody* body = nullptr;

  bool static_shape() const {
    if (rank < 0) return false;
    for (auto d : dims) if (d < 0) return false;
    return true;
  }
};

struct nxrt_attribute {
  std::string name;
  nxrt_attribute_type type = NXRT_ATTR_UNDEFINED;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  std::shared_ptr<const nxrt::HostTensor> tensor;
  std::shared_ptr<const nxrt::GraphBody> graph;  // GRAPH attributes: the body (If branch, Loop/Scan body)
  // The attribute as read, kept where the fields above cannot say it all (graphs, sparse or
  // undecodable tensors), so an optimized model can be written back (model_writer.cpp).
  std::shared_ptr<const onnx::AttributeProto> proto;
};

struct nxrt_node {
  size_t index = 0;  // model-wide (body-local in a body), stable; what claims refer to
  std::string name;
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  std::vector<nxrt_value*> inputs;   // nullptr: absent optional input
  std::vector<nxrt_value*> outputs;  // nullptr: absent optional output
  std::vector<nxrt_attribute> attributes;
  // The optimizer's notes on the node ("nxrt.fusion", optimizer.hpp): found by
  // node_attribute(name) only, never listed with the attributes, so a plugin that checks
  // every attribute it is shown still sees just the model's.
  std::vector<nxrt_attribute> annotations;
  bool removed = false;  // dropped by an optimization pass
  const nxrt::GraphBody* body = nullptr;  // the body it belongs to; nullptr for the main graph
};

// A view: the whole model, the unassigned part, one claim's subgraph, or a
// control-flow body. `nodes` is sorted by node index (membership is a binary search).
struct nxrt_graph {
  const struct nxrt_model_ir* model = nullptr;  // opsets; for a body, the model it is in
  const nxrt::GraphBody* body = nullptr;        // the body this is a view of; nullptr: the main graph
  std::vector<const nxrt_node*> nodes;
  std::vector<const nxrt_value*> inputs;
  std::vector<const nxrt_value*> outputs;
  // Set only while kernel_create runs on this view: constants the kernel captured.
  std::vector<const nxrt_value*>* captured = nullptr;
};

struct nxrt_model_ir {
  std::vector<std::unique_ptr<nxrt_value>> values;
  std::vector<std::unique_ptr<nxrt_node>> nodes;  // topological order
  std::vector<nxrt_value*> inputs;   // non-initializer graph inputs
  std::vector<nxrt_value*> outputs;
  std::map<std::string, int64_t> opsets;  // "" = default domain
  std::string path;
  int64_t ir_version = 0;  // the file's, kept for writing the model back
  // xxh64 of the ONNX bytes it was loaded from (a compiled model: of its source model),
  // changed by each optimization applied to the model itself; 0: unknown. Keys the
  // compiled-model cache (compiled_model.hpp).
  uint64_t digest = 0;
  // The compiled-model container the model was loaded from (or found in a cache folder),
  // whose kernels sessions may import; NULL for a plain ONNX load.
  std::shared_ptr<const nxrt::Artifact> compiled;
  // The optimizer settings this graph already went through (compiled_model.hpp's
  // optimizer_key); a session with the same settings skips the optimizer. Empty: not optimized.
  std::string optimized;
  // The optimizer's account: one line per pass (what it changed, or why it was skipped).
  std::vector<std::string> optimizer_log;
  // A copy made for one session's optimization (optimizer.cpp) keeps the model it was
  // copied from alive: control-flow bodies are shared and name that model as theirs.
  std::shared_ptr<const nxrt_model_ir> origin;

  nxrt_value* find_value(const std::string& name) const;
  // Live nodes, in topological order.
  std::vector<const nxrt_node*> live_nodes() const;
};

namespace nxrt {

// A control-flow body (GRAPH attribute), built at load: its own values and nodes
// (indices local to the body), formal inputs and outputs. A body node reading a value
// of an enclosing graph reads a value of the body that has no producer, is not a body
// input, and carries the outer value's name and, where known, its type.
struct GraphBody {
  std::string name;
  std::vector<std::unique_ptr<nxrt_value>> values;
  std::vector<std::unique_ptr<nxrt_node>> nodes;  // topological order, index = position
  std::vector<nxrt_value*> inputs, outputs;
  std::vector<nxrt_value*> outer;  // outer-scope references
  nxrt_graph view;                 // what attribute_graph hands out: every node, inputs, outputs
};

// The attribute `name` of `n` (its own attributes, not the optimizer's annotations), or NULL.
inline const nxrt_attribute* find_attribute(const nxrt_node& n, const char* name) {
  for (auto& a : n.attributes)
    if (a.name == name) return &a;
  return nullptr;
}
// An INT attribute, or `dflt` when the node does not set it.
inline int64_t attribute_int(const nxrt_node& n, const char* name, int64_t dflt) {
  const nxrt_attribute* a = find_attribute(n, name);
  return a ? a->i : dflt;
}

}  // namespace nxrt

// The stages that make and rewrite the IR (kept here too, so including ir.hpp is enough).
#include "model_loader.hpp"
#include "optimizer.hpp"
