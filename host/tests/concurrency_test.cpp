// Concurrency and limits through the public API (issue 15), on the CPU plugin and, where a
// device exists, the Vulkan one: one session run by 8 threads x 500 runs, each thread with
// its own input, every output compared with the single-threaded run's bytes; sessions
// created and destroyed while another session runs; 1,000 create/run/destroy cycles with
// flat memory. A case whose EP has no device here is reported SKIP (doctest_skip.hpp).
#include "doctest_skip.hpp"

#include <nxrt/nxrt.hpp>
#include <onnx/onnx_pb.h>

#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int64_t kRows = 8, kCols = 64;

std::string lib_path(const std::string& name) { return std::string(NXRT_LIB_DIR) + "/libnxrt_ep_" + name + ".so"; }

// y = Softmax(Relu(x @ W + B)), x [kRows, kCols]: a GEMM with constants, an elementwise op
// and a row reduction, so each run touches weights, temporaries and a reduction.
const std::string& model_path() {
  static const std::string path = [] {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    auto* g = m.mutable_graph();
    g->set_name("concurrency");
    auto io = [](onnx::ValueInfoProto* v, const char* name) {
      v->set_name(name);
      auto* tt = v->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(onnx::TensorProto::FLOAT);
      tt->mutable_shape()->add_dim()->set_dim_value(kRows);
      tt->mutable_shape()->add_dim()->set_dim_value(kCols);
    };
    io(g->add_input(), "x");
    io(g->add_output(), "y");
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> d(-0.5f, 0.5f);
    auto* w = g->add_initializer();
    w->set_name("W");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(kCols);
    w->add_dims(kCols);
    for (int64_t i = 0; i < kCols * kCols; ++i) w->add_float_data(d(rng));
    auto* b = g->add_initializer();
    b->set_name("B");
    b->set_data_type(onnx::TensorProto::FLOAT);
    b->add_dims(kCols);
    for (int64_t i = 0; i < kCols; ++i) b->add_float_data(d(rng));
    auto node = [&](const char* op, std::vector<const char*> in, const char* out) {
      auto* n = g->add_node();
      n->set_op_type(op);
      for (auto* i : in) n->add_input(i);
      n->add_output(out);
      return n;
    };
    node("MatMul", {"x", "W"}, "m");
    node("Add", {"m", "B"}, "a");
    node("Relu", {"a"}, "r");
    auto* sm = node("Softmax", {"r"}, "y");
    auto* axis = sm->add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(-1);
    const std::string p =
        (std::filesystem::temp_directory_path() / ("nxrt_concurrency_" + std::to_string(::getpid()) + ".onnx")).string();
    std::ofstream(p, std::ios::binary) << m.SerializeAsString();
    return p;
  }();
  return path;
}

std::vector<float> input(int seed) {
  std::mt19937 rng(uint32_t(seed) * 7919u + 1u);
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  std::vector<float> x(size_t(kRows * kCols));
  for (auto& v : x) v = d(rng);
  return x;
}

std::vector<uint8_t> run(nxrt::Session& s, const std::vector<float>& x) {
  static const std::vector<int64_t> dims{kRows, kCols};
  nxrt_host_tensor in{"x", 1, 2, dims.data(), x.data()};
  auto out = s.run({in});
  REQUIRE(out.size() == 1);
  const auto* p = static_cast<const uint8_t*>(out[0].data);
  return std::vector<uint8_t>(p, p + size_t(kRows * kCols) * 4);
}

// An Env with `ep`'s plugin, or NULL when it is not built (tools/tsan.sh without --vulkan) or
// has no device here.
std::unique_ptr<nxrt::Env> env_for(const std::string& ep) {
  if (!std::filesystem::exists(lib_path(ep))) return nullptr;
  auto env = std::make_unique<nxrt::Env>(false);
  env->register_plugin(lib_path(ep));
  for (auto& p : env->plugins())
    if (std::string(p.name) == ep && p.loaded && p.device_count > 0) return env;
  return nullptr;
}

// Runs `body` with cpu, then with vulkan; false when vulkan has no device here.
bool on_each_ep(const std::function<void(nxrt::Env&, const nxrt::SessionOptions&)>& body) {
  for (const std::string ep : {"cpu", "vulkan"}) {
    CAPTURE(ep);
    auto env = env_for(ep);
    if (!env) return false;
    nxrt::SessionOptions o;
    o.eps = ep;
    body(*env, o);
  }
  return true;
}

size_t malloc_bytes() { return mallinfo2().uordblks; }
size_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * size_t(::sysconf(_SC_PAGESIZE));
}

}  // namespace

TEST_CASE("one session, 8 threads x 500 runs, each thread its own input: every output is the single-threaded bytes") {
  const bool all = on_each_ep([&](nxrt::Env& env, const nxrt::SessionOptions& o) {
    nxrt::Session s(env, nxrt::Model(model_path()), o);
    constexpr int kThreads = 8, kRuns = 500;
    std::vector<std::vector<float>> inputs;
    std::vector<std::vector<uint8_t>> expected;
    for (int t = 0; t < kThreads; ++t) {
      inputs.push_back(input(t));
      expected.push_back(run(s, inputs.back()));
    }
    // The inputs differ, so a kernel sharing scratch between concurrent runs shows up.
    for (int t = 1; t < kThreads; ++t) REQUIRE(expected[size_t(t)] != expected[0]);
    std::atomic<int> mismatches{0}, errors{0};
    std::mutex mu;
    std::string first_error;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kRuns; ++i) {
          try {
            if (run(s, inputs[size_t(t)]) != expected[size_t(t)]) ++mismatches;
          } catch (const std::exception& e) {
            std::lock_guard lock(mu);
            if (!errors++) first_error = e.what();
          }
        }
      });
    for (auto& t : threads) t.join();
    CHECK_MESSAGE(errors == 0, first_error);
    CHECK(mismatches == 0);
  });
  if (!all) NXRT_SKIP_CASE("vulkan is not built or has no device here (cpu ran)");
}

TEST_CASE("sessions created, run and destroyed while another session of the same model runs") {
  const bool all = on_each_ep([&](nxrt::Env& env, const nxrt::SessionOptions& o) {
    nxrt::Model model(model_path());
    nxrt::Session s(env, model, o);
    const auto x0 = input(100), x1 = input(101);
    const auto want0 = run(s, x0), want1 = run(s, x1);
    std::atomic<bool> stop{false};
    std::atomic<int> bad{0}, runs{0}, made{0};
    std::mutex mu;
    std::string first_error;
    auto note = [&](const std::string& e) {
      std::lock_guard lock(mu);
      if (!bad++) first_error = e;
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
      threads.emplace_back([&] {
        while (!stop) {
          try {
            if (run(s, x0) != want0) note("the long-lived session's output changed");
            ++runs;
          } catch (const std::exception& e) {
            note(e.what());
          }
        }
      });
    for (int t = 0; t < 2; ++t)
      threads.emplace_back([&] {
        for (int i = 0; i < 40; ++i) {
          try {
            nxrt::Session mine(env, model, o);
            if (run(mine, x1) != want1) note("a short-lived session's output differs");
            ++made;
          } catch (const std::exception& e) {
            note(e.what());
          }
        }
      });
    for (size_t t = 2; t < threads.size(); ++t) threads[t].join();
    stop = true;
    threads[0].join();
    threads[1].join();
    CHECK_MESSAGE(bad == 0, first_error);
    CHECK(made == 80);
    CHECK(runs > 0);
  });
  if (!all) NXRT_SKIP_CASE("vulkan is not built or has no device here (cpu ran)");
}

TEST_CASE("1,000 session create/run/destroy cycles leave memory flat") {
  const bool all = on_each_ep([&](nxrt::Env& env, const nxrt::SessionOptions& o) {
    nxrt::Model model(model_path());
    const auto x = input(5);
    std::vector<uint8_t> want;
    size_t m0 = 0, r0 = 0;
    constexpr int kCycles = 1000, kWarm = 100;
    for (int i = 0; i < kCycles; ++i) {
      if (i == kWarm) {  // after allocator pools, caches and lazily loaded code settled
        malloc_trim(0);
        m0 = malloc_bytes();
        r0 = rss_bytes();
      }
      nxrt::Session s(env, model, o);
      auto y = run(s, x);
      if (want.empty()) want = y;
      REQUIRE(y == want);
    }
    malloc_trim(0);
    const long dm = long(malloc_bytes()) - long(m0), dr = long(rss_bytes()) - long(r0);
    MESSAGE(o.eps << ": over " << (kCycles - kWarm) << " cycles malloc " << (dm >> 10) << " KiB, RSS " << (dr >> 10) << " KiB");
    // A leak of one small object per cycle (>= 1 KiB) would be ~900 KiB; a session's
    // buffers are 32 KiB+. Bounds well under either, well over allocator noise.
    CHECK(dm < (512l << 10));
    CHECK(dr < (4l << 20));
  });
  if (!all) NXRT_SKIP_CASE("vulkan is not built or has no device here (cpu ran)");
}
