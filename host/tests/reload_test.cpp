// Plugin lifecycle through the C API only (libnxrt): several environments holding
// independent instances of one plugin library, and load / unload / reload of every
// in-tree plugin from several threads. Small on purpose, so that it also builds and
// runs under ThreadSanitizer (tools/tsan.sh, ctest nxrt_tsan).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <nxrt/nxrt.h>

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string lib_path(const std::string& name) { return std::string(NXRT_LIB_DIR) + "/libnxrt_ep_" + name + ".so"; }

// x[2,3] -> Relu -> Relu -> y
const std::string& relu_model_bytes() {
  static const std::string bytes = [] {
    onnx::ModelProto m;
    m.set_ir_version(8);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(17);
    auto* g = m.mutable_graph();
    g->set_name("reload");
    auto io = [](onnx::ValueInfoProto* v, const char* name) {
      v->set_name(name);
      auto* tt = v->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(onnx::TensorProto::FLOAT);
      tt->mutable_shape()->add_dim()->set_dim_value(2);
      tt->mutable_shape()->add_dim()->set_dim_value(3);
    };
    io(g->add_input(), "x");
    io(g->add_output(), "y");
    auto* n1 = g->add_node();
    n1->set_op_type("Relu");
    n1->add_input("x");
    n1->add_output("r");
    auto* n2 = g->add_node();
    n2->set_op_type("Relu");
    n2->add_input("r");
    n2->add_output("y");
    return m.SerializeAsString();
  }();
  return bytes;
}

// Frees the error and returns its message ("" for success).
std::string take(nxrt_error* e) {
  if (!e) return "";
  std::string m = nxrt_error_message(e);
  nxrt_error_release(e);
  return m.empty() ? "(empty error message)" : m;
}

// Runs the Relu model on `ep` of `env`; "" on success, else what went wrong.
std::string run_relu(nxrt_env* env, const char* ep) {
  const std::string& bytes = relu_model_bytes();
  nxrt_model* model = nullptr;
  if (auto e = take(nxrt_model_load_bytes(bytes.data(), bytes.size(), &model)); !e.empty()) return "load: " + e;
  nxrt_session_options opts{};
  opts.eps = ep;
  opts.threads = 1;
  nxrt_session* s = nullptr;
  std::string err = take(nxrt_session_create_take_model(env, model, &opts, &s));
  if (!err.empty()) return "session: " + err;
  const float x[6] = {-1, 2, -3, 4, -5, 6};
  const int64_t dims[2] = {2, 3};
  nxrt_host_tensor in{"x", 1, 2, dims, x};
  nxrt_outputs* out = nullptr;
  err = take(nxrt_session_run(s, &in, 1, &out));
  if (err.empty()) {
    if (nxrt_outputs_count(out) != 1) {
      err = "wrong output count";
    } else {
      nxrt_host_tensor y = nxrt_outputs_get(out, 0);
      const float* p = static_cast<const float*>(y.data);
      const float want[6] = {0, 2, 0, 4, 0, 6};
      for (int i = 0; i < 6; ++i)
        if (p[i] != want[i]) err = "wrong values";
    }
    nxrt_outputs_release(out);
  } else {
    err = "run: " + err;
  }
  nxrt_session_release(s);
  return err;
}

// Creates an empty env and registers one plugin file; "" on success.
std::string env_with(const std::string& path, nxrt_env** env) {
  *env = nullptr;
  if (auto e = take(nxrt_env_create_empty(env)); !e.empty()) return "env: " + e;
  const char* name = nullptr;
  if (auto e = take(nxrt_env_register_plugin(*env, path.c_str(), &name)); !e.empty()) return "register: " + e;
  return name ? "" : "register gave no name";
}

}  // namespace

TEST_CASE("lifecycle: the CPU plugin in two envs, released in both orders, runs a model in the survivor") {
  // Under ABI 1.x this crashed (SIGSEGV): both envs shared the library's global state
  // and the first release shut it down under the second.
  for (bool release_a_first : {true, false}) {
    CAPTURE(release_a_first);
    nxrt_env *a = nullptr, *b = nullptr;
    REQUIRE(env_with(lib_path("cpu"), &a) == "");
    REQUIRE(env_with(lib_path("cpu"), &b) == "");
    CHECK(run_relu(a, "cpu") == "");
    CHECK(run_relu(b, "cpu") == "");
    nxrt_env*& gone = release_a_first ? a : b;
    nxrt_env*& survivor = release_a_first ? b : a;
    nxrt_env_release(gone);
    gone = nullptr;
    CHECK(run_relu(survivor, "cpu") == "");
    CHECK(run_relu(survivor, "cpu") == "");
    nxrt_env_release(survivor);
  }
}

TEST_CASE("lifecycle: load, unload and reload every in-tree plugin 100 times from 4 threads") {
  struct Plugin {
    const char* name;
    bool runs;  // runs the tiny model every 10th iteration
  };
  std::vector<Plugin> plugins{{"cpu", true}, {"sample", true}};
  if (std::filesystem::exists(lib_path("vulkan")))
    plugins.push_back({"vulkan", false});  // may have 0 devices: listing is enough
  else
    MESSAGE("libnxrt_ep_vulkan.so not built: cpu and sample only");
  // The libraries are really unmapped and mapped again, under ThreadSanitizer too: the
  // host loads and unloads plugins under one lock (loader_mutex in plugin_library.cpp),
  // which gives TSan the order ld.so keeps with a lock of its own.
  const int kThreads = 4;
  int iterations = 100;
  if (const char* e = std::getenv("NXRT_RELOAD_ITERATIONS")) iterations = std::atoi(e);
  std::vector<std::string> failure(kThreads);
  std::atomic<int> loads{0}, runs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < iterations && failure[size_t(t)].empty(); ++i)
        for (size_t p = 0; p < plugins.size(); ++p) {
          // Stagger the order so threads load and unload different plugins at once.
          const Plugin& pl = plugins[(p + size_t(t) + size_t(i)) % plugins.size()];
          auto fail = [&](const std::string& what) {
            failure[size_t(t)] = "thread " + std::to_string(t) + " iteration " + std::to_string(i) + " " + pl.name +
                                 ": " + what;
          };
          nxrt_env* env = nullptr;
          if (auto e = env_with(lib_path(pl.name), &env); !e.empty()) {
            fail(e);
            nxrt_env_release(env);
            return;
          }
          ++loads;
          nxrt_plugin_info info{};
          if (auto e = take(nxrt_env_plugin_info(env, 0, &info)); !e.empty()) fail("plugin_info: " + e);
          else if (!info.loaded) fail(std::string("not loaded: ") + info.error);
          else if (info.abi_major != 2) fail("abi_major " + std::to_string(info.abi_major));
          for (uint32_t d = 0; failure[size_t(t)].empty() && d < info.device_count; ++d) {
            const char* text = nullptr;
            if (auto e = take(nxrt_env_device_description(env, 0, d, &text)); !e.empty()) fail("device: " + e);
            else if (!text || std::string(text).find("kind: ") == std::string::npos) fail("device description");
          }
          if (failure[size_t(t)].empty() && pl.runs && info.device_count == 0) fail("no device");
          if (failure[size_t(t)].empty() && pl.runs && i % 10 == 0) {
            if (auto e = run_relu(env, pl.name); !e.empty()) fail(e);
            ++runs;
          }
          nxrt_env_release(env);
          if (!failure[size_t(t)].empty()) return;
        }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) CHECK_MESSAGE(failure[size_t(t)].empty(), failure[size_t(t)]);
  CHECK(loads.load() == kThreads * iterations * int(plugins.size()));
  const int runners = int(std::count_if(plugins.begin(), plugins.end(), [](const Plugin& p) { return p.runs; }));
  CHECK(runs.load() == kThreads * ((iterations + 9) / 10) * runners);
}
