// Optimizer unit tests: each pass on a small graph built here, the levels, the CPU-plugin
// constant folding, the model writer, and the loader's opset and overflow refusals.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "env.hpp"
#include "error.hpp"
#include "error_of.hpp"
#include "ir.hpp"
#include "model_writer.hpp"
#include "optimizer.hpp"
#include "session.hpp"
#include "status.hpp"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace nxrt;

namespace {

using nxrt::test::error_of;

struct Builder {
  onnx::ModelProto m;
  explicit Builder(int opset = 17) {
    m.set_ir_version(8);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    m.mutable_graph()->set_name("test");
  }
  void io(bool input, const std::string& name, std::vector<int64_t> dims, int type = onnx::TensorProto::FLOAT) {
    auto* v = input ? m.mutable_graph()->add_input() : m.mutable_graph()->add_output();
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    tt->mutable_shape();  // [] is a scalar
    for (auto d : dims) {
      auto* dim = tt->mutable_shape()->add_dim();
      if (d >= 0) dim->set_dim_value(d);
      else dim->set_dim_param("n");
    }
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = m.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(out.empty() ? op : op + ":" + out[0]);
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
    return n;
  }
  void floats(const std::string& name, std::vector<float> v, std::vector<int64_t> dims = {}) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    if (dims.empty() && v.size() != 1) dims = {int64_t(v.size())};
    for (auto d : dims) t->add_dims(d);
    for (float f : v) t->add_float_data(f);
  }
  void ints(const std::string& name, std::vector<int64_t> v, std::vector<int64_t> dims) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (auto d : dims) t->add_dims(d);
    for (auto x : v) t->add_int64_data(x);
  }
  std::shared_ptr<nxrt_model_ir> load() {
    std::string bytes = m.SerializeAsString();
    return load_model_bytes(bytes.data(), bytes.size(), "");
  }
};

void attr_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

std::vector<std::string> ops(const nxrt_model_ir& m) {
  std::vector<std::string> out;
  for (auto* n : m.live_nodes()) out.push_back(n->op_type);
  return out;
}

std::vector<int64_t> int64s(const HostTensor& t) {
  std::vector<int64_t> v(size_t(t.numel()));
  std::memcpy(v.data(), t.data.data(), v.size() * 8);
  return v;
}

std::vector<float> floats_of(const HostTensor& t) {
  std::vector<float> v(size_t(t.numel()));
  std::memcpy(v.data(), t.data.data(), v.size() * 4);
  return v;
}

std::shared_ptr<PluginLibrary> cpu_plugin(Env& env) {
  size_t idx = env.add(std::string(NXRT_LIB_DIR) + "/libnxrt_ep_cpu.so");
  return env.entries()[idx].lib;
}

// Runs m on the CPU plugin with x as its only input; returns output 0.
std::vector<float> run_cpu(Env& env, std::shared_ptr<const nxrt_model_ir> m, const std::vector<float>& x,
                           std::vector<int64_t> dims) {
  std::vector<std::unique_ptr<EpInstance>> eps;
  eps.push_back(EpInstance::create(env.find("cpu"), 0, 1));
  Session s(m, std::move(eps), false, {}, 1, 0);
  nxrt_host_tensor in{m->inputs[0]->name.c_str(), NXRT_DTYPE_FLOAT32, uint32_t(dims.size()), dims.data(), x.data()};
  std::vector<HostTensor> out;
  s.run(&in, 1, out);
  return floats_of(out.at(0));
}

}  // namespace

TEST_CASE("no-op removal: Identity, inference Dropout and a Cast to the same type go; a real Cast stays") {
  Builder b;
  b.io(true, "x", {3});
  b.node("Identity", {"x"}, {"a"});
  b.node("Dropout", {"a"}, {"d"});
  attr_int(b.node("Cast", {"d"}, {"c"}), "to", onnx::TensorProto::FLOAT);
  attr_int(b.node("Cast", {"c"}, {"h"}), "to", onnx::TensorProto::DOUBLE);
  b.io(false, "h", {3}, onnx::TensorProto::DOUBLE);
  auto m = b.load();
  CHECK(ops(*m) == std::vector<std::string>{"Identity", "Dropout", "Cast", "Cast"});  // the loader leaves them
  CHECK(passes::remove_noops(*m) == 3);
  REQUIRE(ops(*m) == std::vector<std::string>{"Cast"});
  CHECK(m->live_nodes()[0]->inputs[0]->name == "x");
  CHECK(m->find_value("x")->consumers.size() == 1);
}

TEST_CASE("no-op removal: a graph output made by an Identity keeps its producer") {
  Builder b;
  b.io(true, "x", {3});
  b.node("Identity", {"x"}, {"y"});
  b.io(false, "y", {3});
  auto m = b.load();
  CHECK(passes::remove_noops(*m) == 0);
  CHECK(ops(*m) == std::vector<std::string>{"Identity"});
}

TEST_CASE("shape folding: Shape of static dims, Gather of a partly static Shape, Concat of the results") {
  Builder b;
  b.io(true, "x", {-1, 4, 6});
  b.io(true, "z", {2, 3});
  b.node("Shape", {"x"}, {"sx"});
  b.ints("one", {1}, {});
  b.ints("two", {2}, {1});
  b.node("Gather", {"sx", "one"}, {"d1"});
  b.ints("axes", {0}, {1});
  b.node("Unsqueeze", {"d1", "axes"}, {"d1v"});
  b.node("Shape", {"z"}, {"sz"});
  b.node("Concat", {"sz", "two"}, {"target"})->add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("axis");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(0);
    return a;
  }());
  b.node("Size", {"z"}, {"n"});
  b.node("Reshape", {"x", "target"}, {"y"});
  b.node("Add", {"d1v", "d1v"}, {"u"});
  b.io(false, "y", {-1, 3, 2});
  b.io(false, "u", {1}, onnx::TensorProto::INT64);
  auto m = b.load();
  CHECK(passes::fold_shapes(*m) == 4);  // Gather(Shape(x), 1), Shape(z), Concat, Size(z)
  REQUIRE(m->find_value("n")->constant);
  CHECK(int64s(*m->find_value("n")->constant) == std::vector<int64_t>{6});
  REQUIRE(m->find_value("d1")->constant);
  CHECK(int64s(*m->find_value("d1")->constant) == std::vector<int64_t>{4});
  CHECK(m->find_value("d1")->constant->dims.empty());
  REQUIRE(m->find_value("target")->constant);
  CHECK(int64s(*m->find_value("target")->constant) == std::vector<int64_t>{2, 3, 2});
  // Shape(x) itself: x's first dim is unknown, so it stays (and is dead now).
  CHECK(!m->find_value("sx")->constant);
  CHECK(passes::eliminate_dead_nodes(*m) == 1);  // Shape(x)
  CHECK(ops(*m) == std::vector<std::string>{"Unsqueeze", "Reshape", "Add"});
}

TEST_CASE("constant folding: nodes whose inputs are all constant run once on the CPU plugin") {
  Builder b;
  b.io(true, "x", {3});
  b.floats("a", {1, 2, 3});
  b.floats("c", {10, 20, 30});
  b.node("Mul", {"a", "a"}, {"aa"});
  b.node("Add", {"aa", "c"}, {"k"});
  b.node("Add", {"x", "k"}, {"y"});
  b.io(false, "y", {3});
  auto m = b.load();
  std::string note;
  SUBCASE("without the CPU plugin the pass is skipped and says so") {
    CHECK(passes::fold_constants(*m, nullptr, &note) == 0);
    CHECK(note.find("CPU plugin is not loaded") != std::string::npos);
    CHECK(ops(*m).size() == 3);
  }
  SUBCASE("with it") {
    Env env;
    auto cpu = cpu_plugin(env);
    CHECK(passes::fold_constants(*m, cpu, &note) == 2);
    CHECK(note == "on the cpu plugin");
    REQUIRE(ops(*m) == std::vector<std::string>{"Add"});
    REQUIRE(m->find_value("k")->constant);
    CHECK(floats_of(*m->find_value("k")->constant) == std::vector<float>{11, 24, 39});
    CHECK(!m->find_value("aa")->constant);  // the intermediate is not kept
    CHECK(run_cpu(env, m, {1, 1, 1}, {3}) == std::vector<float>{12, 25, 40});
  }
}

TEST_CASE("constant folding leaves a node whose output would be above 64 MiB") {
  // A 128 MiB ConstantOfShape: folding it would take seconds at session creation and keep
  // the bytes for the session's life. A small one beside it still folds.
  Builder b;
  b.io(true, "x", {1});
  b.ints("big_shape", {int64_t(1) << 25}, {1});
  b.ints("small_shape", {4}, {1});
  b.node("ConstantOfShape", {"big_shape"}, {"big"});
  b.node("ConstantOfShape", {"small_shape"}, {"small"});
  b.node("Add", {"big", "x"}, {"y"});
  b.node("Add", {"small", "x"}, {"z"});
  b.io(false, "y", {int64_t(1) << 25});
  b.io(false, "z", {4});
  auto m = b.load();
  Env env;
  auto cpu = cpu_plugin(env);
  std::string note;
  CHECK(passes::fold_constants(*m, cpu, &note) == 1);
  CHECK(note == "on the cpu plugin; 1 node(s) left: an output above 64 MiB");
  CHECK(!m->find_value("big")->constant);
  REQUIRE(m->find_value("small")->constant);
  CHECK(floats_of(*m->find_value("small")->constant) == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("constant folding leaves a node whose output is above 64 MiB only at run time") {
  // big_shape is computed by a folded Mul, so shape inference cannot size "big": the fold run
  // meets its 128 MiB at run time, leaves that node in the graph and folds the rest.
  Builder b;
  b.io(true, "x", {1});
  b.ints("half_shape", {int64_t(1) << 24}, {1});
  b.ints("two", {2}, {1});
  b.ints("small_shape", {4}, {1});
  b.node("Mul", {"half_shape", "two"}, {"big_shape"});
  b.node("ConstantOfShape", {"big_shape"}, {"big"});
  b.node("ConstantOfShape", {"small_shape"}, {"small"});
  b.node("Add", {"big", "x"}, {"y"});
  b.node("Add", {"small", "x"}, {"z"});
  b.io(false, "y", {-1});
  b.io(false, "z", {4});
  auto m = b.load();
  REQUIRE(m->find_value("big")->rank == 1);
  REQUIRE(m->find_value("big")->dims[0] < 0);  // the case under test: unknown until run time
  Env env;
  auto cpu = cpu_plugin(env);
  std::string note;
  CHECK(passes::fold_constants(*m, cpu, &note) == 2);  // the Mul and the small ConstantOfShape
  CHECK(note == "on the cpu plugin; 1 node(s) left: an output above 64 MiB");
  CHECK(!m->find_value("big")->constant);
  REQUIRE(m->find_value("big_shape")->constant);
  CHECK(int64s(*m->find_value("big_shape")->constant) == std::vector<int64_t>{int64_t(1) << 25});
  REQUIRE(m->find_value("small")->constant);
  CHECK(floats_of(*m->find_value("small")->constant) == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("common-subexpression elimination: equal nodes on the same inputs become one, equal scalars included") {
  Builder b;
  b.io(true, "x", {4});
  b.floats("two_a", {2});
  b.floats("two_b", {2});
  b.node("Relu", {"x"}, {"r1"});
  b.node("Relu", {"x"}, {"r2"});
  b.node("Mul", {"r1", "two_a"}, {"m1"});
  b.node("Mul", {"r2", "two_b"}, {"m2"});
  b.node("Sigmoid", {"x"}, {"s"});
  b.node("Add", {"m1", "m2"}, {"t"});
  b.node("Add", {"t", "s"}, {"y"});
  b.io(false, "y", {4});
  auto m = b.load();
  CHECK(passes::eliminate_common_subexpressions(*m) == 2);  // the second Relu, then the second Mul
  CHECK(ops(*m) == std::vector<std::string>{"Relu", "Mul", "Sigmoid", "Add", "Add"});
  const nxrt_node* add = m->live_nodes()[3];
  CHECK(add->inputs[0] == add->inputs[1]);
  Env env;
  cpu_plugin(env);
  CHECK(run_cpu(env, m, {-1, 1, 2, 0}, {4}) ==
        std::vector<float>{1.f / (1 + std::exp(1.f)), 4 + 1.f / (1 + std::exp(-1.f)), 8 + 1.f / (1 + std::exp(-2.f)), 0.5f});
}

TEST_CASE("common-subexpression elimination: random ops are never merged") {
  Builder b;
  b.io(true, "x", {2});
  b.node("RandomUniformLike", {"x"}, {"r1"});
  b.node("RandomUniformLike", {"x"}, {"r2"});
  b.node("Add", {"r1", "r2"}, {"y"});
  b.io(false, "y", {2});
  auto m = b.load();
  CHECK(passes::eliminate_common_subexpressions(*m) == 0);
}

TEST_CASE("quantized models: DequantizeLinear is neither folded nor merged, so each reader keeps its own") {
  // x_q -> DQ -> Relu and x_q -> DQ -> Sigmoid (dedicated pairs), and DQ of constant int8
  // weights: an EP fuses each DequantizeLinear with its reader (the CPU plugin's QDQ groups).
  Builder b;
  b.io(true, "xq", {4}, onnx::TensorProto::UINT8);
  b.floats("s", {0.5f});
  auto* w = b.m.mutable_graph()->add_initializer();
  w->set_name("wq");
  w->set_data_type(onnx::TensorProto::INT8);
  w->add_dims(4);
  w->set_raw_data(std::string("\x01\xff\x02\x7f", 4));
  b.node("DequantizeLinear", {"xq", "s"}, {"d1"});
  b.node("DequantizeLinear", {"xq", "s"}, {"d2"});
  b.node("DequantizeLinear", {"wq", "s"}, {"wd"});
  b.node("Relu", {"d1"}, {"r"});
  b.node("Sigmoid", {"d2"}, {"g"});
  b.node("Add", {"r", "g"}, {"t"});
  b.node("Add", {"t", "wd"}, {"y"});
  b.io(false, "y", {4});
  auto m = b.load();
  CHECK(passes::eliminate_common_subexpressions(*m) == 0);
  Env env;
  auto cpu = cpu_plugin(env);
  std::string note;
  CHECK(passes::fold_constants(*m, cpu, &note) == 0);
  CHECK(ops(*m) == std::vector<std::string>{"DequantizeLinear", "DequantizeLinear", "DequantizeLinear", "Relu", "Sigmoid",
                                            "Add", "Add"});
}

TEST_CASE("quantized models: a DequantizeLinear read by several nodes gets one copy per reader past the first") {
  // xq -> DQ -> {Relu, Add(d, d), Sigmoid}; a second DQ is also a graph output (kept shared).
  Builder b;
  b.io(true, "xq", {4}, onnx::TensorProto::UINT8);
  b.floats("s", {0.5f});
  b.node("DequantizeLinear", {"xq", "s"}, {"d"});
  b.node("Relu", {"d"}, {"r"});
  b.node("Add", {"d", "d"}, {"a"});
  b.node("Sigmoid", {"d"}, {"g"});
  b.node("DequantizeLinear", {"xq", "s"}, {"e"});
  b.node("Neg", {"e"}, {"n"});
  b.node("Sum", {"r", "a", "g", "n"}, {"y"});
  b.io(false, "y", {4});
  b.io(false, "e", {4});
  auto m = b.load();
  CHECK(passes::split_shared_dequantize(*m) == 2);
  CHECK(passes::split_shared_dequantize(*m) == 0);  // nothing shared is left
  CHECK(ops(*m) == std::vector<std::string>{"DequantizeLinear", "DequantizeLinear", "DequantizeLinear", "Relu", "Add",
                                            "Sigmoid", "DequantizeLinear", "Neg", "Sum"});
  // Indices are positions; every value's producer and readers agree with the nodes.
  for (size_t i = 0; i < m->nodes.size(); ++i) {
    const nxrt_node& n = *m->nodes[i];
    CHECK(n.index == i);
    for (const nxrt_value* o : n.outputs) CHECK(o->producer == int(i));
    for (const nxrt_value* in : n.inputs)
      if (in && !in->constant && !in->is_graph_input) CHECK(in->producer < int(i));  // topological
    for (const nxrt_value* in : n.inputs)
      if (in) CHECK(std::count(in->consumers.begin(), in->consumers.end(), int(i)) ==
                    std::count(n.inputs.begin(), n.inputs.end(), in));
  }
  // Each reader reads its own copy; Add reads one copy twice.
  auto reader_of = [&](const char* op) {
    for (auto* n : m->live_nodes())
      if (n->op_type == op) return n;
    return static_cast<const nxrt_node*>(nullptr);
  };
  const nxrt_value* d_relu = reader_of("Relu")->inputs[0];
  const nxrt_value* d_add = reader_of("Add")->inputs[0];
  const nxrt_value* d_sig = reader_of("Sigmoid")->inputs[0];
  CHECK(d_relu->name == "d");
  CHECK(d_add->name == "d/reader1");
  CHECK(reader_of("Add")->inputs[1] == d_add);
  CHECK(d_sig->name == "d/reader2");
  CHECK(d_relu->consumers.size() == 1);
  CHECK(d_add->consumers.size() == 2);
  CHECK(m->find_value("e")->consumers.size() == 1);  // a graph output: not split
  // The optimized model computes what the original does.
  Env env;
  cpu_plugin(env);
  auto plain = b.load();
  std::vector<std::unique_ptr<EpInstance>> e1, e2;
  e1.push_back(EpInstance::create(env.find("cpu"), 0, 1));
  e2.push_back(EpInstance::create(env.find("cpu"), 0, 1));
  Session s1(plain, std::move(e1), false, {}, 1, 0), s2(m, std::move(e2), false, {}, 1, 0);
  const std::vector<uint8_t> xq = {0, 3, 128, 255};
  const std::vector<int64_t> dims = {4};
  nxrt_host_tensor in{"xq", NXRT_DTYPE_UINT8, 1, dims.data(), xq.data()};
  std::vector<HostTensor> o1, o2;
  s1.run(&in, 1, o1);
  s2.run(&in, 1, o2);
  CHECK(floats_of(o1.at(0)) == floats_of(o2.at(0)));
}

TEST_CASE("dead-node elimination keeps what a control-flow body reads by name") {
  Builder b;
  b.io(true, "x", {1});
  b.io(true, "cond", {}, onnx::TensorProto::BOOL);
  b.node("Neg", {"x"}, {"unused"});
  b.node("Relu", {"x"}, {"read_in_body"});
  auto* iff = b.node("If", {"cond"}, {"y"});
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = iff->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* g = a->mutable_g();
    g->set_name(branch);
    auto* n = g->add_node();
    n->set_op_type("Identity");
    n->add_input("read_in_body");
    n->add_output(std::string(branch) + "_out");
    auto* o = g->add_output();
    o->set_name(std::string(branch) + "_out");
    o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    o->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(1);
  }
  b.io(false, "y", {1});
  auto m = b.load();
  CHECK(passes::eliminate_dead_nodes(*m) == 1);
  CHECK(ops(*m) == std::vector<std::string>{"Relu", "If"});
}

TEST_CASE("MatMul+Add -> Gemm (level 2) for 2-D float operands; not at level 1") {
  Builder b;
  b.io(true, "x", {2, 3});
  b.floats("w", {1, 2, 3, 4, 5, 6}, {3, 2});
  b.floats("bias", {10, 20}, {2});
  b.node("MatMul", {"x", "w"}, {"xw"});
  b.node("Add", {"bias", "xw"}, {"y"});
  b.io(false, "y", {2, 2});
  auto m1 = b.load();
  optimize(*m1, {1, nullptr});
  CHECK(ops(*m1) == std::vector<std::string>{"MatMul", "Add"});
  auto m = b.load();
  optimize(*m, {2, nullptr});
  REQUIRE(ops(*m) == std::vector<std::string>{"Gemm"});
  const nxrt_node* g = m->live_nodes()[0];
  CHECK(g->inputs[0]->name == "x");
  CHECK(g->inputs[1]->name == "w");
  CHECK(g->inputs[2]->name == "bias");
  CHECK(g->outputs[0]->name == "y");
  Env env;
  cpu_plugin(env);
  CHECK(run_cpu(env, m, {1, 0, 1, 0, 1, 0}, {2, 3}) == std::vector<float>{16, 28, 13, 24});
}

TEST_CASE("MatMul+Add stays when the Add would broadcast the product wider") {
  Builder b;
  b.io(true, "x", {1, 3});
  b.floats("w", {1, 2, 3}, {3, 1});
  b.floats("bias", {1, 2, 3, 4}, {4, 1});
  b.node("MatMul", {"x", "w"}, {"xw"});
  b.node("Add", {"xw", "bias"}, {"y"});
  b.io(false, "y", {4, 1});
  auto m = b.load();
  CHECK(passes::fuse_matmul_add(*m) == 0);
}

TEST_CASE("BatchNormalization after a constant-weight Conv is folded into it (level 2)") {
  Builder b;
  b.io(true, "x", {1, 2, 1, 1});
  b.floats("w", {1, 2, 3, 4}, {2, 2, 1, 1});
  b.floats("scale", {2, 0.5});
  b.floats("shift", {1, -1});
  b.floats("mean", {0.5, 1});
  b.floats("var", {3, 0});
  b.node("Conv", {"x", "w"}, {"c"});
  auto* bn = b.node("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"y"});
  auto* eps = bn->add_attribute();
  eps->set_name("epsilon");
  eps->set_type(onnx::AttributeProto::FLOAT);
  eps->set_f(1.0f);
  b.io(false, "y", {1, 2, 1, 1});
  auto m = b.load();
  Env env;
  cpu_plugin(env);
  const auto before = run_cpu(env, m, {1, 2}, {1, 2, 1, 1});
  optimize(*m, {2, nullptr});
  CHECK(ops(*m) == std::vector<std::string>{"Conv"});
  const auto after = run_cpu(env, m, {1, 2}, {1, 2, 1, 1});
  REQUIRE(after.size() == 2);
  CHECK(after[0] == doctest::Approx(before[0]));
  CHECK(after[1] == doctest::Approx(before[1]));
  CHECK(before[0] == doctest::Approx((5 - 0.5) * 1 + 1));
}

TEST_CASE("fusion groups (level 3): LayerNorm, GELU and attention are annotated, not rewritten") {
  Builder b;
  b.io(true, "x", {2, 4});
  b.floats("two", {2});
  b.floats("eps", {1e-5f});
  b.floats("gamma", {1, 1, 1, 1});
  b.floats("beta", {0, 0, 0, 0});
  b.floats("sqrt2", {1.4142135f});
  b.floats("one", {1});
  b.floats("half", {0.5f});
  b.floats("scale", {0.5f});
  b.node("ReduceMean", {"x"}, {"mean"})->add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("axes");
    a.set_type(onnx::AttributeProto::INTS);
    a.add_ints(-1);
    return a;
  }());
  b.node("Sub", {"x", "mean"}, {"d"});
  b.node("Pow", {"d", "two"}, {"sq"});
  b.node("ReduceMean", {"sq"}, {"var"})->add_attribute()->CopyFrom(b.m.graph().node(0).attribute(0));
  b.node("Add", {"var", "eps"}, {"ve"});
  b.node("Sqrt", {"ve"}, {"sd"});
  b.node("Div", {"d", "sd"}, {"n"});
  b.node("Mul", {"n", "gamma"}, {"ng"});
  b.node("Add", {"ng", "beta"}, {"ln"});
  // GELU(ln)
  b.node("Div", {"ln", "sqrt2"}, {"g0"});
  b.node("Erf", {"g0"}, {"g1"});
  b.node("Add", {"g1", "one"}, {"g2"});
  b.node("Mul", {"ln", "g2"}, {"g3"});
  b.node("Mul", {"g3", "half"}, {"g"});
  // softmax(g g^T * 0.5) g
  auto* t = b.node("Transpose", {"g"}, {"gt"});
  (void)t;
  b.node("MatMul", {"g", "gt"}, {"qk"});
  b.node("Mul", {"qk", "scale"}, {"qks"});
  b.node("Softmax", {"qks"}, {"p"});
  b.node("MatMul", {"p", "g"}, {"y"});
  b.io(false, "y", {2, 4});
  auto m = b.load();
  Env env;
  cpu_plugin(env);
  std::vector<float> x = {1, 2, 3, 4, -1, 0, 1, 5};
  const auto before = run_cpu(env, m, x, {2, 4});
  optimize(*m, {3, nullptr});
  std::map<std::string, std::vector<std::string>> groups;
  for (auto* n : m->live_nodes())
    for (auto& a : n->annotations)
      if (a.name == kFusionAttr) groups[a.s].push_back(n->op_type);
  CHECK(groups["LayerNormalization"] == std::vector<std::string>{"ReduceMean", "Sub", "Pow", "ReduceMean", "Add", "Sqrt", "Div", "Mul", "Add"});
  CHECK(groups["Gelu"] == std::vector<std::string>{"Div", "Erf", "Add", "Mul", "Mul"});
  CHECK(groups["Attention"] == std::vector<std::string>{"MatMul", "Mul", "Softmax", "MatMul"});
  // Each member names the whole group.
  const nxrt_node* erf = nullptr;
  for (auto* n : m->live_nodes()) if (n->op_type == "Erf") erf = n;
  REQUIRE(erf);
  REQUIRE(erf->annotations.size() == 2);
  CHECK(erf->annotations[1].name == kFusionGroupAttr);
  CHECK(erf->annotations[1].ints == std::vector<int64_t>{9, 10, 11, 12, 13});
  CHECK(host_services().node_attribute(erf, kFusionAttr) == &erf->annotations[0]);  // what a plugin asks for
  CHECK(host_services().node_attribute_count(erf) == 0);                            // not listed
  // Unclaimed, the nodes run as before (the CPU plugin ignores the annotation).
  CHECK(run_cpu(env, m, x, {2, 4}) == before);
}

TEST_CASE("levels: 0 changes nothing; every level gives the unoptimized outputs") {
  Builder b;
  b.io(true, "x", {2, 3});
  b.floats("w", {1, 2, 3, 4, 5, 6}, {3, 2});
  b.floats("bias", {1, -1}, {2});
  b.floats("a", {1, 2});
  b.node("Identity", {"x"}, {"xi"});
  b.node("MatMul", {"xi", "w"}, {"xw"});
  b.node("Add", {"xw", "bias"}, {"h"});
  b.node("Neg", {"a"}, {"na"});
  b.node("Mul", {"h", "na"}, {"y"});
  b.io(false, "y", {2, 2});
  Env env;
  auto cpu = cpu_plugin(env);
  const std::vector<float> x = {1, 2, 3, -1, 0, 1};
  std::vector<float> reference;
  for (int level = 0; level <= kMaxOptLevel; ++level) {
    CAPTURE(level);
    auto m = b.load();
    optimize(*m, {level, cpu});
    if (level == 0) CHECK(ops(*m).size() == 5);
    if (level == 1) CHECK(ops(*m) == std::vector<std::string>{"MatMul", "Add", "Mul"});
    if (level >= 2) CHECK(ops(*m) == std::vector<std::string>{"Gemm", "Mul"});
    auto y = run_cpu(env, m, x, {2, 3});
    if (level == 0) reference = y;
    REQUIRE(y.size() == reference.size());
    for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(reference[i]));
  }
  CHECK_THROWS_AS(optimize(*b.load(), {4, cpu}), HostError);
}

TEST_CASE("sessions: the level is a session option; a shared model is optimized on a copy") {
  Builder b;
  b.io(true, "x", {3});
  b.node("Identity", {"x"}, {"xi"});
  b.node("Relu", {"xi"}, {"y"});
  b.io(false, "y", {3});
  std::shared_ptr<const nxrt_model_ir> m = b.load();
  Env env;
  cpu_plugin(env);
  SessionConfig config;
  config.opt_level = 1;
  auto s1 = env.create_session(m, config, false);
  CHECK(s1->model().live_nodes().size() == 1);
  CHECK(m->live_nodes().size() == 2);  // the caller's model is untouched
  CHECK(s1->model().optimizer_log.at(0) == "optimization level 1");
  config.opt_level = 0;
  auto s0 = env.create_session(m, config, false);
  CHECK(s0->model().live_nodes().size() == 2);
  config.opt_level = 7;
  CHECK(error_of([&] { env.create_session(m, config, false); }).find("optimization level 7") != std::string::npos);
}

TEST_CASE("writer: an optimized model written back loads and gives the same outputs") {
  Builder b;
  b.io(true, "x", {2, 3});
  b.floats("w", {1, 2, 3, 4, 5, 6}, {3, 2});
  b.floats("bias", {1, -1}, {2});
  b.node("MatMul", {"x", "w"}, {"xw"});
  b.node("Add", {"xw", "bias"}, {"y"});
  b.io(false, "y", {2, 2});
  auto m = b.load();
  Env env;
  auto cpu = cpu_plugin(env);
  optimize(*m, {2, cpu});
  const std::string path = (fs::temp_directory_path() / ("nxrt_opt_writer_" + std::to_string(::getpid()) + ".onnx")).string();
  save_model(*m, path);
  std::shared_ptr<const nxrt_model_ir> again = load_model_file(path);
  fs::remove(path);
  CHECK(ops(*again) == std::vector<std::string>{"Gemm"});
  CHECK(run_cpu(env, again, {1, 0, 0, 0, 1, 0}, {2, 3}) == run_cpu(env, m, {1, 0, 0, 0, 1, 0}, {2, 3}));
}

TEST_CASE("loader: an opset newer than the bundled schemas is refused, naming domain and version") {
  Builder b(999);
  b.io(true, "x", {3});
  b.node("Relu", {"x"}, {"y"});
  b.io(false, "y", {3});
  const std::string err = error_of([&] { b.load(); });
  CHECK(err.find("opset 999 of domain 'ai.onnx'") != std::string::npos);
}

TEST_CASE("loader: sizes that overflow 64-bit arithmetic are refused") {
  SUBCASE("a declared shape") {
    Builder b;
    b.io(true, "x", {int64_t(1) << 40, int64_t(1) << 40});
    b.node("Relu", {"x"}, {"y"});
    b.io(false, "y", {-1, -1});
    const std::string err = error_of([&] { b.load(); });
    CHECK(err.find("value 'x' has shape [1099511627776,1099511627776] whose size overflows") != std::string::npos);
  }
  SUBCASE("a ConstantOfShape target") {
    Builder b;
    b.ints("shape", {int64_t(1) << 32, int64_t(1) << 32}, {2});
    b.io(true, "x", {1});
    b.node("ConstantOfShape", {"shape"}, {"c"});
    b.node("Add", {"x", "c"}, {"y"});
    b.io(false, "y", {-1, -1});
    const std::string err = error_of([&] { b.load(); });
    CAPTURE(err);
    CHECK(err.find("overflow") != std::string::npos);
  }
  SUBCASE("a Tile repeat") {
    Builder b;
    b.io(true, "x", {1 << 20});
    b.ints("reps", {int64_t(1) << 50}, {1});
    b.node("Tile", {"x", "reps"}, {"y"});
    b.io(false, "y", {-1});
    const std::string err = error_of([&] { b.load(); });
    CAPTURE(err);
    CHECK(err.find("node 'Tile:y' (Tile) asks for a shape of about") != std::string::npos);
  }
}

TEST_CASE("fusion groups: a plugin that claims an annotated group gets it whole; without the annotation, nothing") {
  Builder b;
  b.io(true, "x", {2, 3});
  b.floats("sqrt2", {1.4142135f});
  b.floats("one", {1});
  b.floats("half", {0.5f});
  b.node("Relu", {"x"}, {"r"});
  b.node("Mul", {"r", "half"}, {"h"});  // the halving first: the other GELU form
  b.node("Div", {"r", "sqrt2"}, {"g0"});
  b.node("Erf", {"g0"}, {"g1"});
  b.node("Add", {"g1", "one"}, {"g2"});
  b.node("Mul", {"h", "g2"}, {"y"});
  b.io(false, "y", {2, 3});
  std::shared_ptr<const nxrt_model_ir> m = b.load();
  Env env;
  cpu_plugin(env);
  env.add(std::string(NXRT_TEST_PLUGIN_DIR) + "/libnxrt_ep_fusion.so");
  SessionConfig config;
  config.eps = "fusion,cpu";
  const std::vector<float> x = {-2, -0.5, 0, 0.5, 1, 3};
  const std::vector<int64_t> dims = {2, 3};
  auto run = [&](Session& s) {
    nxrt_host_tensor in{"x", NXRT_DTYPE_FLOAT32, 2, dims.data(), x.data()};
    std::vector<HostTensor> out;
    s.run(&in, 1, out);
    return floats_of(out.at(0));
  };
  config.opt_level = 2;
  auto plain = env.create_session(m, config, false);
  for (auto* n : plain->model().live_nodes()) CHECK(plain->assignments()[n->index].ep == 1);  // all on cpu
  config.opt_level = 3;
  auto fused = env.create_session(m, config, false);
  size_t on_fusion = 0;
  for (auto* n : fused->model().live_nodes()) on_fusion += fused->assignments()[n->index].ep == 0;
  CHECK(on_fusion == 5);
  size_t kernels = 0;
  for (auto& st : fused->steps()) kernels += st.kind == Step::Kernel;
  CHECK(kernels == 2);  // Relu on cpu, the whole group as one kernel
  const auto a = run(*plain), c = run(*fused);
  REQUIRE(a.size() == c.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(c[i] == doctest::Approx(a[i]).epsilon(1e-6));
  CHECK(a[5] == doctest::Approx(3 * 0.5 * (1 + std::erf(3 / std::sqrt(2.0)))));
}
