// Host unit tests: loader and shape inference, optimizer, partitioner, memory
// planner, executor (incl. concurrent runs) and plugin unregistration.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "env.hpp"
#include "error.hpp"
#include "ir.hpp"
#include "session.hpp"

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace fs = std::filesystem;
using namespace nxrt;

namespace {

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

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const HostError& e) {
    return e.what();
  }
  return "";
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
  auto m = b.load();
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
  CHECK(err.find("refused negotiation (version mismatch): this plugin needs nxrt EP ABI 2.x") != std::string::npos);
  auto entries = env.entries();
  REQUIRE(entries.size() == 1);
  CHECK(!entries[0].lib);
  CHECK(entries[0].error == err);
}

TEST_CASE("device path: groups on an opaque-memory device, copies and deferred streams") {
  Env env;
  auto devmem = test_plugin(env, "devmem");
  auto cpu = plugin(env, "libnxrt_ep_cpu.so");
  ModelBuilder b;
  b.io(true, "x", {2, 4});
  b.node("Relu", {"x"}, {"r"});
  b.node("Mul", {"r", "x"}, {"m"});
  b.node("Sigmoid", {"m"}, {"s"});  // devmem lacks it: the CPU plugin runs it
  b.node("Relu", {"s"}, {"r2"});
  b.node("Mul", {"r2", "s"}, {"y"});
  b.io(false, "y", {2, 4});
  auto s = make_session(b.load(), {devmem, cpu});
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
