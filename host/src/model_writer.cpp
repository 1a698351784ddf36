// IR -> ONNX protobuf. Attributes the IR keeps as fields are written from them; graphs,
// sparse and undecodable tensors from the proto the loader kept (nxrt_attribute::proto).
#include "model_writer.hpp"

#include "error.hpp"
#include "version.hpp"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <set>

namespace nxrt {
namespace {

void write_type(const nxrt_value& v, onnx::ValueInfoProto& out) {
  out.set_name(v.name);
  if (v.dtype == NXRT_DTYPE_UNDEFINED) return;
  auto* tt = out.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(int(v.dtype));
  if (v.rank < 0) return;
  auto* shape = tt->mutable_shape();
  for (int64_t d : v.dims) {
    auto* dim = shape->add_dim();
    if (d >= 0) dim->set_dim_value(d);
  }
}

void write_attribute(const nxrt_attribute& a, onnx::AttributeProto& out) {
  if (a.proto) {
    out = *a.proto;
    return;
  }
  out.set_name(a.name);
  out.set_type(onnx::AttributeProto::AttributeType(a.type));
  switch (a.type) {
    case NXRT_ATTR_FLOAT: out.set_f(a.f); break;
    case NXRT_ATTR_INT: out.set_i(a.i); break;
    case NXRT_ATTR_STRING: out.set_s(a.s); break;
    case NXRT_ATTR_FLOATS: for (float f : a.floats) out.add_floats(f); break;
    case NXRT_ATTR_INTS: for (int64_t i : a.ints) out.add_ints(i); break;
    case NXRT_ATTR_STRINGS: for (auto& s : a.strings) out.add_strings(s); break;
    case NXRT_ATTR_TENSOR:
      if (a.tensor) encode_tensor(*a.tensor, *out.mutable_t());
      break;
    default: raise(NXRT_ERR_UNSUPPORTED, "attribute '{}' (type {}) cannot be written back", a.name, int(a.type));
  }
}

}  // namespace

namespace {

// A weights-section reference: a tensor constant's bytes moved out of the proto.
constexpr const char* kWeightsLocation = "nxrt:weights";

void write_value_type(const nxrt_value& v, onnx::ValueInfoProto& out) {
  if (v.kind == ValueKind::Sequence) {
    out.set_name(v.name);
    out.mutable_type()->mutable_sequence_type();
  } else if (v.kind == ValueKind::Optional) {
    out.set_name(v.name);
    out.mutable_type()->mutable_optional_type();
  } else {
    write_type(v, out);
  }
}

onnx::ModelProto to_proto(const nxrt_model_ir& m, std::vector<uint8_t>* weights) {
  onnx::ModelProto model;
  model.set_ir_version(m.ir_version ? m.ir_version : int64_t(onnx::IR_VERSION));
  model.set_producer_name("nxrt");
  model.set_producer_version(kHostVersion);
  for (auto& [domain, version] : m.opsets) {
    auto* op = model.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  auto& g = *model.mutable_graph();
  g.set_name("nxrt_optimized");
  const auto live = m.live_nodes();
  std::set<const nxrt_value*> written;
  auto initializer = [&](const nxrt_value* v) {
    if (!v || !v->constant || !written.insert(v).second) return;
    if (v->producer >= 0 && !m.nodes[size_t(v->producer)]->removed) return;  // a node makes it
    auto* t = g.add_initializer();
    const HostTensor& c = *v->constant;
    if (weights && c.dtype != NXRT_DTYPE_STRING && c.data.size() >= 64) {
      // NXRT_TENSOR_ALIGNMENT: a session may wrap the mapped weights as device memory in
      // place, and tensors inside an allocation start at multiples of it.
      const size_t offset = (weights->size() + NXRT_TENSOR_ALIGNMENT - 1) / NXRT_TENSOR_ALIGNMENT * NXRT_TENSOR_ALIGNMENT;
      weights->resize(offset + c.data.size());
      std::memcpy(weights->data() + offset, c.data.data(), c.data.size());
      t->set_data_type(int(c.dtype));
      for (int64_t d : c.dims) t->add_dims(d);
      t->set_data_location(onnx::TensorProto::EXTERNAL);
      auto kv = [&](const char* k, const std::string& val) {
        auto* e = t->add_external_data();
        e->set_key(k);
        e->set_value(val);
      };
      kv("location", kWeightsLocation);
      kv("offset", std::to_string(offset));
      kv("length", std::to_string(c.data.size()));
    } else {
      encode_tensor(c, *t);
    }
    t->set_name(v->name);
  };
  for (const nxrt_node* n : live)
    for (const nxrt_value* in : n->inputs) initializer(in);
  for (const nxrt_value* out : m.outputs) initializer(out);
  // Names control-flow bodies read from the main graph: the constants among them too.
  for (const nxrt_node* n : live)
    for (const auto& a : n->attributes)
      if (a.graph)
        for (const nxrt_value* o : a.graph->outer) initializer(m.find_value(o->name));
  for (const nxrt_value* v : m.inputs) write_value_type(*v, *g.add_input());
  for (const nxrt_value* v : m.outputs) write_value_type(*v, *g.add_output());
  if (weights) {
    // Every inferred type, so loading it back needs no shape inference.
    std::set<const nxrt_value*> io(m.inputs.begin(), m.inputs.end());
    io.insert(m.outputs.begin(), m.outputs.end());
    for (const nxrt_node* n : live)
      for (const nxrt_value* out : n->outputs)
        if (out && !io.count(out) && !written.count(out) &&
            (out->dtype != NXRT_DTYPE_UNDEFINED || out->kind != ValueKind::Tensor))
          write_value_type(*out, *g.add_value_info());
  }
  for (const nxrt_node* n : live) {
    auto* p = g.add_node();
    p->set_name(n->name);
    p->set_op_type(n->op_type);
    p->set_domain(n->domain);
    for (const nxrt_value* in : n->inputs) p->add_input(in ? in->name : "");
    for (const nxrt_value* out : n->outputs) p->add_output(out ? out->name : "");
    for (const auto& a : n->attributes) write_attribute(a, *p->add_attribute());
  }
  return model;
}

}  // namespace

void save_model(const nxrt_model_ir& m, const std::string& path) {
  const onnx::ModelProto model = to_proto(m, nullptr);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) raise(NXRT_ERR_NOT_FOUND, "cannot write model file '{}'", path);
  if (!model.SerializeToOstream(&f) || !f.flush())
    raise(NXRT_ERR_RUNTIME, "writing model file '{}' failed (disk full?)", path);
}

std::vector<uint8_t> artifact_graph(const nxrt_model_ir& m, std::vector<uint8_t>* weights) {
  const onnx::ModelProto model = to_proto(m, weights);
  std::vector<uint8_t> bytes(model.ByteSizeLong());
  if (!model.SerializeToArray(bytes.data(), int(bytes.size())))
    raise(NXRT_ERR_RUNTIME, "the model graph cannot be serialized ({} bytes)", bytes.size());
  return bytes;
}

}  // namespace nxrt
