// Small ONNX models built with onnx's protobuf for host tests, and running them: a
// graph builder (inputs, outputs, nodes, initializers, bodies, attributes), run inputs
// with their storage, and a session on the in-tree plugins.
#pragma once
#include "env.hpp"
#include "ir.hpp"
#include "session.hpp"

#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace nxrt::test {

using Dims = std::optional<std::vector<int64_t>>;  // nullopt: shape unknown; -k: symbolic dimension k

inline void set_type(onnx::ValueInfoProto* v, const std::string& name, int elem, const Dims& dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  if (dims) {
    tt->mutable_shape();
    for (auto d : *dims) {
      if (d < 0) tt->mutable_shape()->add_dim()->set_dim_param("n" + std::to_string(-d));  // a symbolic dimension
      else tt->mutable_shape()->add_dim()->set_dim_value(d);
    }
  }
}

inline void set_seq_type(onnx::ValueInfoProto* v, const std::string& name, int elem) {
  v->set_name(name);
  v->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(elem);
}

constexpr int F = onnx::TensorProto::FLOAT, I64 = onnx::TensorProto::INT64, B = onnx::TensorProto::BOOL;

struct Graph {
  onnx::GraphProto* g;
  void in(const std::string& n, int elem, const Dims& d) { set_type(g->add_input(), n, elem, d); }
  void out(const std::string& n, int elem, const Dims& d) { set_type(g->add_output(), n, elem, d); }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + std::to_string(g->node_size()) + "_" + (outs.empty() ? "" : outs[0]));
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return n;
  }
  void floats(const std::string& name, std::vector<float> v, std::vector<int64_t> dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(F);
    for (auto d : dims) t->add_dims(d);
    for (float f : v) t->add_float_data(f);
  }
  void int64s(const std::string& name, std::vector<int64_t> v, std::vector<int64_t> dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(I64);
    for (auto d : dims) t->add_dims(d);
    for (auto x : v) t->add_int64_data(x);
  }
};

inline Graph body(onnx::NodeProto* n, const std::string& attr, const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return Graph{a->mutable_g()};
}

inline void int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

inline void ints_attr(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

struct Model {
  onnx::ModelProto m;
  explicit Model(int opset = 17) {
    m.set_ir_version(8);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    m.mutable_graph()->set_name("main");
  }
  Graph main() { return Graph{m.mutable_graph()}; }
  std::shared_ptr<nxrt_model_ir> load() {
    std::string bytes = m.SerializeAsString();
    return load_model_bytes(bytes.data(), bytes.size(), "");
  }
};

// One input of a run, with its storage.
struct In {
  std::string name;
  nxrt_dtype dtype;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};
inline In f32(const std::string& n, std::vector<float> v, std::vector<int64_t> dims) {
  In i{n, NXRT_DTYPE_FLOAT32, dims, std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(i.bytes.data(), v.data(), i.bytes.size());
  return i;
}
inline In i64(const std::string& n, int64_t v) {
  In i{n, NXRT_DTYPE_INT64, {}, std::vector<uint8_t>(8)};
  std::memcpy(i.bytes.data(), &v, 8);
  return i;
}
inline In boolean(const std::string& n, bool v) { return In{n, NXRT_DTYPE_BOOL, {}, {uint8_t(v ? 1 : 0)}}; }

inline std::vector<HostTensor> run(Session& s, const std::vector<In>& ins) {
  std::vector<nxrt_host_tensor> t;
  for (auto& i : ins) t.push_back({i.name.c_str(), int32_t(i.dtype), uint32_t(i.dims.size()), i.dims.data(), i.bytes.data()});
  std::vector<HostTensor> out;
  s.run(t.data(), t.size(), out);
  return out;
}

inline std::vector<float> values(const HostTensor& t) {
  REQUIRE(t.dtype == NXRT_DTYPE_FLOAT32);
  std::vector<float> v(size_t(t.numel()));
  if (!v.empty()) std::memcpy(v.data(), t.data.data(), v.size() * 4);
  return v;
}

inline std::string lib_path(const std::string& file) { return std::string(NXRT_LIB_DIR) + "/" + file; }

inline std::unique_ptr<Session> session(Env& env, std::shared_ptr<const nxrt_model_ir> m, const std::string& eps = "cpu",
                                 bool fallback = false) {
  env.add(lib_path("libnxrt_ep_cpu.so"));
  if (eps.find("vulkan") != std::string::npos) env.add(lib_path("libnxrt_ep_vulkan.so"));
  SessionConfig c;
  c.eps = eps;
  c.fallback = fallback;
  c.threads = 1;
  return env.create_session(std::move(m), c, false);
}

}  // namespace nxrt::test
