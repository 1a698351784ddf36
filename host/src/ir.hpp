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

struct nxrt_value {
  size_t id = 0;
  std::string name;
  nxrt_dtype dtype = NXRT_DTYPE_UNDEFINED;
  int64_t rank = -1;            // -1: unknown
  std::vector<int64_t> dims;    // -1 for a dimension not known before run time
  std::shared_ptr<const nxrt::HostTensor> constant;  // initializer or folded Constant
  int producer = -1;            // node id, -1 for graph inputs and constants
  std::vector<int> consumers;   // node ids (a node appears once per use)
  bool is_graph_input = false;
  bool is_graph_output = false;

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
};

struct nxrt_node {
  size_t index = 0;  // model-wide, stable; what claims refer to
  std::string name;
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  std::vector<nxrt_value*> inputs;   // nullptr: absent optional input
  std::vector<nxrt_value*> outputs;  // nullptr: absent optional output
  std::vector<nxrt_attribute> attributes;
  bool removed = false;  // dropped by an optimization pass
};

// A view: the whole model, the unassigned part, or one claim's subgraph.
struct nxrt_graph {
  const struct nxrt_model_ir* model = nullptr;
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

  nxrt_value* find_value(const std::string& name) const;
  // Live nodes, in topological order.
  std::vector<const nxrt_node*> live_nodes() const;
};

namespace nxrt {

// Parses, checks and shape-infers a model, then builds the IR. Throws HostError.
std::unique_ptr<nxrt_model_ir> load_model_file(const std::string& path);
std::unique_ptr<nxrt_model_ir> load_model_bytes(const void* data, size_t size, const std::string& base_dir);

// Host graph optimizations on the IR (folding Constant nodes, dropping no-ops).
void optimize(nxrt_model_ir& model);

}  // namespace nxrt
