// IR -> ONNX protobuf. Attributes the IR keeps as fields are written from them; graphs,
// sparse and undecodable tensors from the proto the loader kept (nxrt_attribute::proto).
#include "model_writer.hpp"

#include "error.hpp"
#include "version.hpp"

#include <onnx/onnx_pb.h>

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

void save_model(const nxrt_model_ir& m, const std::string& path) {
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
    encode_tensor(*v->constant, *t);
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
  for (const nxrt_value* v : m.inputs) write_type(*v, *g.add_input());
  for (const nxrt_value* v : m.outputs) write_type(*v, *g.add_output());
  for (const nxrt_node* n : live) {
    auto* p = g.add_node();
    p->set_name(n->name);
    p->set_op_type(n->op_type);
    p->set_domain(n->domain);
    for (const nxrt_value* in : n->inputs) p->add_input(in ? in->name : "");
    for (const nxrt_value* out : n->outputs) p->add_output(out ? out->name : "");
    for (const auto& a : n->attributes) write_attribute(a, *p->add_attribute());
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) raise(NXRT_ERR_NOT_FOUND, "cannot write model file '{}'", path);
  if (!model.SerializeToOstream(&f) || !f.flush())
    raise(NXRT_ERR_RUNTIME, "writing model file '{}' failed (disk full?)", path);
}

}  // namespace nxrt
