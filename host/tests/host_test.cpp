// Host unit tests: loader and shape inference, optimizer, partitioner, memory
// planner, executor (incl. concurrent runs) and plugin unregistration.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "env.hpp"
#include "error.hpp"
#include "error_of.hpp"
#include "ir.hpp"
#include "session.hpp"
#include "status.hpp"

#include <onnx/onnx_pb.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace nxrt;

namespace {

using nxrt::test::error_of;

// A tiny builder for float32 test models.
struct ModelBuilder {
  onnx::ModelProto m;
  ModelBuilder() {
    m.set_ir_version(8);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(17);
    m.mutable_graph()->set_name("test");
  }
  void io(bool input, const std::string& name, std::vector<int64_t> dims) {
    auto* v = input ? m.mutable_graph()->add_input() : m.mutable_graph()->add_output();
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out, const std::string& domain = "") {
    auto* n = m.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_domain(domain);
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
  }
  std::shared_ptr<nxrt_model_ir> load() {
    std::string bytes = m.SerializeAsString();
    return load_model_bytes(bytes.data(), bytes.size(), "");
  }
};

std::string temp_path(const std::string& stem) {
  static std::atomic<int> counter{0};
  auto p = fs::temp_directory_path() /
           ("nxrt_host_test_" + stem + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::remove(p);
  return p.string();
}

std::shared_ptr<nxrt_model_ir> relu_chain(int n, std::vector<int64_t> dims) {
  ModelBuilder b;
  b.io(true, "x", dims);
  std::string prev = "x";
  for (int i = 0; i < n; ++i) {
    std::string out = i + 1 == n ? "y" : "t" + std::to_string(i);
    b.node("Relu", {prev}, {out});
    prev = out;
  }
  b.io(false, "y", dims);
  return b.load();
}

std::shared_ptr<PluginLibrary> load(Env& env, const std::string& path) {
  size_t idx = env.add(path);
  return env.entries()[idx].lib;
}
std::shared_ptr<PluginLibrary> plugin(Env& env, const std::string& file) { return load(env, std::string(NXRT_LIB_DIR) + "/" + file); }
std::shared_ptr<PluginLibrary> test_plugin(Env& env, const std::string& name) {
  return load(env, std::string(NXRT_TEST_PLUGIN_DIR) + "/libnxrt_ep_" + name + ".so");
}

std::unique_ptr<Session> make_session(std::shared_ptr<const nxrt_model_ir> m, std::vector<std::shared_ptr<PluginLibrary>> eps,
                                      bool fallback = false, std::vector<std::shared_ptr<PluginLibrary>> fb = {},
                                      bool owns_model = false) {
  std::vector<std::unique_ptr<EpInstance>> inst;
  for (auto& l : eps) inst.push_back(EpInstance::create(l, 0, 1));
  return std::make_unique<Session>(m, std::move(inst), fallback, fb, 1, 0, owns_model);
}

// A float32 initializer; dims default to [v.size()].
void initializer(ModelBuilder& b, const std::string& name, const std::vector<float>& v, std::vector<int64_t> dims = {}) {
  auto* w = b.m.mutable_graph()->add_initializer();
  w->set_name(name);
  w->set_data_type(onnx::TensorProto::FLOAT);
  if (dims.empty()) dims = {int64_t(v.size())};
  for (auto d : dims) w->add_dims(d);
  for (float f : v) w->add_float_data(f);
}

std::vector<float> run(Session& s, const std::vector<float>& x, std::vector<int64_t> dims) {
  nxrt_host_tensor in{"x", NXRT_DTYPE_FLOAT32, uint32_t(dims.size()), dims.data(), x.data()};
  std::vector<HostTensor> out;
  s.run(&in, 1, out);
  REQUIRE(out.size() == 1);
  const float* p = reinterpret_cast<const float*>(out[0].data.data());
  return std::vector<float>(p, p + out[0].numel());
}

}  // namespace

TEST_CASE("loader: shape inference gives intermediate values their shapes") {
  auto m = relu_chain(3, {2, 5});
  nxrt_value* t = m->find_value("t1");
  REQUIRE(t);
  CHECK(t->dtype == NXRT_DTYPE_FLOAT32);
  CHECK(t->dims == std::vector<int64_t>{2, 5});
  CHECK(m->live_nodes().size() == 3);
}

TEST_CASE("loader: corrupt bytes give a clear error") {
  std::string junk(100, '\xff');
  CHECK(error_of([&] { load_model_bytes(junk.data(), junk.size(), ""); }).find("not a valid ONNX protobuf") != std::string::npos);
  CHECK(error_of([&] { load_model_file("/nonexistent/model.onnx"); }).find("does not exist") != std::string::npos);
}

TEST_CASE("loader: external data may not leave the model folder") {
  fs::path dir = fs::temp_directory_path() / "nxrt_ext_test";
  fs::create_directories(dir / "model");
  std::ofstream(dir / "secret.bin", std::ios::binary).write("\0\0\0\0\0\0\0\0", 8);
  ModelBuilder b;
  b.io(true, "x", {2});
  auto* w = b.m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = w->add_external_data();
  kv->set_key("location");
  kv->set_value("../secret.bin");
  b.node("Add", {"x", "w"}, {"y"});
  b.io(false, "y", {2});
  std::ofstream(dir / "model" / "m.onnx", std::ios::binary) << b.m.SerializeAsString();
  std::string err = error_of([&] { load_model_file((dir / "model" / "m.onnx").string()); });
  CHECK(err.find("leaves the model's folder") != std::string::npos);
  CHECK(err.find("../secret.bin") != std::string::npos);
}

TEST_CASE("optimizer: Identity is removed and Constant is folded") {
  ModelBuilder b;
  b.io(true, "x", {3});
  auto* c = b.m.mutable_graph()->add_node();
  c->set_op_type("Constant");
  c->add_output("c");
  auto* a = c->add_attribute();
  a->set_name("value_floats");
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float f : {1.f, 2.f, 3.f}) a->add_floats(f);
  b.node("Identity", {"x"}, {"xi"});
  b.node("Add", {"xi", "c"}, {"y"});
  b.io(false, "y", {3});
  auto m = b.load();  // Constant nodes become values at load; no-ops go at level 1
  optimize(*m, {1, nullptr});
  auto live = m->live_nodes();
  REQUIRE(live.size() == 1);
  CHECK(live[0]->op_type == "Add");
  CHECK(live[0]->inputs[0]->name == "x");
  REQUIRE(live[0]->inputs[1]->constant);
  CHECK(live[0]->inputs[1]->constant->numel() == 3);
}

TEST_CASE("executor: a chain runs on the sample plugin and gives the right values") {
  Env env;
  auto sample = plugin(env, "libnxrt_ep_sample.so");
  auto s = make_session(relu_chain(4, {2, 3}), {sample});
  auto y = run(*s, {-1, 2, -3, 4, -5, 6}, {2, 3});
  CHECK(y == std::vector<float>{0, 2, 0, 4, 0, 6});
}

TEST_CASE("executor: released output buffers are reused by the next run, and outlive the session") {
  Env env;
  auto sample = plugin(env, "libnxrt_ep_sample.so");
  const std::vector<int64_t> dims = {64, 1024};  // 256 KiB: above OutputBuffers::kMinBytes
  auto s = make_session(relu_chain(2, dims), {sample});
  std::vector<float> x(64 * 1024);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 7) - 3);
  nxrt_host_tensor in{"x", NXRT_DTYPE_FLOAT32, 2, dims.data(), x.data()};
  std::vector<HostTensor> out;
  s->run(&in, 1, out);
  REQUIRE(out.size() == 1);
  const uint8_t* first = out[0].data.data();
  s->output_buffers()->give(std::move(out[0].data));
  for (float& v : x) v = -v;  // the second run must write every element again
  std::vector<HostTensor> out2;
  s->run(&in, 1, out2);
  REQUIRE(out2.size() == 1);
  CHECK(out2[0].data.data() == first);
  const float* y = reinterpret_cast<const float*>(out2[0].data.data());
  bool right = true;
  for (size_t i = 0; i < x.size(); ++i) right = right && y[i] == std::max(x[i], 0.f);
  CHECK(right);
  // Given back after the session is gone: the pool is shared, nothing dangles.
  auto pool = s->output_buffers();
  s.reset();
  pool->give(std::move(out2[0].data));
  CHECK(pool->take(64 * 1024 * 4).size() == 64 * 1024 * 4);
}

TEST_CASE("output buffers: fit within a quarter, small ones not kept, the largest dropped past the cap") {
  OutputBuffers pool(2);
  pool.give(Bytes(1000));  // below kMinBytes: freed
  CHECK(pool.take(1000).empty());
  const size_t m = OutputBuffers::kMinBytes;
  pool.give(Bytes(4 * m));
  CHECK(pool.take(2 * m).empty());       // twice too large: not used for it
  Bytes b = pool.take(4 * m - 100);      // within a quarter: shrunk to the size asked
  CHECK(b.size() == 4 * m - 100);
  CHECK(pool.take(4 * m - 100).empty());  // taken once
  pool.give(Bytes(2 * m));
  pool.give(Bytes(3 * m));
  pool.give(Bytes(8 * m));  // third: the largest goes
  CHECK(pool.take(8 * m).empty());
  CHECK(pool.take(3 * m).size() == 3 * m);
  CHECK(pool.take(2 * m).size() == 2 * m);
}

TEST_CASE("planner: buffers of a chain are reused by lifetime") {
  Env env;
  auto sample = plugin(env, "libnxrt_ep_sample.so");
  auto s = make_session(relu_chain(10, {64, 64}), {sample});
  // 9 intermediates of 16 KiB each; at most two are alive at once.
  CHECK(s->arena_bytes()[0] == 2 * 64 * 64 * 4);
}

TEST_CASE("partitioner: nodes no EP claims are named, with each EP's reason") {
  Env env;
  auto sample = plugin(env, "libnxrt_ep_sample.so");
  ModelBuilder b;
  b.io(true, "x", {4});
  b.node("Relu", {"x"}, {"r"});
  b.node("Sigmoid", {"r"}, {"y"});
  b.io(false, "y", {4});
  auto m = b.load();
  std::string err = error_of([&] { make_session(m, {sample}); });
  CHECK(err.find("1 node(s) are not supported by the requested EPs (sample)") != std::string::npos);
  CHECK(err.find("node 'Sigmoid_1' (Sigmoid): sample: no kernel for Sigmoid (op)") != std::string::npos);
  CHECK(err.find("--fallback") != std::string::npos);
}

TEST_CASE("partitioner: --fallback places refused nodes on another EP") {
  Env env;
  auto sample = plugin(env, "libnxrt_ep_sample.so");
  auto cpu = plugin(env, "libnxrt_ep_cpu.so");
  ModelBuilder b;
  b.io(true, "x", {4});
  b.node("Relu", {"x"}, {"r"});
  b.node("Sigmoid", {"r"}, {"y"});
  b.io(false, "y", {4});
  auto s = make_session(b.load(), {sample}, true, {cpu});
  CHECK(s->assignments()[0].ep == 0);
  CHECK(s->assignments()[1].ep == 1);
  CHECK(s->assignments()[1].fell_back);
  CHECK(s->assignments()[1].reasons.find("sample: no kernel for Sigmoid") != std::string::npos);
  std::vector<float> x{-1, 0, 1, 2};
  std::vector<int64_t> dims{4};
  auto y = run(*s, x, dims);
  CHECK(y[0] == doctest::Approx(0.5));
  CHECK(y[3] == doctest::Approx(1.0 / (1.0 + std::exp(-2.0))));
}

TEST_CASE("executor: inputs are validated by name, dtype and shape") {
  Env env;
  auto s = make_session(relu_chain(1, {2, 3}), {plugin(env, "libnxrt_ep_sample.so")});
  std::vector<float> x(6);
  std::vector<int64_t> good{2, 3}, bad{3, 2};
  std::vector<HostTensor> out;
  nxrt_host_tensor wrong_name{"z", NXRT_DTYPE_FLOAT32, 2, good.data(), x.data()};
  CHECK(error_of([&] { s->run(&wrong_name, 1, out); }).find("no input named 'z'") != std::string::npos);
  nxrt_host_tensor wrong_shape{"x", NXRT_DTYPE_FLOAT32, 2, bad.data(), x.data()};
  CHECK(error_of([&] { s->run(&wrong_shape, 1, out); }).find("has shape [3,2] but the model expects [2,3]") != std::string::npos);
  nxrt_host_tensor wrong_type{"x", NXRT_DTYPE_INT32, 2, good.data(), x.data()};
  CHECK(error_of([&] { s->run(&wrong_type, 1, out); }).find("is int32 but the model expects float32") != std::string::npos);
  CHECK(error_of([&] { s->run(nullptr, 0, out); }).find("input 'x' was not given") != std::string::npos);
}

TEST_CASE("executor: eight threads running one session get identical results") {
  Env env;
  auto s = make_session(relu_chain(20, {32, 32}), {plugin(env, "libnxrt_ep_sample.so")});
  std::vector<float> x(32 * 32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 7) - 3);
  auto expect = run(*s, x, {32, 32});
  std::vector<int> ok(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      bool same = true;
      for (int i = 0; i < 50; ++i) same &= run(*s, x, {32, 32}) == expect;
      ok[size_t(t)] = same;
    });
  for (auto& t : threads) t.join();
  for (int t = 0; t < 8; ++t) CHECK(ok[size_t(t)] == 1);
}

TEST_CASE("registry: unregister is refused while a session uses the plugin") {
  Env env;
  auto sample = plugin(env, "libnxrt_ep_sample.so");
  auto s = make_session(relu_chain(1, {2}), {sample});
  sample.reset();
  CHECK(error_of([&] { env.remove("sample"); }).find("still used by") != std::string::npos);
  s.reset();
  env.remove("sample");
  CHECK(env.find("sample") == nullptr);
  CHECK(error_of([&] { env.remove("sample"); }).find("no plugin named 'sample'") != std::string::npos);
}

TEST_CASE("registry: a plugin refusing negotiation is reported, not loaded") {
  Env env;
  std::string err = error_of([&] { env.add(std::string(NXRT_TEST_PLUGIN_DIR) + "/libnxrt_ep_newmajor.so"); });
  // Both majors: the plugin's (3, from the reply's frozen prefix) and the host's (2).
  CHECK(err.find("plugin 'libnxrt_ep_newmajor.so' is built for nxrt EP ABI 3.x; this host speaks 2.5") != std::string::npos);
  CHECK(err.find("this plugin speaks nxrt EP ABI 3.x only; the host offers ABI 2.5") != std::string::npos);
  auto entries = env.entries();
  REQUIRE(entries.size() == 1);
  CHECK(!entries[0].lib);
  CHECK(entries[0].error == err);
}

// x -> Relu -> Mul -> Sigmoid (devmem lacks it: the CPU plugin runs it) -> Relu -> Mul -> y.
std::shared_ptr<nxrt_model_ir> devmem_cpu_model() {
  ModelBuilder b;
  b.io(true, "x", {2, 4});
  b.node("Relu", {"x"}, {"r"});
  b.node("Mul", {"r", "x"}, {"m"});
  b.node("Sigmoid", {"m"}, {"s"});
  b.node("Relu", {"s"}, {"r2"});
  b.node("Mul", {"r2", "s"}, {"y"});
  b.io(false, "y", {2, 4});
  return b.load();
}

TEST_CASE("device path: groups on an opaque-memory device, copies and deferred streams") {
  Env env;
  auto devmem = test_plugin(env, "devmem");
  auto cpu = plugin(env, "libnxrt_ep_cpu.so");
  auto s = make_session(devmem_cpu_model(), {devmem, cpu});
  CHECK(s->assignments()[0].ep == 0);
  CHECK(s->assignments()[1].ep == 0);
  CHECK(s->assignments()[2].ep == 1);
  CHECK(s->assignments()[2].reasons.find("devmem: devmem runs float32 Relu and same-shape Mul only (op)") != std::string::npos);
  CHECK(s->assignments()[4].ep == 0);
  CHECK(s->copy_count() == 4);  // x up, m down, s up, y down
  std::vector<float> x{-2, -1, 0, 1, 2, 3, -4, 5};
  auto y = run(*s, x, {2, 4});
  REQUIRE(y.size() == x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double m = std::max(x[i], 0.f) * x[i];
    double sg = 1 / (1 + std::exp(-m));
    CHECK(y[i] == doctest::Approx(sg * sg).epsilon(1e-5));
  }
}

TEST_CASE("device path: the host waits on events only where it reads device results") {
  Env env;
  auto devmem = test_plugin(env, "devmem");
  auto cpu = plugin(env, "libnxrt_ep_cpu.so");
  auto s = make_session(devmem_cpu_model(), {devmem, cpu});  // the CPU's Sigmoid reads m on the host
  s->start_profiling();
  run(*s, {-2, -1, 0, 1, 2, 3, -4, 5}, {2, 4});
  const std::string trace = temp_path("events_trace.json");
  s->end_profiling(trace);
  std::ifstream f(trace);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // Downloads record events; the host waits once for m (the CPU's Sigmoid reads it)
  // and once for y (the caller reads it), and for nothing else.
  std::vector<std::string> waits;
  const std::regex wait_event(R"re("name":"(wait for [^"]*)")re");
  for (std::sregex_iterator it(text.begin(), text.end(), wait_event), end; it != end; ++it) waits.push_back((*it)[1]);
  CHECK(waits == std::vector<std::string>{"wait for 'm' on the host", "wait for 'y' on the host"});
}

TEST_CASE("partitioner: a claim made non-convex by a hidden node is split") {
  Env env;
  auto sample = plugin(env, "libnxrt_ep_sample.so");
  auto devmem = test_plugin(env, "devmem");
  ModelBuilder b;
  b.io(true, "x", {3});
  b.node("Mul", {"x", "x"}, {"p"});  // devmem
  b.node("Relu", {"p"}, {"h"});      // sample takes it first, hidden from devmem
  b.node("Mul", {"h", "p"}, {"y"});  // devmem: {p, y} would not be convex
  b.io(false, "y", {3});
  auto s = make_session(b.load(), {sample, devmem});
  CHECK(s->assignments()[0].ep == 1);
  CHECK(s->assignments()[1].ep == 0);
  CHECK(s->assignments()[2].ep == 1);
  auto y = run(*s, {-2, 1, 3}, {3});
  CHECK(y == std::vector<float>{16, 1, 81});
}

TEST_CASE("optimizer: BatchNormalization after a constant-weight Conv is folded into it") {
  ModelBuilder b;
  b.io(true, "x", {1, 2, 3, 3});
  auto add_const = [&](const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
    auto* t = b.m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    for (float f : v) t->add_float_data(f);
  };
  add_const("w", {2, 2, 1, 1}, {1, 2, 3, 4});
  add_const("scale", {2}, {2, 0.5});
  add_const("shift", {2}, {1, -1});
  add_const("mean", {2}, {0.5, 1});
  add_const("var", {2}, {3, 0});  // eps below makes the divisor 1 and 0.5's
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"y"});
  auto* eps = b.m.mutable_graph()->mutable_node(1)->add_attribute();
  eps->set_name("epsilon");
  eps->set_type(onnx::AttributeProto::FLOAT);
  eps->set_f(1.0f);
  b.io(false, "y", {1, 2, 3, 3});
  auto m = b.load();
  optimize(*m, {2, nullptr});
  auto live = m->live_nodes();
  REQUIRE(live.size() == 1);
  CHECK(live[0]->op_type == "Conv");
  CHECK(live[0]->outputs[0]->name == "y");
  REQUIRE(live[0]->inputs.size() == 3);
  const float* w = reinterpret_cast<const float*>(live[0]->inputs[1]->constant->data.data());
  const float* bias = reinterpret_cast<const float*>(live[0]->inputs[2]->constant->data.data());
  // k = scale / sqrt(var + eps): 2/2 = 1 and 0.5/1 = 0.5
  CHECK(w[0] == doctest::Approx(1));
  CHECK(w[1] == doctest::Approx(2));
  CHECK(w[2] == doctest::Approx(1.5));
  CHECK(w[3] == doctest::Approx(2));
  CHECK(bias[0] == doctest::Approx((0 - 0.5) * 1 + 1));
  CHECK(bias[1] == doctest::Approx((0 - 1) * 0.5 - 1));
  CHECK(!m->find_value("w")->constant);  // the unfolded weights are freed
}

TEST_CASE("executor: concurrent runs on the CPU plugin, whose kernels use its thread pool") {
  Env env;
  auto cpu = plugin(env, "libnxrt_ep_cpu.so");
  ModelBuilder b;
  b.io(true, "x", {64, 128});
  std::vector<float> wv(128 * 96);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = float(int(i * 37 % 17) - 8) / 16.0f;
  initializer(b, "w", wv, {128, 96});
  b.node("MatMul", {"x", "w"}, {"m"});
  b.node("Relu", {"m"}, {"y"});
  b.io(false, "y", {64, 96});
  std::vector<std::unique_ptr<EpInstance>> inst;
  inst.push_back(EpInstance::create(cpu, 0, 2));  // two intra-op threads per run
  Session s(b.load(), std::move(inst), false, {}, 2, 0);
  std::vector<float> x(64 * 128);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 13) - 6) / 8.0f;
  auto expect = run(s, x, {64, 128});
  std::vector<int> ok(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      bool same = true;
      for (int i = 0; i < 20; ++i) same &= run(s, x, {64, 128}) == expect;
      ok[size_t(t)] = same;
    });
  for (auto& t : threads) t.join();
  for (int t = 0; t < 4; ++t) CHECK(ok[size_t(t)] == 1);
}

namespace {
// y = ((x * c) + e) * e: the Muls run on the capture plugin (which captures its
// constant), the Add on the sample plugin (which reads e at run time).
std::shared_ptr<nxrt_model_ir> capture_model() {
  ModelBuilder b;
  b.io(true, "x", {4});
  initializer(b, "c", {1, 2, 3, 4});
  initializer(b, "e", {0.5f, -1, 2, 0});
  b.node("Mul", {"x", "c"}, {"m"});
  b.node("Add", {"m", "e"}, {"a"});
  b.node("Mul", {"a", "e"}, {"y"});
  b.io(false, "y", {4});
  return b.load();
}
}  // namespace

TEST_CASE("constants: captured weights are freed from a model the session owns, and only those") {
  Env env;
  auto cap = test_plugin(env, "capture");
  auto sample = plugin(env, "libnxrt_ep_sample.so");
  const std::vector<float> x{1, -1, 2, 3};
  const std::vector<float> want{(1 * 1 + 0.5f) * 0.5f, (-1 * 2 - 1) * -1.f, (2 * 3 + 2) * 2.f, 0};
  for (bool owns : {false, true}) {
    CAPTURE(owns);
    auto m = capture_model();
    auto s = make_session(m, {cap, sample}, false, {}, owns);
    CHECK(s->assignments()[0].ep == 0);
    CHECK(s->assignments()[1].ep == 1);
    // c: captured by its only reader; e: the sample Add still reads it.
    CHECK((m->find_value("c")->constant == nullptr) == owns);
    CHECK(m->find_value("e")->constant != nullptr);
    CHECK(run(*s, x, {4}) == want);  // the kernel fails if it is handed c's data
    CHECK(run(*s, x, {4}) == want);
  }
}

TEST_CASE("constants: an owned model's weights uploaded to a device leave host memory") {
  Env env;
  auto devmem = test_plugin(env, "devmem");
  ModelBuilder b;
  b.io(true, "x", {2, 2});
  initializer(b, "w", {1.f, -2.f, 3.f, 0.5f}, {2, 2});
  b.node("Mul", {"x", "w"}, {"y"});
  b.io(false, "y", {2, 2});
  auto m = b.load();
  auto s = make_session(m, {devmem}, false, {}, true);
  CHECK(m->find_value("w")->constant == nullptr);
  CHECK(run(*s, {1, 2, 3, 4}, {2, 2}) == std::vector<float>{1, -4, 9, 2});
}

TEST_CASE("constants: capturing an input that is not a constant is refused, naming it") {
  Env env;
  auto cap = test_plugin(env, "capture");
  ModelBuilder b;
  b.io(true, "x", {4});
  initializer(b, "c", {1, 2, 3, 4});
  b.node("Mul", {"x", "c"}, {"y"});
  b.m.mutable_graph()->mutable_node(0)->set_name("capture_x");
  b.io(false, "y", {4});
  auto err = error_of([&] { make_session(b.load(), {cap}); });
  CHECK(err.find("creating the kernel for node 'capture_x' (Mul)") != std::string::npos);
  CHECK(err.find("'x' is not a constant input of this kernel") != std::string::npos);
}

TEST_CASE("profiler: every step of every run, from concurrent threads, as a Chrome trace") {
  Env env;
  auto sample = plugin(env, "libnxrt_ep_sample.so");
  auto s = make_session(relu_chain(3, {4}), {sample});
  const auto path = (fs::temp_directory_path() / "nxrt_host_test_profile.json").string();
  CHECK(error_of([&] { s->end_profiling(path); }).find("profiling was not started") != std::string::npos);
  run(*s, {1, -2, 3, -4}, {4});  // not profiled
  s->start_profiling();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) run(*s, {1, -2, 3, -4}, {4});
    });
  for (auto& t : threads) t.join();
  CHECK(s->end_profiling(path) == 20 * (3 + 1));  // 20 runs x (3 kernels + the run)
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(text.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 0) == 0);
  size_t kernels = 0, pos = 0;
  while ((pos = text.find("\"cat\":\"kernel\"", pos)) != std::string::npos) ++kernels, ++pos;
  CHECK(kernels == 60);
  CHECK(text.find("\"args\":{\"ep\":\"sample\",\"ops\":\"Relu\"") != std::string::npos);
  // Stopped: later runs add nothing, and ending again is an error.
  run(*s, {1, -2, 3, -4}, {4});
  CHECK(error_of([&] { s->end_profiling(path); }).find("profiling was not started") != std::string::npos);
  fs::remove(path);
}

TEST_CASE("constants: the CPU plugin captures the weights it prepacks") {
  Env env;
  auto cpu = plugin(env, "libnxrt_ep_cpu.so");
  auto model = [] {
    ModelBuilder b;
    b.io(true, "x", {3, 8});
    std::vector<float> wv(40);
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = float(i % 7) - 3.f;
    initializer(b, "w", wv, {8, 5});
    b.node("MatMul", {"x", "w"}, {"y"});
    b.io(false, "y", {3, 5});
    return b.load();
  };
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 5) - 2.f;
  auto shared = model();
  auto s1 = make_session(shared, {cpu});
  CHECK(shared->find_value("w")->constant != nullptr);
  auto owned = model();
  auto s2 = make_session(owned, {cpu}, false, {}, true);
  CHECK(owned->find_value("w")->constant == nullptr);  // only the packed copy remains
  auto y = run(*s2, x, {3, 8});
  CHECK(y == run(*s1, x, {3, 8}));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      float want = 0;
      for (int k = 0; k < 8; ++k) want += x[size_t(i * 8 + k)] * (float((k * 5 + j) % 7) - 3.f);
      CHECK(y[size_t(i * 5 + j)] == doctest::Approx(want));
    }
}

// ====================================================================== ABI 2.0
namespace {

std::string test_plugin_path(const std::string& name) {
  return std::string(NXRT_TEST_PLUGIN_DIR) + "/libnxrt_ep_" + name + ".so";
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(f, line);) out.push_back(line);
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A fresh, empty temporary file path for one test.

// "key=value" fields of one hooks.log line ("start s=1 run=3 ..."): the first word is "event".
std::map<std::string, std::string> fields(const std::string& line) {
  std::map<std::string, std::string> f;
  std::istringstream in(line);
  std::string word;
  in >> word;
  f["event"] = word;
  // status= may hold spaces (the run's error message): it is the last-but-one field.
  std::string rest;
  std::getline(in, rest);
  static const std::regex kv(R"((\w+)=((?:[^ ]|\s(?!\w+=))*))");
  for (std::sregex_iterator it(rest.begin(), rest.end(), kv), end; it != end; ++it) f[(*it)[1]] = (*it)[2];
  return f;
}

std::unique_ptr<Session> hooks_session(std::shared_ptr<PluginLibrary> lib, std::shared_ptr<nxrt_model_ir> m,
                                       const std::string& log) {
  std::vector<std::unique_ptr<EpInstance>> inst;
  inst.push_back(EpInstance::create(lib, 0, 1, {{"hooks.log", log}}));
  return std::make_unique<Session>(m, std::move(inst), false, std::vector<std::shared_ptr<PluginLibrary>>{}, 1, 0);
}

std::vector<float> run_with(Session& s, const std::vector<float>& x, std::vector<int64_t> dims, const KeyValues& ro,
                            uint64_t* run_id) {
  nxrt_host_tensor in{"x", NXRT_DTYPE_FLOAT32, uint32_t(dims.size()), dims.data(), x.data()};
  std::vector<HostTensor> out;
  s.run(&in, 1, out, nullptr, &ro, run_id);
  REQUIRE(out.size() == 1);
  const float* p = reinterpret_cast<const float*>(out[0].data.data());
  return std::vector<float>(p, p + out[0].numel());
}

// A view of the whole main graph, as get_capability sees it.
nxrt_graph whole_view(const nxrt_model_ir& m) {
  nxrt_graph g;
  g.model = &m;
  for (auto* n : m.live_nodes()) g.nodes.push_back(n);
  std::sort(g.nodes.begin(), g.nodes.end(), [](const nxrt_node* a, const nxrt_node* b) { return a->index < b->index; });
  for (auto* v : m.inputs) g.inputs.push_back(v);
  for (auto* v : m.outputs) g.outputs.push_back(v);
  return g;
}

}  // namespace

TEST_CASE("lifecycle: the CPU plugin in two envs, released in both orders, runs a model in the survivor") {
  // Under ABI 1.x the second env shared the library's global state and shutting the
  // first one down pulled it from under the second: SIGSEGV. In 2.0 each env gets its
  // own plugin instance.
  const std::string cpu_path = std::string(NXRT_LIB_DIR) + "/libnxrt_ep_cpu.so";
  for (bool release_first : {true, false}) {
    CAPTURE(release_first);
    auto a = std::make_unique<Env>();
    auto b = std::make_unique<Env>();
    a->add(cpu_path);
    b->add(cpu_path);
    REQUIRE(a->find("cpu"));
    REQUIRE(b->find("cpu"));
    CHECK(a->find("cpu")->instance() != b->find("cpu")->instance());
    // Released env first, then the survivor runs a model (and is released after).
    std::unique_ptr<Env>& gone = release_first ? a : b;
    std::unique_ptr<Env>& survivor = release_first ? b : a;
    {
      auto s = make_session(relu_chain(3, {2, 3}), {gone->find("cpu")});
      CHECK(run(*s, {-1, 2, -3, 4, -5, 6}, {2, 3}) == std::vector<float>{0, 2, 0, 4, 0, 6});
    }
    gone.reset();
    SessionConfig cfg;
    cfg.eps = "cpu";
    auto s = survivor->create_session(relu_chain(3, {2, 3}), cfg, false);
    CHECK(run(*s, {-1, 2, -3, 4, -5, 6}, {2, 3}) == std::vector<float>{0, 2, 0, 4, 0, 6});
    s.reset();
    survivor.reset();
  }
}

TEST_CASE("versioning: a 1.x plugin is refused naming both majors") {
  // abi1: a polite 1.1 plugin refusing major 2 (its major only in its message);
  // abi1_careless: ignores the major and answers abi_major = 1.
  for (const char* name : {"abi1", "abi1_careless"}) {
    CAPTURE(name);
    Env env;
    std::string err = error_of([&] { env.add(test_plugin_path(name)); });
    CHECK(err.find(fmt::format("plugin 'libnxrt_ep_{}.so' is built for nxrt EP ABI 1.x; this host speaks 2.5", name)) !=
          std::string::npos);
    CHECK(err.find("rebuild it against the 2.x header") != std::string::npos);
    if (std::string(name) == "abi1")
      CHECK(err.find("this plugin is built for nxrt EP ABI 1.x; the host offers ABI 2.5") != std::string::npos);
    auto entries = env.entries();
    REQUIRE(entries.size() == 1);
    CHECK(!entries[0].lib);
    CHECK(entries[0].error == err);
    CHECK(env.find(name) == nullptr);
  }
}

TEST_CASE("versioning: a newer 2.x minor runs with its extra features off") {
  Env env;
  auto lib = test_plugin(env, "future_minor");
  REQUIRE(lib);
  CHECK(lib->name() == "future_minor");
  CHECK(lib->abi_major() == 2);
  CHECK(lib->abi_minor() == NXRT_EP_ABI_MINOR);  // min(host 3, plugin 9)
  // It declares CONCURRENT_RUN and bit 40 (a "2.9" feature): the host keeps only 2.5's.
  CHECK(lib->features() == NXRT_FEATURE_CONCURRENT_RUN);
  CHECK((lib->features() & (1ull << 40)) == 0);
  // device_info came from a larger struct, written only as far as the host's fits.
  REQUIRE(lib->devices().size() == 1);
  CHECK(lib->devices()[0].name == "future minor test CPU");
  CHECK(lib->devices()[0].memory_bytes == (1ull << 30));
  CHECK(lib->devices()[0].host_addressable);
  CHECK(lib->devices()[0].pci_bus_id.empty());
  auto s = make_session(relu_chain(3, {2, 4}), {lib});
  CHECK(s->assignments()[0].ep == 0);
  CHECK(run(*s, {-1, 2, -3, 4, -5, 6, 0, -0.5f}, {2, 4}) == std::vector<float>{0, 2, 0, 4, 0, 6, 0, 0});
  // Its 2.5 kernel_describe text (a tab, a newline, invalid UTF-8, 511 bytes) is kept
  // printable and cut to NXRT_KERNEL_DESCRIPTION_MAX bytes.
  const std::string& d = s->assignments()[0].kernel;
  CHECK(d.rfind("relu v2.9 ??abcdefghijklmnopqrstuvwxyz", 0) == 0);
  CHECK(d.size() == NXRT_KERNEL_DESCRIPTION_MAX);
  CHECK(std::none_of(d.begin(), d.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }));
}

TEST_CASE("versioning: a 2.0 plugin runs on this 2.1 host with no 2.1 feature") {
  Env env;
  auto lib = test_plugin(env, "v2_0");
  REQUIRE(lib);
  CHECK(lib->abi_major() == 2);
  CHECK(lib->abi_minor() == 0);
  CHECK(lib->features() == NXRT_FEATURE_CONCURRENT_RUN);
  CHECK(!lib->has(NXRT_FEATURE_MEMORY_STATS));
  auto s = make_session(relu_chain(3, {2, 4}), {lib});
  CHECK(run(*s, {-1, 2, -3, 4, -5, 6, 0, -0.5f}, {2, 4}) == std::vector<float>{0, 2, 0, 4, 0, 6, 0, 0});
  nxrt_memory_stats st{};
  CHECK(!s->eps()[0]->plugin_stats(&st));  // never reads past a 2.0 table
}

TEST_CASE("run hooks: on_run_start and on_run_end once per run per session, matching run ids, run options forwarded") {
  Env env;
  auto hooks = test_plugin(env, "hooks");
  CHECK(hooks->has(NXRT_FEATURE_RUN_HOOKS));
  CHECK(hooks->has(NXRT_FEATURE_DEVICE_PROFILING));
  const std::string log = temp_path("hooks_log");
  auto s1 = hooks_session(hooks, relu_chain(2, {4}), log);
  auto s2 = hooks_session(hooks, relu_chain(2, {4}), log);
  std::vector<uint64_t> ids1, ids2;
  const std::vector<float> x{-1, 2, -3, 4}, want{0, 2, 0, 4};
  for (int i = 0; i < 3; ++i) {
    uint64_t id = 0;
    KeyValues ro;
    if (i == 1) ro = {{"hooks.tag", "second"}, {"hooks.mode", "fast"}};
    CHECK(run_with(*s1, x, {4}, ro, &id) == want);
    ids1.push_back(id);
  }
  for (int i = 0; i < 2; ++i) {
    uint64_t id = 0;
    CHECK(run_with(*s2, x, {4}, {}, &id) == want);
    ids2.push_back(id);
  }
  // Overlapping runs on one session: 4 threads x 5 runs.
  std::vector<std::thread> threads;
  std::mutex mu;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        uint64_t id = 0;
        auto y = run_with(*s2, x, {4}, {}, &id);
        std::lock_guard lock(mu);
        ids2.push_back(id);
      }
    });
  for (auto& t : threads) t.join();
  // Run ids are unique per session and count from 1.
  CHECK(ids1 == std::vector<uint64_t>{1, 2, 3});
  CHECK(std::set<uint64_t>(ids2.begin(), ids2.end()).size() == 22);
  CHECK(*std::min_element(ids2.begin(), ids2.end()) == 1);
  CHECK(*std::max_element(ids2.begin(), ids2.end()) == 22);

  // Per (session, run): one start, one end, two kernels, all with the same run id.
  std::map<std::pair<std::string, std::string>, std::map<std::string, int>> seen;
  std::map<std::pair<std::string, std::string>, std::string> opts, status;
  for (auto& line : read_lines(log)) {
    auto f = fields(line);
    if (f["event"] == "create") continue;
    auto key = std::make_pair(f["s"], f["run"]);
    seen[key][f["event"]]++;
    if (f["event"] == "start") {
      opts[key] = f["opts"];
      CHECK(f["profiling"] == "0");
    }
    if (f["event"] == "end") {
      status[key] = f["status"];
      CHECK(f["sink"] == "0");
    }
  }
  CHECK(seen.size() == 3 + 22);
  for (auto& [key, counts] : seen) {
    // CAPTURE makes a lambda, which cannot capture a structured binding before clang 16.
    const std::string session_id = key.first, run_id = key.second;
    CAPTURE(session_id);
    CAPTURE(run_id);
    CHECK(counts["start"] == 1);
    CHECK(counts["end"] == 1);
    CHECK(counts["kernel"] == 2);
    CHECK(status[key] == "ok");
  }
  for (uint64_t id : ids1) CHECK(seen.count({"1", std::to_string(id)}) == 1);
  for (uint64_t id : ids2) CHECK(seen.count({"2", std::to_string(id)}) == 1);
  CHECK(opts[{"1", "1"}] == "");
  CHECK(opts[{"1", "2"}] == "hooks.mode=fast,hooks.tag=second");
  CHECK(opts[{"1", "3"}] == "");
  // Order within one run: start, then its kernels, then end.
  std::vector<std::string> order;
  for (auto& line : read_lines(log)) {
    auto f = fields(line);
    if (f["s"] == "1" && f["run"] == "2") order.push_back(f["event"]);
  }
  CHECK(order == std::vector<std::string>{"start", "kernel", "kernel", "end"});

  // A run option must name an EP of the session.
  std::vector<float> xv{1, 2, 3, 4};
  std::string err = error_of([&] { run_with(*s1, xv, {4}, {{"cpu.foo", "1"}}, nullptr); });
  CHECK(err.find("run option 'cpu.foo' is for EP 'cpu', which this session does not use (its EPs: hooks)") != std::string::npos);
  s1.reset();
  s2.reset();
  fs::remove(log);
}

TEST_CASE("run hooks: a failing run passes a non-NULL status to on_run_end") {
  Env env;
  auto hooks = test_plugin(env, "hooks");
  const std::string log = temp_path("hooks_fail");
  auto s = hooks_session(hooks, relu_chain(2, {4}), log);
  const std::vector<float> x{-1, 2, -3, 4};
  uint64_t id = 0;
  std::string err = error_of([&] { run_with(*s, x, {4}, {{"hooks.fail", "1"}}, &id); });
  CHECK(err.find("hooks: run 1 was asked to fail") != std::string::npos);
  CHECK(id == 1);
  CHECK(run_with(*s, x, {4}, {}, &id) == std::vector<float>{0, 2, 0, 4});  // the next run is fine
  CHECK(id == 2);
  std::map<std::string, std::string> end_status;
  std::map<std::string, int> ends;
  for (auto& line : read_lines(log)) {
    auto f = fields(line);
    if (f["event"] != "end") continue;
    end_status[f["run"]] = f["status"];
    ends[f["run"]]++;
  }
  CHECK(ends["1"] == 1);
  CHECK(ends["2"] == 1);
  CHECK(end_status["1"] != "ok");
  CHECK(end_status["1"].find("asked to fail") != std::string::npos);
  CHECK(end_status["2"] == "ok");
  s.reset();
  fs::remove(log);
}

TEST_CASE("run hooks: with profiling on, the plugin's device events appear in the Chrome trace") {
  Env env;
  auto hooks = test_plugin(env, "hooks");
  const std::string log = temp_path("hooks_prof");
  const std::string trace = temp_path("hooks_trace") + ".json";
  auto s = hooks_session(hooks, relu_chain(2, {4}), log);
  const std::vector<float> x{-1, 2, -3, 4};
  uint64_t id = 0;
  run_with(*s, x, {4}, {}, &id);  // not profiled
  s->start_profiling();
  run_with(*s, x, {4}, {}, &id);
  run_with(*s, x, {4}, {}, &id);
  s->end_profiling(trace);
  std::map<std::string, std::string> profiling, sink;
  for (auto& line : read_lines(log)) {
    auto f = fields(line);
    if (f["event"] == "start") profiling[f["run"]] = f["profiling"];
    if (f["event"] == "end") sink[f["run"]] = f["sink"];
  }
  CHECK(profiling["1"] == "0");
  CHECK(sink["1"] == "0");
  CHECK(profiling["2"] == "1");
  CHECK(sink["2"] == "1");
  CHECK(profiling["3"] == "1");
  CHECK(sink["3"] == "1");
  const std::string text = read_text(trace);
  size_t device = 0, pos = 0;
  while ((pos = text.find("\"cat\":\"device\"", pos)) != std::string::npos) ++device, ++pos;
  CHECK(device == 2 * 2);  // 2 profiled runs x 2 kernels
  CHECK(text.find("\"name\":\"relu@0\"") != std::string::npos);
  CHECK(text.find("\"name\":\"relu@1\"") != std::string::npos);
  CHECK(text.find("hooks device") != std::string::npos);  // its own track
  s.reset();
  fs::remove(log);
  fs::remove(trace);
}

TEST_CASE("retryable errors: session_create is retried once, a permanent failure is not") {
  Env env;
  auto hooks = test_plugin(env, "hooks");
  auto attempts = [](const std::string& log) {
    int n = 0;
    for (auto& line : read_lines(log)) n += fields(line)["event"] == "create";
    return n;
  };
  SUBCASE("retryable once: the second attempt succeeds") {
    const std::string log = temp_path("retry_once");
    auto inst = EpInstance::create(hooks, 0, 1, {{"hooks.log", log}, {"hooks.fail_session_create", "retryable_once"}});
    CHECK(inst->session != nullptr);
    CHECK(attempts(log) == 2);
    inst.reset();
    fs::remove(log);
  }
  SUBCASE("always retryable: reported after exactly two attempts") {
    const std::string log = temp_path("retry_always");
    std::string err = error_of([&] {
      EpInstance::create(hooks, 0, 1, {{"hooks.log", log}, {"hooks.fail_session_create", "retryable_always"}});
    });
    CHECK(err.find("attempt 2 failed (retryable") != std::string::npos);
    CHECK(attempts(log) == 2);
    fs::remove(log);
  }
  SUBCASE("permanent: one attempt") {
    const std::string log = temp_path("retry_never");
    std::string err = error_of([&] {
      EpInstance::create(hooks, 0, 1, {{"hooks.log", log}, {"hooks.fail_session_create", "permanent"}});
    });
    CHECK(err.find("attempt 1 failed (permanent)") != std::string::npos);
    CHECK(attempts(log) == 1);
    fs::remove(log);
  }
}

TEST_CASE("statuses: status_create never returns NULL and status_retryable reads the flag") {
  const nxrt_host_services& h = host_services();
  REQUIRE(NXRT_HAS_FIELD(&h, nxrt_host_services, profile_device_event));
  CHECK(h.abi_major == 2);
  nxrt_status* a = h.status_create(NXRT_DEVICE_LOST, 0, "gone");
  REQUIRE(a);
  CHECK(h.status_code(a) == NXRT_DEVICE_LOST);
  CHECK(std::string(h.status_message(a)) == "gone");
  CHECK(h.status_retryable(a) == 0);
  nxrt_status* b = h.status_create(NXRT_OUT_OF_MEMORY, 1, "try again");
  REQUIRE(b);
  CHECK(h.status_retryable(b) == 1);
  nxrt_status* c = h.status_create(NXRT_INTERNAL, 42, nullptr);  // any nonzero is retryable; NULL message
  REQUIRE(c);
  CHECK(h.status_retryable(c) == 1);
  CHECK(h.status_message(c) != nullptr);
  nxrt_status* ok = h.status_create(NXRT_OK, 0, "not an error");  // a failure is never NULL, never OK
  REQUIRE(ok);
  CHECK(h.status_code(ok) != NXRT_OK);
  const std::string huge(64u << 20, 'x');  // 64 MiB message
  nxrt_status* big = h.status_create(NXRT_INVALID_ARGUMENT, 0, huge.c_str());
  REQUIRE(big);
  CHECK((h.status_code(big) == NXRT_INVALID_ARGUMENT || h.status_code(big) == NXRT_OUT_OF_MEMORY));
  if (h.status_code(big) == NXRT_INVALID_ARGUMENT) CHECK(std::strlen(h.status_message(big)) == huge.size());
  CHECK(h.status_retryable(nullptr) == 0);
  for (nxrt_status* s : {a, b, c, ok, big}) h.status_release(s);
  h.status_release(nullptr);  // no-op
}

TEST_CASE("host services: indices, constants, tensor attributes, producers and consumers") {
  const nxrt_host_services& h = host_services();
  // x -> Relu(0) -> a -> LeakyRelu(1) -> b; Mul(a, a) -> m (a read twice); ConstantOfShape(shape) -> k
  ModelBuilder mb;
  mb.io(true, "x", {4});
  auto* shape = mb.m.mutable_graph()->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(1);
  shape->add_int64_data(4);
  mb.node("Relu", {"x"}, {"a"});
  mb.node("Relu", {"a"}, {"b"});
  mb.node("Mul", {"a", "a"}, {"m"});
  mb.node("ConstantOfShape", {"shape"}, {"k"});
  auto* val = mb.m.mutable_graph()->mutable_node(3)->add_attribute();
  val->set_name("value");
  val->set_type(onnx::AttributeProto::TENSOR);
  val->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  val->mutable_t()->add_dims(1);
  val->mutable_t()->add_float_data(7.5f);
  mb.m.mutable_graph()->mutable_node(1)->set_op_type("LeakyRelu");
  auto* alpha = mb.m.mutable_graph()->mutable_node(1)->add_attribute();  // a non-tensor attribute
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(0.25f);
  mb.io(false, "b", {4});
  mb.io(false, "m", {4});
  mb.io(false, "k", {4});
  auto m = mb.load();
  nxrt_graph g = whole_view(*m);
  REQUIRE(g.nodes.size() == 4);

  // node_index(NULL) is NXRT_NO_INDEX, not 0.
  CHECK(h.node_index(nullptr) == NXRT_NO_INDEX);
  CHECK(h.node_index(g.nodes[2]) == 2);

  // value_constant: NOT_FOUND status on a non-constant; the callee-filled rule on a constant.
  const nxrt_value* x = m->find_value("x");
  const nxrt_value* a = m->find_value("a");
  const nxrt_value* sh = m->find_value("shape");
  REQUIRE(x);
  REQUIRE(a);
  REQUIRE(sh);
  nxrt_const_tensor t{};
  t.struct_size = sizeof t;
  nxrt_status* st = h.value_constant(a, &t);
  REQUIRE(st);
  CHECK(h.status_code(st) == NXRT_NOT_FOUND);
  CHECK(std::string(h.status_message(st)).find("'a'") != std::string::npos);
  h.status_release(st);
  struct Bigger {
    nxrt_const_tensor t;
    uint64_t future_field;
  } big{};
  big.t.struct_size = sizeof big;
  big.future_field = 0xabcdef;
  REQUIRE(h.value_constant(sh, &big.t) == nullptr);
  CHECK(big.t.struct_size == sizeof(nxrt_const_tensor));  // wrote back what it filled
  CHECK(big.future_field == 0xabcdef);                    // and nothing beyond
  CHECK(big.t.dtype == NXRT_DTYPE_INT64);
  CHECK(big.t.rank == 1);
  CHECK(big.t.memory == NXRT_MEMORY_HOST);
  CHECK(*static_cast<const int64_t*>(big.t.data) == 4);
  nxrt_const_tensor tiny{};
  tiny.struct_size = 4;  // too small for even the dims
  st = h.value_constant(sh, &tiny);
  REQUIRE(st);
  CHECK(h.status_code(st) == NXRT_INVALID_ARGUMENT);
  h.status_release(st);

  // attribute_tensor returns a status.
  const nxrt_node* cos = g.nodes[3];
  CHECK(std::string(h.node_op_type(cos)) == "ConstantOfShape");
  const nxrt_attribute* value = h.node_attribute(cos, "value");
  REQUIRE(value);
  CHECK(h.attribute_type(value) == NXRT_ATTR_TENSOR);
  nxrt_const_tensor at{};
  at.struct_size = sizeof at;
  REQUIRE(h.attribute_tensor(value, &at) == nullptr);
  CHECK(at.dtype == NXRT_DTYPE_FLOAT32);
  CHECK(*static_cast<const float*>(at.data) == 7.5f);
  const nxrt_attribute* alpha_attr = h.node_attribute(g.nodes[1], "alpha");
  REQUIRE(alpha_attr);
  CHECK(h.attribute_float(alpha_attr) == 0.25f);
  st = h.attribute_tensor(alpha_attr, &at);  // not a tensor: a status, not an int
  REQUIRE(st);
  CHECK(h.status_code(st) == NXRT_INVALID_ARGUMENT);
  CHECK(std::string(h.status_message(st)).find("alpha") != std::string::npos);
  h.status_release(st);
  st = h.attribute_tensor(nullptr, &at);
  REQUIRE(st);
  h.status_release(st);

  // Producers and consumers on the chain, in the whole view and in a part of it.
  CHECK(h.value_producer(&g, x) == nullptr);   // a graph input
  CHECK(h.value_producer(&g, sh) == nullptr);  // a constant
  CHECK(h.value_producer(&g, a) == g.nodes[0]);
  CHECK(h.value_producer(&g, m->find_value("b")) == g.nodes[1]);
  CHECK(h.value_consumer_count(&g, x) == 1);
  CHECK(h.value_consumer(&g, x, 0) == g.nodes[0]);
  REQUIRE(h.value_consumer_count(&g, a) == 3);  // Relu once, Mul twice (once per use)
  std::multiset<size_t> users;
  for (size_t i = 0; i < 3; ++i) users.insert(h.node_index(h.value_consumer(&g, a, i)));
  CHECK(users == std::multiset<size_t>{1, 2, 2});
  CHECK(h.value_consumer(&g, a, 3) == nullptr);
  CHECK(h.value_consumer_count(&g, m->find_value("b")) == 0);
  CHECK(h.value_is_graph_output(m->find_value("b")) == 1);
  CHECK(h.value_is_graph_output(a) == 0);
  nxrt_graph part = g;  // without node 0 and node 2: a's producer and the Mul are hidden
  part.nodes = {g.nodes[1], g.nodes[3]};
  CHECK(h.value_producer(&part, a) == nullptr);
  CHECK(h.value_consumer_count(&part, a) == 1);
  CHECK(h.value_consumer(&part, a, 0) == g.nodes[1]);
  CHECK(h.value_producer(nullptr, a) == nullptr);
  CHECK(h.value_consumer_count(&g, nullptr) == 0);
}

TEST_CASE("host services: attribute_graph gives an If node's branches with their nodes and outputs") {
  const nxrt_host_services& h = host_services();
  auto branch = [](const std::string& name, const std::string& op, const std::string& out) {
    onnx::GraphProto g;
    g.set_name(name);
    auto* n = g.add_node();
    n->set_op_type(op);
    n->add_input("x");  // outer-scope value
    n->add_output(out);
    auto* o = g.add_output();
    o->set_name(out);
    auto* tt = o->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(3);
    return g;
  };
  ModelBuilder mb;
  mb.io(true, "x", {3});
  auto* c = mb.m.mutable_graph()->add_input();
  c->set_name("cond");
  c->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
  c->mutable_type()->mutable_tensor_type()->mutable_shape();  // a scalar
  mb.node("If", {"cond"}, {"y"});
  auto* n = mb.m.mutable_graph()->mutable_node(0);
  auto* then_b = n->add_attribute();
  then_b->set_name("then_branch");
  then_b->set_type(onnx::AttributeProto::GRAPH);
  *then_b->mutable_g() = branch("then_body", "Relu", "t_out");
  auto* else_b = n->add_attribute();
  else_b->set_name("else_branch");
  else_b->set_type(onnx::AttributeProto::GRAPH);
  *else_b->mutable_g() = branch("else_body", "Neg", "e_out");
  mb.io(false, "y", {3});
  auto m = mb.load();
  nxrt_graph g = whole_view(*m);
  REQUIRE(g.nodes.size() == 1);
  const nxrt_node* ifn = g.nodes[0];
  CHECK(std::string(h.node_op_type(ifn)) == "If");
  for (auto [attr, op, out] : {std::tuple{"then_branch", "Relu", "t_out"}, std::tuple{"else_branch", "Neg", "e_out"}}) {
    const char* branch = attr;  // CAPTURE cannot take a structured binding before clang 16
    CAPTURE(branch);
    const nxrt_attribute* a = h.node_attribute(ifn, attr);
    REQUIRE(a);
    CHECK(h.attribute_type(a) == NXRT_ATTR_GRAPH);
    const nxrt_graph* body = nullptr;
    REQUIRE(h.attribute_graph(a, &body) == nullptr);
    REQUIRE(body);
    REQUIRE(h.graph_node_count(body) == 1);
    const nxrt_node* bn = h.graph_node(body, 0);
    CHECK(std::string(h.node_op_type(bn)) == op);
    CHECK(h.node_index(bn) == 0);  // indexed within the body
    CHECK(h.graph_input_count(body) == 0);  // If branches have no formal inputs
    REQUIRE(h.graph_output_count(body) == 1);
    const nxrt_value* bo = h.graph_output(body, 0);
    CHECK(std::string(h.value_name(bo)) == out);
    CHECK(h.value_is_graph_output(bo) == 1);
    CHECK(h.value_producer(body, bo) == bn);
    // The body reads x of the enclosing graph: no producer in the body, not a body input.
    const nxrt_value* in = h.node_input(bn, 0);
    REQUIRE(in);
    CHECK(std::string(h.value_name(in)) == "x");
    CHECK(h.value_producer(body, in) == nullptr);
    CHECK(h.value_consumer_count(body, in) == 1);
    CHECK(h.graph_opset(body, "") == 17);
  }
  // A non-graph attribute (or NULL) is a status, not a crash.
  const nxrt_graph* none = nullptr;
  nxrt_status* st = h.attribute_graph(nullptr, &none);
  REQUIRE(st);
  CHECK(h.status_code(st) == NXRT_INVALID_ARGUMENT);
  h.status_release(st);
}

TEST_CASE("device description: two plugins with the same uuid, a PCI bus id and free memory") {
  Env env;
  auto a = test_plugin(env, "twin_a");
  auto b = test_plugin(env, "twin_b");
  REQUIRE(a->devices().size() == 1);
  REQUIRE(b->devices().size() == 1);
  const DeviceInfo& da = a->devices()[0];
  const DeviceInfo& db = b->devices()[0];
  CHECK(da.has_uuid());
  CHECK(da.uuid_str() == db.uuid_str());
  CHECK(da.uuid_str() == "6e787274-2d74-7769-6e2d-757569640001");
  CHECK(da.pci_bus_id == "0000:3b:00.0");
  CHECK(da.memory_free_bytes == (3ull << 30));
  const std::string d = da.describe();
  CHECK(d.find("pci_bus_id: 0000:3b:00.0") != std::string::npos);
  CHECK(d.find("memory_free: 3072 MiB") != std::string::npos);
  CHECK(d.find("uuid: 6e787274-2d74-7769-6e2d-757569640001") != std::string::npos);
}

TEST_CASE("options: the schema is read at load and checked before any session_create") {
  Env env;
  auto hooks = test_plugin(env, "hooks");
  REQUIRE(hooks->options().size() == 3);
  CHECK(hooks->options()[0].name == "hooks.log");
  CHECK(hooks->options()[0].type == NXRT_OPTION_PATH);
  CHECK(hooks->find_option("hooks.fail_session_create") != nullptr);
  int threads = 0;
  std::vector<std::shared_ptr<PluginLibrary>> eps{hooks};
  CHECK(error_of([&] { validate_ep_options({{"hooks.nope", "1"}}, eps, {}, &threads); })
            .find("unknown option 'hooks.nope' for EP 'hooks'") != std::string::npos);
  CHECK(error_of([&] { validate_ep_options({{"cpu.x", "1"}}, eps, {}, &threads); }).find("'cpu'") != std::string::npos);
  CHECK(error_of([&] { validate_ep_options({{"threads", "-1"}}, eps, {}, &threads); }).find("threads") != std::string::npos);
  CHECK(error_of([&] { validate_ep_options({{"hooks.sleep_us", "abc"}}, eps, {}, &threads); })
            .find("option 'hooks.sleep_us' for EP 'hooks' needs an int, got 'abc'") != std::string::npos);
  auto ok = validate_ep_options({{"hooks.log", "/tmp/x"}, {"threads", "3"}}, eps, {}, &threads);
  CHECK(threads == 3);
  CHECK(ok == KeyValues{{"hooks.log", "/tmp/x"}});
}
