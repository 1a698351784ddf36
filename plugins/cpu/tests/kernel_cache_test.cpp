// The CPU plugin's compiled-kernel cache (ABI 2.4) through its real C table, loaded with
// dlopen by the conformance mini-host: kernel_create -> compute -> kernel_export ->
// kernel_import into a fresh session of a fresh plugin instance -> compute gives
// bit-identical outputs; imported kernels read their packed weights from the blob (no copy,
// no memory counted) with the weights captured; fingerprints are judged; hostile blobs are
// verdicts; offline sessions pack for a described CPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "minihost.hpp"

namespace {

using conf::HostTensor;

std::vector<uint8_t> floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<uint8_t> b(n * 4);
  for (size_t i = 0; i < n; ++i) {
    float v = d(rng);
    std::memcpy(&b[i * 4], &v, 4);
  }
  return b;
}
size_t numel(const std::vector<int64_t>& d) {
  size_t n = 1;
  for (auto x : d) n *= size_t(x);
  return n;
}

nxrt_attribute attr_int(const char* name, int64_t v) {
  nxrt_attribute a;
  a.name = name;
  a.type = NXRT_ATTR_INT;
  a.i = v;
  return a;
}
nxrt_attribute attr_float(const char* name, float v) {
  nxrt_attribute a;
  a.name = name;
  a.type = NXRT_ATTR_FLOAT;
  a.f = v;
  return a;
}
nxrt_attribute attr_ints(const char* name, std::vector<int64_t> v) {
  nxrt_attribute a;
  a.name = name;
  a.type = NXRT_ATTR_INTS;
  a.ints = std::move(v);
  return a;
}

// A model: a graph plus the host data of its runtime inputs.
struct Model {
  conf::GraphBuilder gb;
  std::map<const nxrt_value*, HostTensor> feeds;
  Model() { gb.graph().opsets[""] = 17; }
  const nxrt_value* input(const std::string& name, std::vector<int64_t> dims, uint32_t seed) {
    auto* v = gb.value(name, NXRT_DTYPE_FLOAT32, dims);
    feeds[v] = HostTensor{NXRT_DTYPE_FLOAT32, dims, floats(numel(dims), seed)};
    gb.graph().inputs.push_back(v);
    return v;
  }
  const nxrt_value* weight(const std::string& name, std::vector<int64_t> dims, uint32_t seed) {
    auto data = floats(numel(dims), seed);
    auto* v = gb.constant(name, NXRT_DTYPE_FLOAT32, dims, data);
    feeds[v] = HostTensor{NXRT_DTYPE_FLOAT32, dims, data};
    return v;
  }
  const nxrt_value* value(const std::string& name, std::vector<int64_t> dims, nxrt_dtype t = NXRT_DTYPE_FLOAT32) {
    return gb.value(name, t, dims);
  }
  // 8-bit (or other) tensors from explicit bytes: a runtime input, or a constant.
  const nxrt_value* typed_input(const std::string& name, nxrt_dtype t, std::vector<int64_t> dims, std::vector<uint8_t> bytes) {
    auto* v = gb.value(name, t, dims);
    feeds[v] = HostTensor{t, dims, bytes};
    gb.graph().inputs.push_back(v);
    return v;
  }
  const nxrt_value* typed_constant(const std::string& name, nxrt_dtype t, std::vector<int64_t> dims, std::vector<uint8_t> bytes) {
    auto* v = gb.constant(name, t, dims, bytes);
    feeds[v] = HostTensor{t, dims, bytes};
    return v;
  }
  template <typename T>
  const nxrt_value* scalar(const std::string& name, nxrt_dtype t, T value) {
    std::vector<uint8_t> b(sizeof(T));
    std::memcpy(b.data(), &value, sizeof(T));
    return typed_constant(name, t, {}, b);
  }
  void output(const nxrt_value* v) { gb.graph().outputs.push_back(v); }
};

// A plugin instance with one session on the CPU device.
struct Instance {
  std::unique_ptr<conf::Plugin> plugin;
  std::unique_ptr<conf::Session> session;
  const nxrt_plugin_api& api() const { return plugin->api(); }
  nxrt_ep_session* raw() const { return session->raw(); }
};

std::unique_ptr<Instance> open_instance(bool with_session = true) {
  auto in = std::make_unique<Instance>();
  std::string err, stage;
  in->plugin = conf::Plugin::open(NXRT_CPU_PLUGIN, &err, &stage);
  REQUIRE_MESSAGE(in->plugin, stage << ": " << err);
  const std::string why = in->plugin->negotiate(4);
  REQUIRE_MESSAGE(why.empty(), why);
  REQUIRE((in->plugin->features() & NXRT_FEATURE_KERNEL_CACHE) != 0);
  REQUIRE((in->plugin->features() & NXRT_FEATURE_OFFLINE_COMPILE) != 0);
  if (with_session) {
    in->session = std::make_unique<conf::Session>(*in->plugin, 0);
    auto r = in->session->create({{"threads", "2"}});
    REQUIRE_MESSAGE(r.ok, r.str());
  }
  return in;
}

struct KernelHandle {
  const nxrt_plugin_api* api = nullptr;
  nxrt_kernel* k = nullptr;
  std::unique_ptr<nxrt_graph> view;
  ~KernelHandle() {
    if (k) api->kernel_release(k);
  }
};

// The claims of the model on this session.
std::vector<std::vector<size_t>> claims_of(Instance& in, Model& m) {
  nxrt_claim_sink sink;
  auto r = in.session->capability(m.gb.graph(), sink);
  REQUIRE_MESSAGE(r.ok, r.str());
  return sink.claims;
}

std::unique_ptr<KernelHandle> create(Instance& in, Model& m, const std::vector<size_t>& claim, nxrt_ep_session* s = nullptr) {
  auto h = std::make_unique<KernelHandle>();
  h->api = &in.api();
  h->view = m.gb.subgraph(claim);
  h->view->creating = true;
  auto r = conf::take(in.api().kernel_create(s ? s : in.raw(), h->view.get(), &h->k));
  h->view->creating = false;
  REQUIRE_MESSAGE(r.ok, r.str());
  REQUIRE(h->k);
  return h;
}

std::vector<uint8_t> export_blob(Instance& in, nxrt_kernel* k, conf::Result* result = nullptr) {
  std::vector<uint8_t> out;
  nxrt_blob_writer w{};
  w.struct_size = sizeof w;
  w.user = &out;
  w.write = [](void* user, const void* bytes, uint64_t size) -> nxrt_status* {
    auto* v = static_cast<std::vector<uint8_t>*>(user);
    v->insert(v->end(), static_cast<const uint8_t*>(bytes), static_cast<const uint8_t*>(bytes) + size);
    return nullptr;
  };
  auto r = conf::take(in.api().kernel_export(k, &w));
  if (result) *result = r;
  else REQUIRE_MESSAGE(r.ok, r.str());
  return out;
}

// A blob as the host maps it: NXRT_CACHE_BLOB_ALIGNMENT-aligned, alive until kernel_release.
struct Blob {
  explicit Blob(const std::vector<uint8_t>& b) : n(b.size()) {
    p = static_cast<uint8_t*>(std::aligned_alloc(NXRT_CACHE_BLOB_ALIGNMENT, (n / 4096 + 1) * 4096));
    if (n) std::memcpy(p, b.data(), n);
  }
  ~Blob() { std::free(p); }
  Blob(const Blob&) = delete;
  size_t n;
  uint8_t* p;
};

struct Imported {
  nxrt_cache_judgement j{};
  std::unique_ptr<KernelHandle> kernel;  // null unless OPTIMAL/USABLE
};
Imported import_blob(Instance& in, Model& m, const std::vector<size_t>& claim, const uint8_t* blob, size_t size) {
  Imported out;
  out.j.struct_size = sizeof out.j;
  auto h = std::make_unique<KernelHandle>();
  h->api = &in.api();
  h->view = m.gb.subgraph(claim);
  h->view->creating = true;
  auto r = conf::take(in.api().kernel_import(in.raw(), h->view.get(), blob, size, &out.j, &h->k));
  h->view->creating = false;
  REQUIRE_MESSAGE(r.ok, r.str());
  if (out.j.verdict == NXRT_CACHE_OPTIMAL || out.j.verdict == NXRT_CACHE_USABLE) {
    REQUIRE(h->k);
    out.kernel = std::move(h);
  } else {
    CHECK(h->k == nullptr);
    CHECK(std::strlen(out.j.reason) > 0);
  }
  return out;
}

std::vector<HostTensor> run(Instance& in, Model& m, KernelHandle& k) {
  std::vector<HostTensor> inputs;
  for (auto* v : k.view->inputs) inputs.push_back(m.feeds.at(v));
  conf::ComputeOptions o;
  o.view = k.view.get();
  auto res = conf::compute(*in.session, k.k, inputs, k.view->outputs.size(), o);
  REQUIRE_MESSAGE(res.status.ok, res.status.str());
  REQUIRE_MESSAGE(res.problem.empty(), res.problem);
  CHECK(res.violations.empty());
  return res.outputs;
}

uint64_t bytes_in_use(Instance& in) {
  nxrt_memory_stats s{};
  s.struct_size = sizeof s;
  auto r = conf::take(in.api().session_stats(in.raw(), &s));
  REQUIRE(r.ok);
  return s.bytes_in_use;
}

nxrt_cache_judgement check_fp(Instance& in, const std::string& fp) {
  nxrt_cache_judgement j{};
  j.struct_size = sizeof j;
  auto r = conf::take(in.api().cache_check(in.raw(), fp.c_str(), &j));
  REQUIRE_MESSAGE(r.ok, r.str());
  return j;
}

bool captured(const KernelHandle& k, const nxrt_value* v) { return k.view->captured.count(v) != 0; }

// The round trip of every claim of `m` (`expect_claims` claims, each exporting a blob).
void round_trip(Model& m, size_t expect_claims, const nxrt_value* weight) {
  auto a = open_instance();
  auto claims = claims_of(*a, m);
  REQUIRE(claims.size() == expect_claims);
  auto b = open_instance();  // a fresh plugin instance and session: nothing shared but the blob
  REQUIRE(claims_of(*b, m) == claims);
  const std::string fp = a->api().session_fingerprint(a->raw());
  CHECK(fp.rfind("cpu ", 0) == 0);
  CHECK(check_fp(*b, fp).verdict == NXRT_CACHE_OPTIMAL);
  for (auto& claim : claims) {
    const uint64_t before_create = bytes_in_use(*a);
    auto made = create(*a, m, claim);
    // kernel_create counts its packed buffers (so the import's zero growth below means something).
    CHECK(bytes_in_use(*a) > before_create);
    const auto want = run(*a, m, *made);
    if (weight) CHECK(captured(*made, weight));
    const auto bytes = export_blob(*a, made->k);
    REQUIRE(bytes.size() > 64);
    made.reset();

    Blob blob(bytes);
    const uint64_t before = bytes_in_use(*b);
    auto imp = import_blob(*b, m, claim, blob.p, blob.n);
    REQUIRE_MESSAGE(imp.j.verdict == NXRT_CACHE_OPTIMAL, imp.j.reason);
    // No packed copy: the session holds no more memory than before the import.
    CHECK(bytes_in_use(*b) == before);
    if (weight) CHECK(captured(*imp.kernel, weight));  // the host may free W; compute gets data = NULL
    const auto got = run(*b, m, *imp.kernel);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i].dims == want[i].dims);
      CHECK_MESSAGE(got[i].bytes == want[i].bytes, "output " << i << " differs after the round trip");
    }
    // The kernel reads its weights from the blob itself: zeroing the blob past its header
    // changes the result (the blob is the host's read-only mapping; here it is our copy).
    uint64_t header = 0;
    std::memcpy(&header, blob.p + 8, 8);
    REQUIRE(header < blob.n);
    std::memset(blob.p + header, 0, blob.n - header);
    const auto zeroed = run(*b, m, *imp.kernel);
    CHECK(zeroed[0].bytes != want[0].bytes);
  }
}

}  // namespace

TEST_CASE("Gemm: kernel_import gives bit-identical outputs without packing or copying") {
  for (int trans_b : {0, 1}) {
    CAPTURE(trans_b);
    Model m;
    auto* a = m.input("A", {5, 40}, 1);
    auto* w = m.weight("B", trans_b ? std::vector<int64_t>{70, 40} : std::vector<int64_t>{40, 70}, 2);
    auto* c = m.weight("C", {70}, 3);
    auto* y = m.value("Y", {5, 70});
    m.gb.node("Gemm", "", {a, w, c}, {y}, {attr_float("alpha", 0.5f), attr_int("transB", trans_b)});
    m.output(y);
    round_trip(m, 1, w);
  }
}

TEST_CASE("MatMul with a batched constant B round-trips") {
  Model m;
  auto* a = m.input("A", {3, 5, 16}, 4);
  auto* w = m.weight("B", {3, 16, 50}, 5);
  auto* y = m.value("Y", {3, 5, 50});
  m.gb.node("MatMul", "", {a, w}, {y});
  m.output(y);
  round_trip(m, 1, w);
}

TEST_CASE("Conv round-trips: 1x1, 3x3, grouped, depthwise, 1-D") {
  struct Case {
    const char* what;
    std::vector<int64_t> x, w;
    int64_t group;
    std::vector<int64_t> pads, strides;
    std::vector<int64_t> y;
  } cases[] = {
      {"1x1", {1, 8, 6, 6}, {12, 8, 1, 1}, 1, {0, 0, 0, 0}, {1, 1}, {1, 12, 6, 6}},
      {"3x3", {2, 4, 7, 7}, {6, 4, 3, 3}, 1, {1, 1, 1, 1}, {1, 1}, {2, 6, 7, 7}},
      {"3x3 stride 2", {1, 3, 9, 9}, {5, 3, 3, 3}, 1, {1, 1, 1, 1}, {2, 2}, {1, 5, 5, 5}},
      {"grouped", {1, 4, 6, 6}, {6, 2, 3, 3}, 2, {1, 1, 1, 1}, {1, 1}, {1, 6, 6, 6}},
      {"depthwise", {1, 8, 10, 10}, {8, 1, 3, 3}, 8, {1, 1, 1, 1}, {1, 1}, {1, 8, 10, 10}},
      {"1-D", {1, 3, 20}, {4, 3, 5}, 1, {2, 2}, {1}, {1, 4, 20}},
  };
  for (auto& c : cases) {
    CAPTURE(c.what);
    Model m;
    auto* x = m.input("X", c.x, 6);
    auto* w = m.weight("W", c.w, 7);
    auto* b = m.weight("Bias", {c.w[0]}, 8);
    auto* y = m.value("Y", c.y);
    m.gb.node("Conv", "", {x, w, b}, {y},
              {attr_int("group", c.group), attr_ints("pads", c.pads), attr_ints("strides", c.strides)});
    m.output(y);
    round_trip(m, 1, w);
  }
}

TEST_CASE("Conv with few output pixels keeps W^T in the blob too (the transposed path packs nothing at run time)") {
  struct Case {
    const char* what;
    std::vector<int64_t> x, w, pads, y;
  } cases[] = {
      {"1x1 over 7x7", {1, 128, 7, 7}, {256, 128, 1, 1}, {0, 0, 0, 0}, {1, 256, 7, 7}},
      {"3x3 over 7x7", {1, 32, 7, 7}, {128, 32, 3, 3}, {1, 1, 1, 1}, {1, 128, 7, 7}},  // thin: not Winograd
  };
  for (auto& c : cases) {
    CAPTURE(c.what);
    Model m;
    auto* x = m.input("X", c.x, 51);
    auto* w = m.weight("W", c.w, 52);
    auto* y = m.value("Y", c.y);
    m.gb.node("Conv", "", {x, w}, {y}, {attr_ints("pads", c.pads)});
    m.output(y);
    auto in = open_instance();
    auto claims = claims_of(*in, m);
    REQUIRE(claims.size() == 1);
    auto k = create(*in, m, claims[0]);
    const auto bytes = export_blob(*in, k->k);
    const std::string text(bytes.begin(), bytes.end());
    CHECK(text.find("w_t") != std::string::npos);  // the W^T buffer is declared
    round_trip(m, 1, w);
  }
}

TEST_CASE("Winograd convs keep their transformed weights in the blob: F(4x4,3x3) and F(2x2,3x3)") {
  // ctest also runs this test with NXRT_CPU_ISA=avx2; both ISAs run these two shapes so.
  struct Case {
    const char* what;
    const char* buffer;
    std::vector<int64_t> x, w, y;
  } cases[] = {
      {"F(4x4) over 16x16", "w_winograd", {1, 16, 16, 16}, {24, 16, 3, 3}, {1, 24, 16, 16}},
      // Above conv_winograd_loses_threaded's 2^24 multiply-adds: F(2x2) on any thread count.
      {"F(2x2) over 10x10", "w_winograd_2x2", {1, 256, 10, 10}, {96, 256, 3, 3}, {1, 96, 10, 10}},
      // 16 tiles: on AVX-512 the tiles along the lanes (U in 16-channel blocks), on AVX2 as rows.
      {"F(2x2) over 7x7", "w_winograd_2x2", {1, 256, 7, 7}, {160, 256, 3, 3}, {1, 160, 7, 7}},
  };
  for (auto& c : cases) {
    CAPTURE(c.what);
    Model m;
    auto* x = m.input("X", c.x, 53);
    auto* w = m.weight("W", c.w, 54);
    auto* y = m.value("Y", c.y);
    m.gb.node("Conv", "", {x, w}, {y}, {attr_ints("pads", {1, 1, 1, 1})});
    m.output(y);
    auto in = open_instance();
    auto claims = claims_of(*in, m);
    REQUIRE(claims.size() == 1);
    auto k = create(*in, m, claims[0]);
    const auto bytes = export_blob(*in, k->k);
    const std::string text(bytes.begin(), bytes.end());
    const bool f2x2 = std::string(c.buffer) == "w_winograd_2x2";
    CHECK(text.find(c.buffer) != std::string::npos);  // declared by that name
    CHECK((text.find("w_winograd_2x2") != std::string::npos) == f2x2);
    round_trip(m, 1, w);
  }
}

TEST_CASE("fused Conv groups round-trip: Conv+Relu and Conv+Add+Clip") {
  {
    Model m;
    auto* x = m.input("X", {1, 6, 8, 8}, 9);
    auto* w = m.weight("W", {10, 6, 3, 3}, 10);
    auto* b = m.weight("Bias", {10}, 11);
    auto* t = m.value("T", {1, 10, 8, 8});
    auto* y = m.value("Y", {1, 10, 8, 8});
    m.gb.node("Conv", "", {x, w, b}, {t}, {attr_ints("pads", {1, 1, 1, 1})});
    m.gb.node("Relu", "", {t}, {y});
    m.output(y);
    round_trip(m, 1, w);
  }
  {
    Model m;
    auto* x = m.input("X", {1, 8, 5, 5}, 12);
    auto* r = m.input("R", {1, 8, 5, 5}, 13);
    auto* w = m.weight("W", {8, 1, 3, 3}, 14);
    auto* t = m.value("T", {1, 8, 5, 5});
    auto* u = m.value("U", {1, 8, 5, 5});
    auto* y = m.value("Y", {1, 8, 5, 5});
    m.gb.node("Conv", "", {x, w}, {t}, {attr_ints("pads", {1, 1, 1, 1}), attr_int("group", 8)});
    m.gb.node("Add", "", {t, r}, {u});
    auto scalar = [&](const char* name, float v) {
      std::vector<uint8_t> b(4);
      std::memcpy(b.data(), &v, 4);
      auto* c = m.gb.constant(name, NXRT_DTYPE_FLOAT32, {}, b);
      m.feeds[c] = HostTensor{NXRT_DTYPE_FLOAT32, {}, b};
      return c;
    };
    m.gb.node("Clip", "", {u, scalar("lo", -0.25f), scalar("hi", 0.5f)}, {y});
    m.output(y);
    round_trip(m, 1, w);
  }
}

// Random bytes (8-bit tensors: any byte is a valid uint8 or int8).
std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = uint8_t(rng());
  return b;
}

// DequantizeLinear -> Conv -> QuantizeLinear with int8 weights bell-shaped over their range, as
// trained convs have them: on AVX2 without VNNI the split quads take them, so their choice and
// rest (q_split_quads, rest_index, rest_entries) go through the blob too. Returns the weights.
const nxrt_value* build_trained_conv(Model& m) {
  std::mt19937 rng(28);
  std::normal_distribution<double> bell(0.0, 30.0);
  std::vector<uint8_t> wb(32 * 64 * 9);
  for (auto& v : wb) v = uint8_t(int8_t(std::clamp(int(std::lround(bell(rng))), -128, 127)));
  auto* xq = m.typed_input("Xq", NXRT_DTYPE_UINT8, {1, 64, 7, 7}, random_bytes(64 * 49, 29));
  auto* wq = m.typed_constant("Wq", NXRT_DTYPE_INT8, {32, 64, 3, 3}, wb);
  auto* x = m.value("X", {1, 64, 7, 7});
  auto* w = m.value("W", {32, 64, 3, 3});
  auto* c = m.value("C", {1, 32, 7, 7});
  auto* y = m.value("Y", {1, 32, 7, 7}, NXRT_DTYPE_UINT8);
  m.gb.node("DequantizeLinear", "", {xq, m.scalar("x_scale", NXRT_DTYPE_FLOAT32, 0.02f), m.scalar("x_zp", NXRT_DTYPE_UINT8, uint8_t(7))}, {x});
  m.gb.node("DequantizeLinear", "", {wq, m.scalar("w_scale", NXRT_DTYPE_FLOAT32, 0.003f), m.scalar("w_zp", NXRT_DTYPE_INT8, int8_t(0))}, {w});
  m.gb.node("Conv", "", {x, w}, {c}, {attr_ints("pads", {1, 1, 1, 1})});
  m.gb.node("QuantizeLinear", "", {c, m.scalar("y_scale", NXRT_DTYPE_FLOAT32, 0.5f), m.scalar("y_zp", NXRT_DTYPE_UINT8, uint8_t(128))}, {y});
  m.output(y);
  return wq;
}

TEST_CASE("8-bit kernels round-trip their packed weights: QDQ Conv and MatMul groups, QLinearConv, MatMulInteger") {
  SUBCASE("DequantizeLinear -> Conv -> Relu -> QuantizeLinear, per-channel int8 weights") {
    Model m;
    auto* xq = m.typed_input("Xq", NXRT_DTYPE_UINT8, {1, 16, 6, 6}, random_bytes(16 * 36, 20));
    auto* wq = m.typed_constant("Wq", NXRT_DTYPE_INT8, {24, 16, 3, 3}, random_bytes(24 * 16 * 9, 21));
    std::vector<float> ws(24);
    for (size_t c = 0; c < ws.size(); ++c) ws[c] = 0.002f + 0.0001f * float(c);
    std::vector<uint8_t> wsb(ws.size() * 4);
    std::memcpy(wsb.data(), ws.data(), wsb.size());
    auto* w_scale = m.typed_constant("w_scale", NXRT_DTYPE_FLOAT32, {24}, wsb);
    auto* w_zp = m.typed_constant("w_zp", NXRT_DTYPE_INT8, {24}, std::vector<uint8_t>(24, 0));
    auto* x = m.value("X", {1, 16, 6, 6});
    auto* w = m.value("W", {24, 16, 3, 3});
    auto* c = m.value("C", {1, 24, 6, 6});
    auto* r = m.value("R", {1, 24, 6, 6});
    auto* y = m.value("Y", {1, 24, 6, 6}, NXRT_DTYPE_UINT8);
    m.gb.node("DequantizeLinear", "", {xq, m.scalar("x_scale", NXRT_DTYPE_FLOAT32, 0.02f), m.scalar("x_zp", NXRT_DTYPE_UINT8, uint8_t(120))}, {x});
    m.gb.node("DequantizeLinear", "", {wq, w_scale, w_zp}, {w}, {attr_int("axis", 0)});
    m.gb.node("Conv", "", {x, w}, {c}, {attr_ints("pads", {1, 1, 1, 1})});
    m.gb.node("Relu", "", {c}, {r});
    m.gb.node("QuantizeLinear", "", {r, m.scalar("y_scale", NXRT_DTYPE_FLOAT32, 0.05f), m.scalar("y_zp", NXRT_DTYPE_UINT8, uint8_t(0))}, {y});
    m.output(y);
    round_trip(m, 1, wq);
  }
  SUBCASE("DequantizeLinear -> Conv -> QuantizeLinear, weights as trained convs have them") {
    Model m;
    round_trip(m, 1, build_trained_conv(m));
  }
  SUBCASE("DequantizeLinear -> MatMul -> QuantizeLinear") {
    Model m;
    auto* aq = m.typed_input("Aq", NXRT_DTYPE_UINT8, {5, 40}, random_bytes(200, 22));
    auto* bq = m.typed_constant("Bq", NXRT_DTYPE_INT8, {40, 36}, random_bytes(40 * 36, 23));
    auto* a = m.value("A", {5, 40});
    auto* b = m.value("B", {40, 36});
    auto* p = m.value("P", {5, 36});
    auto* y = m.value("Y", {5, 36}, NXRT_DTYPE_UINT8);
    m.gb.node("DequantizeLinear", "", {aq, m.scalar("a_scale", NXRT_DTYPE_FLOAT32, 0.03f), m.scalar("a_zp", NXRT_DTYPE_UINT8, uint8_t(128))}, {a});
    m.gb.node("DequantizeLinear", "", {bq, m.scalar("b_scale", NXRT_DTYPE_FLOAT32, 0.01f), m.scalar("b_zp", NXRT_DTYPE_INT8, int8_t(0))}, {b});
    m.gb.node("MatMul", "", {a, b}, {p});
    m.gb.node("QuantizeLinear", "", {p, m.scalar("y_scale", NXRT_DTYPE_FLOAT32, 0.1f), m.scalar("y_zp", NXRT_DTYPE_UINT8, uint8_t(128))}, {y});
    m.output(y);
    round_trip(m, 1, bq);
  }
  SUBCASE("QLinearConv with uint8 weights and a nonzero weight zero point") {
    Model m;
    auto* x = m.typed_input("X", NXRT_DTYPE_UINT8, {1, 8, 5, 5}, random_bytes(200, 24));
    auto* w = m.typed_constant("W", NXRT_DTYPE_UINT8, {12, 8, 3, 3}, random_bytes(12 * 72, 25));
    auto* y = m.value("Y", {1, 12, 5, 5}, NXRT_DTYPE_UINT8);
    m.gb.node("QLinearConv", "",
              {x, m.scalar("xs", NXRT_DTYPE_FLOAT32, 0.02f), m.scalar("xz", NXRT_DTYPE_UINT8, uint8_t(100)), w,
               m.scalar("ws", NXRT_DTYPE_FLOAT32, 0.01f), m.scalar("wz", NXRT_DTYPE_UINT8, uint8_t(131)),
               m.scalar("ys", NXRT_DTYPE_FLOAT32, 0.2f), m.scalar("yz", NXRT_DTYPE_UINT8, uint8_t(128))},
              {y}, {attr_ints("pads", {1, 1, 1, 1})});
    m.output(y);
    round_trip(m, 1, w);
  }
  SUBCASE("MatMulInteger") {
    Model m;
    auto* a = m.typed_input("A", NXRT_DTYPE_INT8, {7, 24}, random_bytes(7 * 24, 26));
    auto* b = m.typed_constant("B", NXRT_DTYPE_INT8, {24, 20}, random_bytes(24 * 20, 27));
    auto* y = m.value("Y", {7, 20}, NXRT_DTYPE_INT32);
    m.gb.node("MatMulInteger", "", {a, b, m.scalar("az", NXRT_DTYPE_INT8, int8_t(3))}, {y});
    m.output(y);
    round_trip(m, 1, b);
  }
}

TEST_CASE("BatchNormalization with constant parameters round-trips its folded scale and shift") {
  for (int opset : {9, 15}) {
    CAPTURE(opset);
    Model m;
    m.gb.graph().opsets[""] = opset;
    auto* x = m.input("X", {2, 6, 5, 5}, 41);
    auto* scale = m.weight("scale", {6}, 42);
    auto* bias = m.weight("B", {6}, 43);
    auto* mean = m.weight("mean", {6}, 44);
    auto var_bytes = floats(6, 45);
    for (size_t i = 0; i < 6; ++i) {
      float v;
      std::memcpy(&v, &var_bytes[i * 4], 4);
      v = std::abs(v) + 0.1f;  // a variance
      std::memcpy(&var_bytes[i * 4], &v, 4);
    }
    auto* var = m.gb.constant("var", NXRT_DTYPE_FLOAT32, {6}, var_bytes);
    m.feeds[var] = HostTensor{NXRT_DTYPE_FLOAT32, {6}, var_bytes};
    auto* y = m.value("Y", {2, 6, 5, 5});
    m.gb.node("BatchNormalization", "", {x, scale, bias, mean, var}, {y}, {attr_float("epsilon", 1e-3f)});
    m.output(y);
    round_trip(m, 1, scale);
  }
}

TEST_CASE("blobs of another op or shape, and hostile blobs, are verdicts with reasons") {
  Model m;
  auto* a = m.input("A", {4, 32}, 1);
  auto* w = m.weight("B", {32, 48}, 2);
  auto* w2 = m.weight("B2", {32, 24}, 3);
  auto* y = m.value("Y", {4, 48});
  auto* y2 = m.value("Y2", {4, 24});
  auto* y3 = m.value("Y3", {4, 48});
  m.gb.node("Gemm", "", {a, w}, {y});
  m.gb.node("Gemm", "", {a, w2}, {y2});
  m.gb.node("MatMul", "", {a, w}, {y3});
  m.output(y);
  m.output(y2);
  m.output(y3);
  auto in = open_instance();
  auto claims = claims_of(*in, m);
  REQUIRE(claims.size() == 3);
  auto made = create(*in, m, claims[0]);
  const auto good = export_blob(*in, made->k);
  {
    Blob blob(good);
    auto other_shape = import_blob(*in, m, claims[1], blob.p, blob.n);
    CHECK(other_shape.j.verdict == NXRT_CACHE_RECOMPILE);
    CHECK(std::string(other_shape.j.reason).find("N=48") != std::string::npos);
    auto other_op = import_blob(*in, m, claims[2], blob.p, blob.n);
    CHECK(other_op.j.verdict == NXRT_CACHE_RECOMPILE);
    CHECK(std::string(other_op.j.reason).find("MatMul") != std::string::npos);
  }
  auto rejected = [&](const std::vector<uint8_t>& bytes) {
    Blob blob(bytes);
    auto r = import_blob(*in, m, claims[0], bytes.empty() ? nullptr : blob.p, blob.n);
    return r.j.verdict == NXRT_CACHE_UNSUPPORTED || r.j.verdict == NXRT_CACHE_RECOMPILE;
  };
  CHECK(rejected({}));
  for (size_t n = 64; n < good.size(); n += 64) {
    CAPTURE(n);
    CHECK(rejected(std::vector<uint8_t>(good.begin(), good.begin() + long(n))));
  }
  std::mt19937 rng(5);
  for (int t = 0; t < 50; ++t) {
    std::vector<uint8_t> junk(size_t(rng() % 9000));
    for (auto& byte : junk) byte = uint8_t(rng());
    CHECK(rejected(junk));
  }
  uint64_t header = 0;
  std::memcpy(&header, good.data() + 8, 8);
  for (size_t i = 0; i < header; ++i) {
    auto bad = good;
    bad[i] ^= 0x10;
    CAPTURE(i);
    CHECK(rejected(bad));
  }
  // A kernel with nothing packed (B not constant) exports nothing.
  Model m2;
  auto* p = m2.input("P", {4, 8}, 1);
  auto* q = m2.input("Q", {8, 4}, 2);
  auto* z = m2.value("Z", {4, 4});
  m2.gb.node("MatMul", "", {p, q}, {z});
  m2.output(z);
  auto plain = create(*in, m2, claims_of(*in, m2).at(0));
  conf::Result r;
  export_blob(*in, plain->k, &r);
  CHECK(!r.ok);
  CHECK(r.code == NXRT_UNSUPPORTED);
}

TEST_CASE("fingerprints: identical OPTIMAL, another ISA USABLE, another layout or version RECOMPILE, junk UNSUPPORTED") {
  auto in = open_instance();
  const std::string own = in->api().session_fingerprint(in->raw());
  INFO(own);
  CHECK(own.find("isa=") != std::string::npos);
  CHECK(own.find("layout=mr8,nr48") != std::string::npos);
  CHECK(check_fp(*in, own).verdict == NXRT_CACHE_OPTIMAL);
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = own;
    auto at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  // `fp` with field `key` set to `value`.
  auto with_field = [](std::string fp, const std::string& key, const std::string& value) {
    const auto at = fp.find(key + "=");
    REQUIRE(at != std::string::npos);
    const auto end = fp.find(';', at);
    return fp.replace(at, (end == std::string::npos ? fp.size() : end) - at, key + "=" + value);
  };
  const bool avx512 = own.find("isa=avx512f") != std::string::npos;
  const std::string other_isa = with_field(with_field(own, "isa", avx512 ? "generic" : "avx512f"), "gemm",
                                           avx512 ? "generic" : "avx512f-8x48");
  auto j = check_fp(*in, other_isa);
  CHECK(j.verdict == NXRT_CACHE_USABLE);
  CHECK(std::string(j.reason).find("avx512f") != std::string::npos);
  j = check_fp(*in, replace("nr48", "nr32"));
  CHECK(j.verdict == NXRT_CACHE_RECOMPILE);
  CHECK(std::string(j.reason).find("nr32") != std::string::npos);
  CHECK(std::string(j.reason).find("nr48") != std::string::npos);
  j = check_fp(*in, replace("format=1", "format=9"));
  CHECK(j.verdict == NXRT_CACHE_RECOMPILE);
  j = check_fp(*in, "cpu 0.0.1" + own.substr(own.find(';')));
  CHECK(j.verdict == NXRT_CACHE_RECOMPILE);
  CHECK(std::string(j.reason).find("0.0.1") != std::string::npos);
  for (const char* junk : {"", "vulkan 0.3.0; subgroup=8", "cpu", "cpu 1; isa", "\xff\xfe"}) {
    j = check_fp(*in, junk);
    CHECK(j.verdict == NXRT_CACHE_UNSUPPORTED);
  }
}

namespace {
nxrt_status* offline(Instance& in, const std::vector<std::pair<std::string, std::string>>& props, nxrt_ep_session** out) {
  std::vector<nxrt_property> p(props.size());
  std::vector<const nxrt_property*> ptrs;
  for (size_t i = 0; i < props.size(); ++i) {
    p[i].struct_size = sizeof(nxrt_property);
    p[i].key = props[i].first.c_str();
    p[i].value = props[i].second.c_str();
    ptrs.push_back(&p[i]);
  }
  return in.api().session_create_offline(in.plugin->instance(), ptrs.data(), ptrs.size(), nullptr, 0, out);
}
}  // namespace

TEST_CASE("offline sessions pack for a described CPU; the blobs import where that CPU runs") {
  auto in = open_instance();
  const std::string own = in->api().session_fingerprint(in->raw());
  // This device's own description gives this session's fingerprint.
  nxrt_device_info info{};
  info.struct_size = sizeof info;
  REQUIRE(conf::take(in->api().device_info(in->plugin->instance(), 0, &info)).ok);
  std::vector<std::pair<std::string, std::string>> props = {{"kind", "cpu"}, {"name", info.name}};
  for (size_t i = 0; i < info.property_count; ++i) props.push_back({info.properties[i]->key, info.properties[i]->value});
  nxrt_ep_session* s = nullptr;
  REQUIRE(conf::take(offline(*in, props, &s)).ok);
  CHECK(std::string(in->api().session_fingerprint(s)) == own);
  in->api().session_release(s);

  // Another ISA: a USABLE fingerprint here, kernels identical to this CPU's.
  s = nullptr;
  const char* target = own.find("isa=avx512f") != std::string::npos ? "generic" : "avx512f";
  REQUIRE(conf::take(offline(*in, {{"kind", "cpu"}, {"name", "cpu"}, {"isa", target}}, &s)).ok);
  const std::string fp = in->api().session_fingerprint(s);
  CHECK(fp.find(std::string("isa=") + target) != std::string::npos);
  CHECK(check_fp(*in, fp).verdict == NXRT_CACHE_USABLE);
  void* mem = nullptr;
  auto r = conf::take(in->api().memory_alloc(s, NXRT_MEMORY_DEVICE, 64, 64, &mem));
  CHECK(!r.ok);
  CHECK(r.code == NXRT_UNSUPPORTED);

  Model m;
  auto* x = m.input("X", {1, 4, 6, 6}, 21);
  auto* w = m.weight("W", {5, 4, 3, 3}, 22);
  auto* y = m.value("Y", {1, 5, 4, 4});
  m.gb.node("Conv", "", {x, w}, {y});
  m.output(y);
  auto claims = claims_of(*in, m);
  REQUIRE(claims.size() == 1);
  std::vector<uint8_t> bytes;
  {
    auto k = create(*in, m, claims[0], s);
    bytes = export_blob(*in, k->k);
  }
  in->api().session_release(s);
  auto here = create(*in, m, claims[0]);
  const auto want = run(*in, m, *here);
  Blob blob(bytes);
  auto imp = import_blob(*in, m, claims[0], blob.p, blob.n);
  REQUIRE(imp.kernel);
  CHECK(run(*in, m, *imp.kernel)[0].bytes == want[0].bytes);

  // An ISA this build cannot pack for, another kind of device, no ISA at all.
  s = nullptr;
  r = conf::take(offline(*in, {{"kind", "cpu"}, {"name", "cpu"}, {"isa", "neon"}}, &s));
  CHECK(r.code == NXRT_UNSUPPORTED);
  CHECK(r.message.find("neon") != std::string::npos);
  r = conf::take(offline(*in, {{"kind", "gpu"}, {"name", "gpu"}, {"isa", "avx2"}}, &s));
  CHECK(r.code == NXRT_UNSUPPORTED);
  r = conf::take(offline(*in, {{"kind", "cpu"}, {"name", "cpu"}}, &s));
  CHECK(r.code == NXRT_INVALID_ARGUMENT);
  CHECK(s == nullptr);
}

TEST_CASE("importing a large Gemm does no packing (times printed, not asserted: speed is the benchmarks' job)") {
  Model m;
  auto* a = m.input("A", {2, 1024}, 31);
  auto* w = m.weight("B", {1024, 2048}, 32);  // 8 MB of weights to pack
  auto* y = m.value("Y", {2, 2048});
  m.gb.node("Gemm", "", {a, w}, {y});
  m.output(y);
  auto in = open_instance();
  auto claims = claims_of(*in, m);
  REQUIRE(claims.size() == 1);
  using clock = std::chrono::steady_clock;
  double create_s = 1e9, import_s = 1e9;
  std::vector<uint8_t> bytes;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = clock::now();
    auto k = create(*in, m, claims[0]);
    create_s = std::min(create_s, std::chrono::duration<double>(clock::now() - t0).count());
    if (bytes.empty()) bytes = export_blob(*in, k->k);
  }
  Blob blob(bytes);
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = clock::now();
    auto imp = import_blob(*in, m, claims[0], blob.p, blob.n);
    import_s = std::min(import_s, std::chrono::duration<double>(clock::now() - t0).count());
    REQUIRE(imp.kernel);
  }
  MESSAGE("Gemm 1024x2048: kernel_create " << create_s * 1e3 << " ms, kernel_import " << import_s * 1e3 << " ms");
}

// A blob whose rest entries or tap order were changed after export (the buffers are the host's
// to checksum, the plugin does not read them at import otherwise) would make the split kernel
// read outside its B slice or im2col outside x: the import checks what the kernel will index
// and refuses the blob (UNSUPPORTED, so the host makes the kernel again) with the reason.
TEST_CASE("a split conv's blob with a rest entry outside its K block or a broken tap order is refused, not run") {
  Model m;
  build_trained_conv(m);
  auto in = open_instance();
  auto claims = claims_of(*in, m);
  REQUIRE(claims.size() == 1);
  auto made = create(*in, m, claims[0]);
  const auto good = export_blob(*in, made->k);
  const struct {
    const char* buffer;
    uint32_t first;  // the value written over the buffer's first element
    const char* reason;
  } cases[] = {{"rest_entries", 1u << 30, "outside its K block"}, {"q_k_order", 64 * 9, "not a permutation"}};
  for (const auto& c : cases) {
    const std::string name = c.buffer;
    const auto at = std::search(good.begin(), good.end(), name.begin(), name.end());
    if (at == good.end()) return;  // VNNI or the pairs on this CPU: no split in the blob
    // After the name: u32 element size, u32 0, u64 count, u64 offset.
    uint64_t count = 0, offset = 0;
    const size_t field = size_t(at - good.begin()) + name.size();
    std::memcpy(&count, good.data() + field + 8, 8);
    std::memcpy(&offset, good.data() + field + 16, 8);
    REQUIRE(count > 0);
    REQUIRE(offset + 4 <= good.size());
    auto bad = good;
    std::memcpy(bad.data() + offset, &c.first, 4);
    Blob blob(bad);
    auto imp = import_blob(*in, m, claims[0], blob.p, blob.n);
    CAPTURE(name);
    CHECK(imp.j.verdict == NXRT_CACHE_UNSUPPORTED);
    INFO(imp.j.reason);
    CHECK(std::string(imp.j.reason).find(c.reason) != std::string::npos);
  }
}
