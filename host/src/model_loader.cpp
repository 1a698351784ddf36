// ONNX file → checked, shape-inferred IR. Parsing, checking and shape
// inference are libonnx's; this file only maps the result into the IR.
#include "digest.hpp"
#include "error.hpp"
#include "ir.hpp"
#include "mapped_file.hpp"
#include "model_loader.hpp"
#include "onnx_guards.hpp"

#include <fmt/format.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <algorithm>
#include <climits>
#include <filesystem>
#include <map>
#include <set>
#include <span>
#include <unordered_map>

namespace nxrt {
namespace {

namespace fs = std::filesystem;

// libonnx messages span lines; errors here are one line each.
std::string one_line(std::string s) {
  for (auto& c : s) if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// Sequences and optionals are host values: no dtype, so no EP takes them for tensors.
void read_kind(const onnx::TypeProto& type, nxrt_value& v) {
  if (type.has_sequence_type()) v.kind = nxrt::ValueKind::Sequence;
  else if (type.has_optional_type()) v.kind = nxrt::ValueKind::Optional;
}

void read_type(const onnx::TypeProto& type, nxrt_value& v) {
  read_kind(type, v);
  if (!type.has_tensor_type()) return;  // sequences, maps, optionals: dtype stays undefined
  const auto& tt = type.tensor_type();
  v.dtype = static_cast<nxrt_dtype>(tt.elem_type());
  if (!tt.has_shape()) return;
  v.rank = tt.shape().dim_size();
  v.dims.clear();
  for (const auto& d : tt.shape().dim()) v.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
}

// Types for values of an enclosing graph: a body's outer-scope references copy them.
struct Scope {
  const std::unordered_map<std::string, nxrt_value*>* names = nullptr;
  const Scope* parent = nullptr;

  const nxrt_value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->names->find(name);
      if (it != s->names->end()) return it->second;
    }
    return nullptr;
  }
};

// Like read_type, but keeps what is already known when the proto says less.
void merge_type(const onnx::TypeProto& type, nxrt_value& v) {
  read_kind(type, v);
  if (!type.has_tensor_type()) return;
  const auto& tt = type.tensor_type();
  if (tt.elem_type() != 0) v.dtype = static_cast<nxrt_dtype>(tt.elem_type());
  if (!tt.has_shape()) return;
  v.rank = tt.shape().dim_size();
  v.dims.clear();
  for (const auto& d : tt.shape().dim()) v.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
}

std::shared_ptr<GraphBody> build_body(const onnx::GraphProto& g, const fs::path& base_dir, const Scope& outer,
                                      const nxrt_model_ir* model);

nxrt_attribute convert_attribute(const onnx::AttributeProto& a, const fs::path& base_dir, const Scope& scope,
                                 const nxrt_model_ir* model) {
  nxrt_attribute out;
  out.name = a.name();
  out.type = static_cast<nxrt_attribute_type>(a.type());
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT: out.f = a.f(); break;
    case onnx::AttributeProto::INT: out.i = a.i(); break;
    case onnx::AttributeProto::STRING: out.s = a.s(); break;
    case onnx::AttributeProto::FLOATS: out.floats.assign(a.floats().begin(), a.floats().end()); break;
    case onnx::AttributeProto::INTS: out.ints.assign(a.ints().begin(), a.ints().end()); break;
    case onnx::AttributeProto::STRINGS: out.strings.assign(a.strings().begin(), a.strings().end()); break;
    case onnx::AttributeProto::TENSOR: {
      try {
        out.tensor = std::make_shared<HostTensor>(decode_tensor(a.t(), base_dir));
      } catch (const HostError&) {
        out.tensor = nullptr;  // e.g. string tensors: kept as an attribute without data; plugins refuse
        out.proto = std::make_shared<onnx::AttributeProto>(a);
      }
      break;
    }
    case onnx::AttributeProto::GRAPH:
      // A body the plugins can read (attribute_graph) and the host runs (control_flow.hpp);
      // a body it cannot map (say a string initializer) stays type-only.
      try {
        out.graph = build_body(a.g(), base_dir, scope, model);
      } catch (const HostError&) {
        out.graph = nullptr;
      }
      out.proto = std::make_shared<onnx::AttributeProto>(a);
      break;
    default:  // lists of graphs, sparse tensors: type only, plugins refuse them
      out.proto = std::make_shared<onnx::AttributeProto>(a);
      break;
  }
  return out;
}

std::shared_ptr<GraphBody> build_body(const onnx::GraphProto& g, const fs::path& base_dir, const Scope& outer,
                                      const nxrt_model_ir* model) {
  auto body = std::make_shared<GraphBody>();
  GraphBody* b = body.get();
  b->name = g.name();
  std::unordered_map<std::string, nxrt_value*> names;
  const Scope scope{&names, &outer};
  auto make = [&](const std::string& name) {
    auto v = std::make_unique<nxrt_value>();
    v->id = b->values.size();
    v->name = name;
    v->body = b;
    nxrt_value* raw = v.get();
    b->values.push_back(std::move(v));
    names[name] = raw;
    return raw;
  };
  auto local = [&](const std::string& name) -> nxrt_value* {
    auto it = names.find(name);
    return it == names.end() ? nullptr : it->second;
  };
  // A name no body value defines: a value of an enclosing graph.
  auto outer_ref = [&](const std::string& name) {
    nxrt_value* v = make(name);
    if (const nxrt_value* o = outer.find(name)) {
      v->dtype = o->dtype;
      v->kind = o->kind;
      v->rank = o->rank;
      v->dims = o->dims;
    }
    b->outer.push_back(v);
    return v;
  };
  for (const auto& init : g.initializer()) {
    nxrt_value* v = make(init.name());
    auto t = std::make_shared<HostTensor>(decode_tensor(init, base_dir));
    v->dtype = t->dtype;
    v->rank = int64_t(t->dims.size());
    v->dims = t->dims;
    v->constant = std::move(t);
  }
  for (const auto& in : g.input()) {
    nxrt_value* v = local(in.name());
    if (v && v->constant) continue;
    if (!v) v = make(in.name());
    read_type(in.type(), *v);
    v->is_graph_input = true;
    b->inputs.push_back(v);
  }
  std::unordered_map<std::string, const onnx::TypeProto*> types;
  for (const auto& vi : g.value_info()) types[vi.name()] = &vi.type();
  for (const auto& n : g.node()) {
    auto node = std::make_unique<nxrt_node>();
    node->index = b->nodes.size();
    node->body = b;
    node->op_type = n.op_type();
    node->domain = n.domain() == "ai.onnx" ? "" : n.domain();
    node->name = n.name().empty() ? fmt::format("{}_{}", n.op_type(), node->index) : n.name();
    for (const auto& a : n.attribute()) node->attributes.push_back(convert_attribute(a, base_dir, scope, model));
    for (const auto& in : n.input()) {
      nxrt_value* v = nullptr;
      if (!in.empty()) {
        v = local(in);
        if (!v) v = outer_ref(in);
        v->consumers.push_back(int(node->index));
      }
      node->inputs.push_back(v);
    }
    for (const auto& out : n.output()) {
      nxrt_value* v = nullptr;
      if (!out.empty()) {
        v = local(out);
        if (!v) v = make(out);
        v->producer = int(node->index);
        auto t = types.find(out);
        if (t != types.end()) merge_type(*t->second, *v);
      }
      node->outputs.push_back(v);
    }
    b->nodes.push_back(std::move(node));
  }
  for (const auto& out : g.output()) {
    nxrt_value* v = local(out.name());
    if (!v) v = outer_ref(out.name());
    merge_type(out.type(), *v);
    v->is_graph_output = true;
    b->outputs.push_back(v);
  }
  b->view.model = model;
  b->view.body = b;
  for (auto& n : b->nodes) b->view.nodes.push_back(n.get());
  b->view.inputs.assign(b->inputs.begin(), b->inputs.end());
  b->view.outputs.assign(b->outputs.begin(), b->outputs.end());
  return body;
}

// A constant whose bytes a compiled-model container keeps in its weights entry
// (model_writer.cpp's artifact_graph): bounds-checked against that entry.
constexpr const char* kWeightsLocation = "nxrt:weights";
bool in_weights(const onnx::TensorProto& t) {
  if (t.data_location() != onnx::TensorProto::EXTERNAL) return false;
  for (const auto& e : t.external_data())
    if (e.key() == "location") return e.value() == kWeightsLocation;
  return false;
}
HostTensor from_weights(const onnx::TensorProto& t, std::span<const uint8_t> weights, const std::shared_ptr<const void>& keep,
                        const std::string& path) {
  HostTensor h;
  h.name = t.name();
  h.dtype = nxrt_dtype(t.data_type());
  for (int64_t d : t.dims()) {
    if (d < 0) raise(NXRT_ERR_MODEL, "'{}': constant '{}' has a negative dimension", path, t.name());
    h.dims.push_back(d);
  }
  uint64_t offset = 0, length = 0;
  for (const auto& e : t.external_data()) {
    if (e.key() == "offset") offset = std::strtoull(e.value().c_str(), nullptr, 10);
    if (e.key() == "length") length = std::strtoull(e.value().c_str(), nullptr, 10);
  }
  const size_t es = dtype_size(h.dtype);
  if (!es || h.dtype == NXRT_DTYPE_STRING || length != bytes_of(h.dtype, h.dims) || offset > weights.size() ||
      length > weights.size() - offset)
    raise(NXRT_ERR_MODEL, "'{}': constant '{}' does not fit the weights section", path, t.name());
  // A view of the mapped file when it stays mapped (no copy at load), else a copy.
  if (keep && (reinterpret_cast<uintptr_t>(weights.data() + offset) % 64) == 0)
    h.data = Bytes::view(weights.data() + offset, length, keep);
  else
    h.data.assign(weights.data() + offset, weights.data() + offset + length);
  return h;
}

std::unique_ptr<nxrt_model_ir> build_ir(onnx::ModelProto& m, const fs::path& base_dir, const std::string& path,
                                        std::span<const uint8_t> weights = {}, const std::shared_ptr<const void>& keep = {}) {
  auto ir = std::make_unique<nxrt_model_ir>();
  ir->path = path;
  ir->ir_version = m.ir_version();
  for (const auto& op : m.opset_import()) {
    std::string d = op.domain() == "ai.onnx" ? "" : op.domain();
    ir->opsets[d] = op.version();
  }
  std::unordered_map<std::string, nxrt_value*> by_name;
  const Scope main_scope{&by_name, nullptr};
  auto value = [&](const std::string& name) -> nxrt_value* {
    auto it = by_name.find(name);
    if (it != by_name.end()) return it->second;
    auto v = std::make_unique<nxrt_value>();
    v->id = ir->values.size();
    v->name = name;
    nxrt_value* raw = v.get();
    ir->values.push_back(std::move(v));
    by_name[name] = raw;
    return raw;
  };
  auto& g = *m.mutable_graph();
  for (auto& init : *g.mutable_initializer()) {
    nxrt_value* v = value(init.name());
    auto t = std::make_shared<HostTensor>(in_weights(init) ? from_weights(init, weights, keep, path) : decode_tensor(init, base_dir));
    // Decoded: give the proto's buffers back (clear() would keep their capacity),
    // so the weights are not held twice while loading.
    std::string().swap(*init.mutable_raw_data());
    google::protobuf::RepeatedField<float>().Swap(init.mutable_float_data());
    v->dtype = t->dtype;
    v->rank = int64_t(t->dims.size());
    v->dims = t->dims;
    v->constant = std::move(t);
  }
  for (const auto& in : g.input()) {
    nxrt_value* v = value(in.name());
    if (v->constant) continue;  // an initializer listed as input: a constant here
    read_type(in.type(), *v);
    v->is_graph_input = true;
    ir->inputs.push_back(v);
  }
  for (const auto& vi : g.value_info()) read_type(vi.type(), *value(vi.name()));
  for (const auto& n : g.node()) {
    auto node = std::make_unique<nxrt_node>();
    node->index = ir->nodes.size();
    node->op_type = n.op_type();
    node->domain = n.domain() == "ai.onnx" ? "" : n.domain();
    node->name = n.name().empty() ? fmt::format("{}_{}", n.op_type(), node->index) : n.name();
    for (const auto& a : n.attribute()) node->attributes.push_back(convert_attribute(a, base_dir, main_scope, ir.get()));
    for (const auto& in : n.input()) {
      nxrt_value* v = in.empty() ? nullptr : value(in);
      if (v) v->consumers.push_back(int(node->index));
      node->inputs.push_back(v);
    }
    for (const auto& out : n.output()) {
      nxrt_value* v = out.empty() ? nullptr : value(out);
      if (v) v->producer = int(node->index);
      node->outputs.push_back(v);
    }
    ir->nodes.push_back(std::move(node));
  }
  for (const auto& out : g.output()) {
    nxrt_value* v = value(out.name());
    read_type(out.type(), *v);
    v->is_graph_output = true;
    ir->outputs.push_back(v);
  }
  return ir;
}

// A model importing an opset newer than the bundled ONNX schemas describe cannot be
// checked or shape-inferred truthfully: refused, naming the domain and both versions.
// Domains the schemas do not know (vendors' own) are left to the plugins.
void check_opsets(const onnx::ModelProto& m, const std::string& path) {
  const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  for (const auto& op : m.opset_import()) {
    const std::string domain = op.domain() == "ai.onnx" ? "" : op.domain();
    auto it = known.find(domain);
    if (it == known.end()) continue;
    if (op.version() > it->second.second)
      raise(NXRT_ERR_MODEL, "model '{}' imports opset {} of domain '{}', newer than this build's ONNX schemas know (up to {})",
            path, op.version(), domain.empty() ? "ai.onnx" : domain, it->second.second);
  }
}

// Declared and inferred shapes: every dimension >= 0 (or unknown) and the element count
// and byte size of each static shape representable, so no later size arithmetic (host
// plan, kernels) can overflow on them. Covers Reshape/Expand/Tile/ConstantOfShape/Resize
// targets too: shape inference writes their results into the values checked here.
void check_shapes(const nxrt_model_ir& ir) {
  for (const auto& v : ir.values) {
    if (v->rank < 0) continue;
    uint64_t count = 1;
    bool overflow = false;
    for (int64_t d : v->dims) {
      if (d < -1) raise(NXRT_ERR_MODEL, "model '{}': value '{}' has a negative dimension {} in {}", ir.path, v->name, d, shape_str(v->dims));
      if (d < 0) continue;
      if (d != 0 && count > uint64_t(INT64_MAX) / uint64_t(d)) overflow = true;
      else count *= uint64_t(d);
    }
    const uint64_t elem = std::max<size_t>(dtype_size(v->dtype), 1);
    if (overflow || count > uint64_t(kMaxElements) || count > uint64_t(INT64_MAX) / elem)
      raise(NXRT_ERR_MODEL, "model '{}': value '{}' has shape {} whose size overflows 64-bit arithmetic", ir.path, v->name,
            shape_str(v->dims));
  }
}

// The int64 entries of a constant integer tensor (a shape, sizes, repeats); false otherwise.
bool int_values(const nxrt_value* v, std::vector<int64_t>* out) {
  if (!v || !v->constant) return false;
  const HostTensor& t = *v->constant;
  out->clear();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype == NXRT_DTYPE_INT64) out->push_back(reinterpret_cast<const int64_t*>(t.data.data())[i]);
    else if (t.dtype == NXRT_DTYPE_INT32) out->push_back(reinterpret_cast<const int32_t*>(t.data.data())[i]);
    else return false;
  }
  return true;
}

// The shape targets of Reshape, Expand, Tile, ConstantOfShape and Resize, when constant:
// the element count they ask for must be representable (shape inference multiplies them
// without checking). Unknown dims count as 1, so what is refused overflows for any input.
void check_shape_targets(const nxrt_model_ir& ir) {
  for (const auto& n : ir.nodes) {
    if (!n->domain.empty() || n->inputs.size() < 2) continue;
    const std::string& op = n->op_type;
    std::vector<int64_t> target, dims;
    double count = 1;  // in double: only its size matters, and it cannot wrap
    const nxrt_value* x = n->inputs[0];
    auto known = [&](size_t i) -> double { return x && x->rank > int64_t(i) && x->dims[i] > 0 ? double(x->dims[i]) : 1.0; };
    if ((op == "Reshape" || op == "Expand") && int_values(n->inputs[1], &target)) {
      for (int64_t d : target) count *= d > 0 ? double(d) : 1.0;
    } else if (op == "ConstantOfShape" && int_values(n->inputs[0], &target)) {
      for (int64_t d : target) {
        if (d < 0) raise(NXRT_ERR_MODEL, "model '{}': node '{}' (ConstantOfShape) asks for a negative dimension {}", ir.path, n->name, d);
        count *= double(d);
      }
    } else if (op == "Tile" && int_values(n->inputs[1], &target)) {
      for (size_t i = 0; i < target.size(); ++i) {
        if (target[i] < 0) raise(NXRT_ERR_MODEL, "model '{}': node '{}' (Tile) has a negative repeat {}", ir.path, n->name, target[i]);
        count *= known(i) * double(target[i]);
      }
    } else if (op == "Resize" && n->inputs.size() > 3 && int_values(n->inputs[3], &target)) {
      for (int64_t d : target) count *= d > 0 ? double(d) : 1.0;
    } else if (op == "Resize" && n->inputs.size() > 2 && n->inputs[2] && n->inputs[2]->constant &&
               n->inputs[2]->constant->dtype == NXRT_DTYPE_FLOAT32) {
      const HostTensor& s = *n->inputs[2]->constant;
      for (int64_t i = 0; i < s.numel(); ++i) {
        const double f = reinterpret_cast<const float*>(s.data.data())[i];
        if (!std::isfinite(f) || f < 0)
          raise(NXRT_ERR_MODEL, "model '{}': node '{}' (Resize) has scale {} (must be finite and >= 0)", ir.path, n->name, f);
        count *= std::max(1.0, std::floor(known(size_t(i)) * f));
      }
    } else {
      continue;
    }
    const nxrt_value* y = n->outputs.empty() ? nullptr : n->outputs[0];
    const double elem = double(std::max<size_t>(y ? dtype_size(y->dtype) : 1, 1));
    if (count * elem >= 9.2e18)
      raise(NXRT_ERR_MODEL, "model '{}': node '{}' ({}) asks for a shape of about {:.3g} elements, which overflows 64-bit sizes",
            ir.path, n->name, op, count);
  }
}

// protobuf refuses messages nested deeper than its recursion limit (100) with the same
// "parse failed" as corrupt bytes. Subgraphs cost 3 levels each (node, attribute, graph),
// so the limit allows about 30 nested If/Loop/Scan. On a failed parse the bytes are parsed
// again with a higher limit (still a bounded stack): when that works and the model's
// subgraphs really nest that deep, the error says so. 0 otherwise (corrupt bytes: unknown
// groups nest too).
constexpr int kDeepParseLimit = 1000;  // about 330 subgraph levels

int subgraph_depth(const onnx::GraphProto& g) {
  int deepest = 0;
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_g()) deepest = std::max(deepest, 1 + subgraph_depth(a.g()));
      for (const auto& sub : a.graphs()) deepest = std::max(deepest, 1 + subgraph_depth(sub));
    }
  return deepest;
}

template <typename Parse>
int too_deep_subgraphs(Parse&& parse_with_limit) {
  onnx::ModelProto deep;
  if (!parse_with_limit(deep, kDeepParseLimit) || !deep.has_graph()) return 0;
  const int depth = subgraph_depth(deep.graph());
  return depth >= 25 ? depth : 0;  // 3 levels per subgraph + the model's own
}

std::string too_deep_message(int depth) {
  return fmt::format("nests subgraphs {} deep (If inside If inside ...), past protobuf's limit of 100 message levels "
                     "(about 30 subgraphs); nxrt refuses such models", depth);
}

// ONNX's convolution and pooling shape inference trusts what it reads, and crashes (found by
// fuzz_graph_view) on two lies: a Conv-family node whose input and weight ranks differ (it
// indexes the weight's dims by the input's rank: out of bounds), and a stride of 0 (it divides
// by it). Both refused first: the ranks where both are declared, strides and dilations that
// are not positive on every Conv or pooling node.
void check_conv_ranks(const onnx::GraphProto& g, std::map<std::string, int> ranks, const std::string& path) {
  auto note = [&](const onnx::ValueInfoProto& v) {
    if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
      ranks[v.name()] = v.type().tensor_type().shape().dim_size();
  };
  for (const auto& v : g.input()) note(v);
  for (const auto& v : g.value_info()) note(v);
  for (const auto& t : g.initializer()) ranks[t.name()] = t.dims_size();
  for (const auto& n : g.node()) {
    int x = -1, w = -1;  // input positions of the data and the weight
    if (n.domain().empty() || n.domain() == "ai.onnx") {
      if (n.op_type() == "Conv" || n.op_type() == "ConvInteger" || n.op_type() == "ConvTranspose") x = 0, w = 1;
      else if (n.op_type() == "QLinearConv") x = 0, w = 3;
    }
    static const std::set<std::string> windowed = {"Conv",        "ConvInteger", "ConvTranspose", "QLinearConv",
                                                   "AveragePool", "MaxPool",     "LpPool",        "MaxUnpool"};
    if ((n.domain().empty() || n.domain() == "ai.onnx") && windowed.count(n.op_type()))
      for (const auto& a : n.attribute())
        if (a.name() == "strides" || a.name() == "dilations")
          for (int64_t v : a.ints())
            if (v <= 0)
              raise(NXRT_ERR_MODEL, "model '{}': node '{}' ({}): {} holds {} (each must be positive)", path, n.name(),
                    n.op_type(), a.name(), v);
    if (x >= 0 && n.input_size() > w) {
      auto xr = ranks.find(n.input(x)), wr = ranks.find(n.input(w));
      if (xr != ranks.end() && wr != ranks.end() && xr->second != wr->second)
        raise(NXRT_ERR_MODEL, "model '{}': node '{}' ({}): input '{}' has rank {} but weight '{}' has rank {} (they must be equal)",
              path, n.name(), n.op_type(), n.input(x), xr->second, n.input(w), wr->second);
    }
    for (const auto& a : n.attribute()) {
      if (a.has_g()) check_conv_ranks(a.g(), ranks, path);
      for (const auto& sub : a.graphs()) check_conv_ranks(sub, ranks, path);
    }
  }
}

// libonnx's shape inference reads constant tensors (initializers, Constant values, at every
// level of subgraphs) with onnx::ParseData, which trusts raw_data's size: one byte of raw_data
// for an int64 scalar was a heap overflow (found by fuzz_model_session,
// host/fuzz/regressions/fuzz_model_session/loop_body_parsedata.onnx). Every inline tensor's size
// is checked against its type and shape first.
void check_tensor_sizes(const onnx::GraphProto& g, const std::string& path) {
  auto check = [&](const onnx::TensorProto& t, const std::string& where) {
    try {
      check_tensor_data_size(t);
    } catch (const HostError& e) {
      raise(e.code(), "model '{}': {}{}", path, where, e.what());
    }
  };
  for (const auto& t : g.initializer()) check(t, "");
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      const auto where = fmt::format("node '{}' ({}) attribute '{}': ", n.name(), n.op_type(), a.name());
      if (a.has_t()) check(a.t(), where);
      for (const auto& t : a.tensors()) check(t, where);
      if (a.has_g()) check_tensor_sizes(a.g(), path);
      for (const auto& sub : a.graphs()) check_tensor_sizes(sub, path);
    }
}

bool uses_external_data(const onnx::ModelProto& m) {
  for (const auto& t : m.graph().initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL) return true;
  return false;
}

std::unique_ptr<nxrt_model_ir> load(onnx::ModelProto& m, const fs::path& base_dir, const std::string& path) {
  if (m.graph().node_size() == 0 && m.graph().output_size() == 0)
    raise(NXRT_ERR_MODEL, "model '{}' has an empty graph", path);
  check_opsets(m, path);
  check_tensor_sizes(m.graph(), path);
  // Where external data lies is checked here, before the ONNX checker: its own check
  // neither refuses hard links nor names an absolute or escaping path as the problem.
  if (uses_external_data(m))
    for (const auto& t : m.graph().initializer())
      if (t.data_location() == onnx::TensorProto::EXTERNAL) locate_external(t, base_dir);
  try {
    if (!path.empty() && uses_external_data(m)) onnx::checker::check_model(path);
    else onnx::checker::check_model(m);
  } catch (const std::exception& e) {
    raise(NXRT_ERR_MODEL, "model '{}' failed the ONNX checker: {}", path, one_line(e.what()));
  }
  check_conv_ranks(m.graph(), {}, path);
  install_onnx_inference_guards();
  try {
    onnx::ShapeInferenceOptions options(/*check_type=*/true, /*error_mode=*/0, /*data_prop=*/false);
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    raise(NXRT_ERR_MODEL, "model '{}' failed shape inference: {}", path, one_line(e.what()));
  }
  auto ir = build_ir(m, base_dir, path);
  check_shapes(*ir);
  check_shape_targets(*ir);
  // Representation, not optimization: at every level Constant nodes become constant
  // values (no EP needs a Constant kernel). The levels' passes run per session.
  passes::fold_constant_nodes(*ir);
  return ir;
}

}  // namespace


std::unique_ptr<nxrt_model_ir> load_model_artifact(std::span<const uint8_t> graph, std::span<const uint8_t> weights,
                                                   const std::string& path, std::shared_ptr<const void> keep) {
  onnx::ModelProto m;
  if (graph.size() > size_t(INT32_MAX) || !m.ParseFromArray(graph.data(), int(graph.size())) || !m.has_graph())
    raise(NXRT_ERR_MODEL, "'{}': the compiled model's graph is not a valid ONNX protobuf", path);
  // Checked and shape-inferred when it was compiled (its checksum matched): types come
  // from its value_info, constants from the weights entry.
  check_opsets(m, path);
  auto ir = build_ir(m, fs::path(path).parent_path(), path, weights, keep);
  check_shapes(*ir);
  check_shape_targets(*ir);
  passes::fold_constant_nodes(*ir);
  return ir;
}

std::unique_ptr<nxrt_model_ir> load_model_bytes(const void* data, size_t size, const std::string& base_dir) {
  onnx::ModelProto m;
  if (size > size_t(INT32_MAX) || !m.ParseFromArray(data, int(size))) {
    const int depth = size > size_t(INT32_MAX) ? 0 : too_deep_subgraphs([&](onnx::ModelProto& deep, int limit) {
      google::protobuf::io::CodedInputStream in(static_cast<const uint8_t*>(data), int(size));
      in.SetRecursionLimit(limit);
      return deep.ParseFromCodedStream(&in);
    });
    if (depth) raise(NXRT_ERR_MODEL, "model bytes {}", too_deep_message(depth));
    raise(NXRT_ERR_MODEL, "model bytes are not a valid ONNX protobuf (corrupt or truncated, {} bytes)", size);
  }
  auto ir = load(m, base_dir, base_dir.empty() ? "<memory>" : base_dir + "/<memory>");
  ir->digest = xxh64(data, size);
  return ir;
}

std::unique_ptr<nxrt_model_ir> load_model_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) raise(NXRT_ERR_NOT_FOUND, "model file '{}' does not exist", path);
  if (fs::is_directory(path, ec)) raise(NXRT_ERR_INVALID_ARGUMENT, "model path '{}' is a folder, not a file", path);
  return load_model_file(MappedFile::open(path), 0);
}

namespace {

// The mapped model front to back in 1 MiB pieces, giving the pages behind the
// parser back as it goes (the proto now holds those bytes): parsing holds a
// model's weights once, not twice (mapping + proto).
class ReleasingInput final : public google::protobuf::io::ZeroCopyInputStream {
 public:
  explicit ReleasingInput(const MappedFile& f) : f_(f) {}
  bool Next(const void** data, int* size) override {
    // The previous piece is no longer the parser's once it asks for the next one.
    if (pos_ > released_) {
      f_.release(released_, pos_);
      released_ = pos_ / page_ * page_;  // release() drops whole pages only
    }
    if (pos_ >= f_.size()) return false;
    const size_t n = std::min(kPiece, f_.size() - pos_);
    *data = f_.data() + pos_;
    *size = int(n);
    pos_ += n;
    return true;
  }
  void BackUp(int count) override { pos_ -= size_t(count); }
  bool Skip(int count) override {
    const size_t left = f_.size() - pos_;
    pos_ += std::min(size_t(count), left);
    return size_t(count) <= left;
  }
  int64_t ByteCount() const override { return int64_t(pos_); }

 private:
  static constexpr size_t kPiece = size_t(1) << 20;
  const MappedFile& f_;
  const size_t page_ = size_t(::sysconf(_SC_PAGESIZE));
  size_t pos_ = 0, released_ = 0;
};

}  // namespace

std::unique_ptr<nxrt_model_ir> load_model_file(std::shared_ptr<const MappedFile> file, uint64_t digest) {
  // Parsed straight from a read-only mapping: no copy of the bytes is held next to the
  // proto, and the digest that keys the compiled-model cache costs one pass over them.
  const std::string& path = file->path();
  const size_t size = file->size();
  if (!digest) digest = xxh64(file->data(), size);
  onnx::ModelProto m;
  bool parsed = false;
  if (size > 0 && size <= size_t(INT32_MAX)) {
    ReleasingInput in(*file);
    parsed = m.ParseFromZeroCopyStream(&in);
    file->release(0, size);
  }
  if (!parsed && size > 0 && size <= size_t(INT32_MAX)) {
    const int depth = too_deep_subgraphs([&](onnx::ModelProto& deep, int limit) {
      google::protobuf::io::CodedInputStream in(file->data(), int(size));
      in.SetRecursionLimit(limit);
      return deep.ParseFromCodedStream(&in);
    });
    if (depth) raise(NXRT_ERR_MODEL, "'{}' {}", path, too_deep_message(depth));
  }
  if (!parsed)
    raise(NXRT_ERR_MODEL, "'{}' is not a valid ONNX model (corrupt or truncated protobuf, {} bytes)", path, size);
  if (!m.has_graph()) raise(NXRT_ERR_MODEL, "'{}' is not a valid ONNX model: it has no graph", path);
  auto ir = load(m, fs::path(path).parent_path(), path);
  ir->digest = digest;
  return ir;
}

}  // namespace nxrt

nxrt_value* nxrt_model_ir::find_value(const std::string& name) const {
  for (auto& v : values) if (v->name == name) return v.get();
  return nullptr;
}

std::vector<const nxrt_node*> nxrt_model_ir::live_nodes() const {
  std::vector<const nxrt_node*> out;
  for (auto& n : nodes) if (!n->removed) out.push_back(n.get());
  return out;
}
