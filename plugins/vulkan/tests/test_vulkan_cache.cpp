// ABI 2.4 compiled-kernel cache of the Vulkan plugin, through its C table (the
// conformance mini host loads libnxrt_ep_vulkan.so and serves the host services):
// fingerprints of an opened device and of its description, offline sessions, export
// from an offline session and import into a real one, hostile blobs.
// Cases needing a device SKIP without one; the offline cases need none. Run with
// VK_DRIVER_FILES=/nonexistent and NXRT_EXPECT_NO_DRIVER=1 (ctest
// vulkan_cache_no_driver), the offline case also proves no driver library was loaded.
#include "doctest_skip.hpp"

#include "kernel_blob.hpp"
#include "minihost.hpp"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

namespace {

using conf::GraphBuilder;
using conf::HostTensor;
using Props = std::map<std::string, std::string>;

conf::Plugin& plugin() {
  static std::unique_ptr<conf::Plugin> p = [] {
    std::string err, stage;
    auto p = conf::Plugin::open(NXRT_VK_PLUGIN, &err, &stage);
    if (!p) {
      std::fprintf(stderr, "cannot open %s: %s (%s)\n", NXRT_VK_PLUGIN, err.c_str(), stage.c_str());
      std::exit(1);
    }
    const std::string e = p->negotiate(4);
    if (!e.empty()) {
      std::fprintf(stderr, "negotiation failed: %s\n", e.c_str());
      std::exit(1);
    }
    return p;
  }();
  return *p;
}
const nxrt_plugin_api& api() { return plugin().api(); }

uint32_t device_count() {
  uint32_t n = 0;
  auto r = conf::take(api().device_count(plugin().instance(), &n));
  REQUIRE(r.ok);
  return n;
}

// A device's description flattened as the host passes it to session_create_offline.
Props describe(uint32_t index) {
  nxrt_device_info info{};
  info.struct_size = sizeof info;
  REQUIRE(conf::take(api().device_info(plugin().instance(), index, &info)).ok);
  Props p;
  p["kind"] = info.kind == NXRT_DEVICE_GPU ? "gpu" : info.kind == NXRT_DEVICE_CPU ? "cpu" : "other";
  p["name"] = info.name;
  p["vendor"] = info.vendor ? info.vendor : "";
  p["vendor_id"] = std::to_string(info.vendor_id);
  p["device_id"] = std::to_string(info.device_id);
  p["memory_bytes"] = std::to_string(info.memory_bytes);
  p["host_addressable"] = info.host_addressable ? "1" : "0";
  for (uint32_t i = 0; i < info.property_count; ++i) p[info.properties[i]->key] = info.properties[i]->value;
  return p;
}

// The checked-in description (tests/data/lavapipe_device.json): one flat JSON object of
// strings, as `nxrt plugins --json` printed lavapipe's device and the host flattens it.
Props lavapipe_json() {
  std::ifstream f(NXRT_VK_LAVAPIPE_JSON);
  REQUIRE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  Props p;
  size_t i = 0;
  auto str = [&]() {
    std::string out;
    REQUIRE(s.at(i) == '"');
    for (++i; s.at(i) != '"'; ++i) {
      if (s[i] == '\\') ++i;
      out += s.at(i);
    }
    ++i;
    return out;
  };
  auto ws = [&] {
    while (i < s.size() && std::isspace(uint8_t(s[i]))) ++i;
  };
  ws();
  REQUIRE(s.at(i++) == '{');
  for (;;) {
    ws();
    if (s.at(i) == '}') break;
    std::string k = str();
    ws();
    REQUIRE(s.at(i++) == ':');
    ws();
    p[k] = str();
    ws();
    if (s.at(i) == ',') ++i;
  }
  return p;
}

// The description of lavapipe: from the device when one is open, else the checked-in one.
Props lavapipe_description() { return device_count() ? describe(0) : lavapipe_json(); }

struct RawSession {
  nxrt_ep_session* s = nullptr;
  ~RawSession() {
    if (s) api().session_release(s);
  }
};

conf::Result offline(const Props& d, RawSession& out) {
  std::vector<nxrt_property> props;
  props.reserve(d.size());
  for (auto& [k, v] : d) props.push_back({sizeof(nxrt_property), k.c_str(), v.c_str()});
  std::vector<const nxrt_property*> ptrs;
  for (auto& p : props) ptrs.push_back(&p);
  return conf::take(api().session_create_offline(plugin().instance(), ptrs.data(), ptrs.size(), nullptr, 0, &out.s));
}

std::string fingerprint(nxrt_ep_session* s) { return api().session_fingerprint(s); }

nxrt_cache_judgement check(nxrt_ep_session* s, const std::string& fp) {
  nxrt_cache_judgement j{};
  j.struct_size = sizeof j;
  REQUIRE(conf::take(api().cache_check(s, fp.c_str(), &j)).ok);
  return j;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
std::vector<float> randv(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}
nxrt_attribute attr_ints(const char* name, std::vector<int64_t> v) {
  nxrt_attribute a;
  a.name = name;
  a.type = NXRT_ATTR_INTS;
  a.ints = std::move(v);
  return a;
}
nxrt_attribute attr_int(const char* name, int64_t v) {
  nxrt_attribute a;
  a.name = name;
  a.type = NXRT_ATTR_INT;
  a.i = v;
  return a;
}

// One test model: a graph claimed as one group, and its inputs.
struct Model {
  std::string name;
  GraphBuilder b;
  std::vector<HostTensor> inputs;
  size_t outputs = 1;
};

void add_input(Model& m, const char* name, std::vector<int64_t> dims, unsigned seed, std::vector<const nxrt_value*>& vals) {
  int64_t n = 1;
  for (auto d : dims) n *= d;
  vals.push_back(m.b.value(name, NXRT_DTYPE_FLOAT32, dims));
  m.inputs.push_back({NXRT_DTYPE_FLOAT32, dims, f32_bytes(randv(size_t(n), seed))});
}

std::vector<std::unique_ptr<Model>> models() {
  std::vector<std::unique_ptr<Model>> out;
  {  // MatMul, large enough for the 64x64 tile class
    auto m = std::make_unique<Model>();
    m->name = "MatMul";
    std::vector<const nxrt_value*> in;
    add_input(*m, "A", {96, 80}, 1, in);
    add_input(*m, "B", {80, 72}, 2, in);
    auto y = m->b.value("Y", NXRT_DTYPE_FLOAT32, {96, 72});
    m->b.node("MatMul", "", in, {y});
    m->b.graph().inputs = in;
    m->b.graph().outputs = {y};
    out.push_back(std::move(m));
  }
  {  // Conv + Relu: fused into the implicit-GEMM / direct conv kernel
    auto m = std::make_unique<Model>();
    m->name = "Conv+Relu";
    std::vector<const nxrt_value*> in;
    add_input(*m, "X", {1, 3, 10, 10}, 3, in);
    add_input(*m, "W", {8, 3, 3, 3}, 4, in);
    add_input(*m, "Bias", {8}, 5, in);
    auto c = m->b.value("C", NXRT_DTYPE_FLOAT32, {1, 8, 10, 10});
    auto y = m->b.value("Y", NXRT_DTYPE_FLOAT32, {1, 8, 10, 10});
    m->b.node("Conv", "", in, {c}, {attr_ints("pads", {1, 1, 1, 1}), attr_ints("kernel_shape", {3, 3})});
    m->b.node("Relu", "", {c}, {y});
    m->b.graph().inputs = in;
    m->b.graph().outputs = {y};
    out.push_back(std::move(m));
  }
  {  // an elementwise group: Add -> Mul -> Sigmoid in one command buffer
    auto m = std::make_unique<Model>();
    m->name = "Add+Mul+Sigmoid";
    std::vector<const nxrt_value*> in;
    add_input(*m, "A", {4, 33}, 6, in);
    add_input(*m, "B", {33}, 7, in);
    add_input(*m, "C", {4, 33}, 8, in);
    auto s = m->b.value("S", NXRT_DTYPE_FLOAT32, {4, 33});
    auto p = m->b.value("P", NXRT_DTYPE_FLOAT32, {4, 33});
    auto y = m->b.value("Y", NXRT_DTYPE_FLOAT32, {4, 33});
    m->b.node("Add", "", {in[0], in[1]}, {s});
    m->b.node("Mul", "", {s, in[2]}, {p});
    m->b.node("Sigmoid", "", {p}, {y});
    m->b.graph().inputs = in;
    m->b.graph().outputs = {y};
    out.push_back(std::move(m));
  }
  {  // Softmax over the last axis
    auto m = std::make_unique<Model>();
    m->name = "Softmax";
    std::vector<const nxrt_value*> in;
    add_input(*m, "X", {5, 130}, 9, in);
    auto y = m->b.value("Y", NXRT_DTYPE_FLOAT32, {5, 130});
    m->b.node("Softmax", "", in, {y}, {attr_int("axis", -1)});
    m->b.graph().inputs = in;
    m->b.graph().outputs = {y};
    out.push_back(std::move(m));
  }
  for (auto& m : out) m->b.graph().opsets[""] = 17;
  return out;
}

// get_capability on `s`: the claims (node index lists) and refusals.
std::string claims_of(nxrt_ep_session* s, const nxrt_graph& g) {
  nxrt_claim_sink sink;
  sink.graph = &g;
  sink.features = plugin().features();
  REQUIRE(conf::take(api().get_capability(s, &g, &sink)).ok);
  std::string out;
  for (auto& c : sink.claims) {
    out += "[";
    for (size_t i : c) out += std::to_string(i) + " ";
    out += "]";
  }
  for (auto& [i, r] : sink.refusals) out += "refused " + std::to_string(i) + ":" + r.second + ";";
  return out;
}

std::vector<size_t> all_nodes(const Model& m) {
  std::vector<size_t> idx;
  for (auto* n : m.b.graph().nodes) idx.push_back(n->index);
  return idx;
}

struct Kernel {
  nxrt_kernel* k = nullptr;
  ~Kernel() {
    if (k) api().kernel_release(k);
  }
};

std::vector<uint8_t> export_blob(nxrt_kernel* k) {
  std::vector<uint8_t> out;
  nxrt_blob_writer w{};
  w.struct_size = sizeof w;
  w.user = &out;
  w.write = [](void* user, const void* bytes, uint64_t size) -> nxrt_status* {
    auto* v = static_cast<std::vector<uint8_t>*>(user);
    v->insert(v->end(), static_cast<const uint8_t*>(bytes), static_cast<const uint8_t*>(bytes) + size);
    return nullptr;
  };
  auto r = conf::take(api().kernel_export(k, &w));
  REQUIRE_MESSAGE(r.ok, r.str());
  return out;
}

// Blobs as the host hands them over: NXRT_CACHE_BLOB_ALIGNMENT-aligned.
struct AlignedBlob {
  void* p = nullptr;
  size_t n = 0;
  explicit AlignedBlob(const std::vector<uint8_t>& b) : n(b.size()) {
    p = std::aligned_alloc(NXRT_CACHE_BLOB_ALIGNMENT, (b.size() / NXRT_CACHE_BLOB_ALIGNMENT + 1) * NXRT_CACHE_BLOB_ALIGNMENT);
    if (!b.empty()) std::memcpy(p, b.data(), b.size());
  }
  ~AlignedBlob() { std::free(p); }
};

nxrt_cache_judgement import(nxrt_ep_session* s, const nxrt_graph& sub, const std::vector<uint8_t>& blob, Kernel& out) {
  // A kernel may keep pointers into its blob until it is released: blobs stay for the run.
  static std::vector<std::unique_ptr<AlignedBlob>> kept;
  kept.push_back(std::make_unique<AlignedBlob>(blob));
  nxrt_cache_judgement j{};
  j.struct_size = sizeof j;
  auto r = conf::take(api().kernel_import(s, &sub, kept.back()->p, kept.back()->n, &j, &out.k));
  REQUIRE_MESSAGE(r.ok, r.str());
  return j;
}

bool driver_library_loaded() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("/libvulkan_") != std::string::npos) return true;  // an ICD (libvulkan_lvp.so, ...)
  return false;
}

}  // namespace

TEST_CASE("offline: a session for lavapipe's description gives the fingerprint and claims of lavapipe") {
  const bool expect_no_driver = std::getenv("NXRT_EXPECT_NO_DRIVER") != nullptr;
  if (expect_no_driver) {
    CHECK(device_count() == 0);
    CHECK(std::string(api().no_device_reason(plugin().instance())) != "");
  }
  REQUIRE((plugin().features() & NXRT_FEATURE_OFFLINE_COMPILE) != 0);
  REQUIRE((plugin().features() & NXRT_FEATURE_KERNEL_CACHE) != 0);
  const Props desc = lavapipe_description();
  RawSession off;
  auto r = offline(desc, off);
  REQUIRE_MESSAGE(r.ok, r.str());
  const std::string fp = fingerprint(off.s);
  MESSAGE("offline fingerprint: " << fp);
  CHECK(fp.find("subgroup=" + desc.at("vulkan.subgroup_size") + ";") != std::string::npos);
  CHECK(check(off.s, fp).verdict == NXRT_CACHE_OPTIMAL);

  // Kernels of the offline session export (and never run).
  auto ms = models();
  for (auto& m : ms) {
    CAPTURE(m->name);
    CHECK(claims_of(off.s, m->b.graph()) == "[" + [&] {
      std::string s;
      for (size_t i : all_nodes(*m)) s += std::to_string(i) + " ";
      return s;
    }() + "]");
    auto sub = m->b.subgraph(all_nodes(*m));
    Kernel k;
    REQUIRE(conf::take(api().kernel_create(off.s, sub.get(), &k.k)).ok);
    auto blob = export_blob(k.k);
    CHECK(blob == export_blob(k.k));  // deterministic
    // The blob lists the pipelines of the claim's static shapes (shader + specialization).
    auto rb = nxrt::vk::read_blob(blob);
    REQUIRE(rb.choices.pipelines);
    CHECK(!rb.choices.pipelines->empty());
    CHECK(rb.driver_cache.empty());  // an offline session has no driver
    if (m->name == "MatMul") {
      REQUIRE(rb.choices.pipelines->size() == 1);
      CHECK(rb.choices.pipelines->at(0).shader == nxrt::vk::Shader::matmul);
      CHECK(rb.choices.pipelines->at(0).spec == std::vector<uint32_t>{64, 64, 64, 8, 8, 8, 0});  // 64x64 tiles, no activation
    }
    if (m->name == "Conv+Relu") CHECK(rb.choices.fused.size() == 1);  // Relu folded into the Conv
  }
  if (expect_no_driver) {
    CHECK_FALSE(driver_library_loaded());
    return;  // what this run is for: no device, no driver, and the offline path works
  }

  if (device_count() == 0) {
    NXRT_SKIP_CASE("no Vulkan device: the offline fingerprint was not compared with an opened lavapipe");
  }
  if (desc.at("name").find("llvmpipe") == std::string::npos) {
    NXRT_SKIP_CASE("device 0 is not lavapipe: the comparison needs lavapipe");
  }
  conf::Session real(plugin(), 0);
  REQUIRE(real.create().ok);
  CHECK(fingerprint(real.raw()) == fp);
  CHECK(check(real.raw(), fp).verdict == NXRT_CACHE_OPTIMAL);
  for (auto& m : ms) CHECK(claims_of(real.raw(), m->b.graph()) == claims_of(off.s, m->b.graph()));
  // The checked-in description (what the no-driver run compiles for) still loads; it may be
  // another lavapipe build's.
  const Props file = lavapipe_json();
  RawSession from_file;
  REQUIRE(offline(file, from_file).ok);
  if (fingerprint(from_file.s) != fp)
    MESSAGE("tests/data/lavapipe_device.json describes another lavapipe build: " << fingerprint(from_file.s));
}

TEST_CASE("offline: another subgroup size is RECOMPILE naming it and both values") {
  Props desc = lavapipe_description();
  const std::string own = desc.at("vulkan.subgroup_size");
  REQUIRE(own != "32");
  RawSession here;
  REQUIRE(offline(desc, here).ok);
  desc["vulkan.subgroup_size"] = "32";
  desc["name"] = "NVIDIA H200";
  RawSession other;
  REQUIRE(offline(desc, other).ok);
  auto j = check(here.s, fingerprint(other.s));
  CHECK(j.verdict == NXRT_CACHE_RECOMPILE);
  const std::string reason = j.reason;
  MESSAGE(reason);
  CHECK(reason.find("subgroup size 32") != std::string::npos);
  CHECK(reason.find("has " + own) != std::string::npos);
  CHECK(reason.find("NVIDIA H200") != std::string::npos);

  // Driver version only: the SPIR-V and choices hold.
  desc = lavapipe_description();
  const std::string other_driver = desc.at("vulkan.driver_version") == "1" ? "2" : "1";
  desc["vulkan.driver_version"] = other_driver;
  RawSession drv;
  REQUIRE(offline(desc, drv).ok);
  j = check(here.s, fingerprint(drv.s));
  CHECK(j.verdict == NXRT_CACHE_USABLE);
  CHECK(std::string(j.reason).find("driver version " + other_driver) != std::string::npos);
  // Another limit a choice reads.
  desc = lavapipe_description();
  desc["vulkan.max_storage_buffer_range"] = "65536";
  RawSession lim;
  REQUIRE(offline(desc, lim).ok);
  j = check(here.s, fingerprint(lim.s));
  CHECK(j.verdict == NXRT_CACHE_RECOMPILE);
  CHECK(std::string(j.reason).find("max storage buffer range 65536") != std::string::npos);
  // Not a fingerprint of this plugin.
  for (const char* junk : {"", "cpu 0.1.0; isa=avx2", "vulkan 0.3.0; blob=9; name=x", "vulkan ; name="}) {
    CAPTURE(junk);
    j = check(here.s, junk);
    CHECK(j.verdict == NXRT_CACHE_UNSUPPORTED);
    CHECK(std::string(j.reason) != "");
  }
}

TEST_CASE("offline: a missing or malformed description key is INVALID_ARGUMENT naming it") {
  const Props good = lavapipe_description();
  for (const char* key : {"vulkan.subgroup_size", "vulkan.pipeline_cache_uuid", "vulkan.vendor_id", "name"}) {
    CAPTURE(key);
    Props d = good;
    d.erase(key);
    RawSession s;
    auto r = offline(d, s);
    CHECK_FALSE(r.ok);
    CHECK(r.code == NXRT_INVALID_ARGUMENT);
    CHECK(r.message.find(key) != std::string::npos);
  }
  for (auto [key, bad] : std::vector<std::pair<const char*, const char*>>{{"vulkan.subgroup_size", "eight"},
                                                                           {"vulkan.max_workgroup_size", "1024,1024"},
                                                                           {"vulkan.pipeline_cache_uuid", "zz"},
                                                                           {"vulkan.storage_buffer_16bit", "yes"},
                                                                           {"vulkan.vendor_id", "65541"}}) {
    CAPTURE(key);
    Props d = good;
    d[key] = bad;
    RawSession s;
    auto r = offline(d, s);
    CHECK(r.code == NXRT_INVALID_ARGUMENT);
    CHECK(r.message.find(key) != std::string::npos);
  }
  // An offline session answers only what compile needs.
  RawSession s;
  REQUIRE(offline(good, s).ok);
  void* h = nullptr;
  auto r = conf::take(api().memory_alloc(s.s, NXRT_MEMORY_DEVICE, 256, 64, &h));
  CHECK(r.code == NXRT_UNSUPPORTED);
}

TEST_CASE("hostile blobs are rejected by the reader with a reason, never a crash") {
  // The blob of an offline MatMul kernel, mangled; read_blob is what kernel_import runs first.
  auto ms = models();
  const Props desc = lavapipe_description();
  RawSession off;
  REQUIRE(offline(desc, off).ok);
  auto sub = ms[0]->b.subgraph(all_nodes(*ms[0]));
  Kernel k;
  REQUIRE(conf::take(api().kernel_create(off.s, sub.get(), &k.k)).ok);
  const auto blob = export_blob(k.k);
  auto verdict = [](const std::vector<uint8_t>& b) {
    try {
      nxrt::vk::read_blob(b);
      return nxrt_cache_verdict(NXRT_CACHE_OPTIMAL);
    } catch (const nxrt::sdk::BlobRejected& r) {
      CHECK(r.reason != "");
      return r.verdict;
    }
  };
  CHECK(verdict(blob) == NXRT_CACHE_OPTIMAL);
  CHECK(verdict({}) == NXRT_CACHE_UNSUPPORTED);
  for (size_t n = 0; n < blob.size(); n += 64) CHECK(verdict({blob.begin(), blob.begin() + ptrdiff_t(n)}) == NXRT_CACHE_UNSUPPORTED);
  for (size_t i = 0; i < blob.size(); ++i) {
    auto b = blob;
    b[i] ^= 0x5a;
    CHECK(verdict(b) == NXRT_CACHE_UNSUPPORTED);
  }
  std::mt19937 g(7);
  for (int t = 0; t < 200; ++t) {
    std::vector<uint8_t> b(size_t(g() % 512));
    for (auto& x : b) x = uint8_t(g());
    CHECK(verdict(b) == NXRT_CACHE_UNSUPPORTED);
  }
}

TEST_CASE("export from an offline session, import into lavapipe: OPTIMAL and bit-identical outputs") {
  if (device_count() == 0) {
    NXRT_SKIP_CASE("no Vulkan device: import not tested");
  }
  const Props desc = describe(0);
  RawSession off;
  REQUIRE(offline(desc, off).ok);
  conf::Session real(plugin(), 0);
  REQUIRE(real.create().ok);
  REQUIRE(check(real.raw(), fingerprint(off.s)).verdict == NXRT_CACHE_OPTIMAL);
  auto ms = models();
  std::vector<std::vector<uint8_t>> blobs;
  for (auto& m : ms) {
    CAPTURE(m->name);
    auto sub = m->b.subgraph(all_nodes(*m));
    Kernel compiled;
    REQUIRE(conf::take(api().kernel_create(off.s, sub.get(), &compiled.k)).ok);
    blobs.push_back(export_blob(compiled.k));
    // Each in a session of its own, so neither finds the other's pipelines made already:
    // kernel_create + first run against kernel_import (pipelines made eagerly) + first run.
    conf::Session s_fresh(plugin(), 0), s_imported(plugin(), 0);
    REQUIRE(s_fresh.create().ok);
    REQUIRE(s_imported.create().ok);
    Kernel imported, fresh;
    using clock = std::chrono::steady_clock;
    auto t0 = clock::now();
    auto j = import(s_imported.raw(), *sub, blobs.back(), imported);
    CHECK_MESSAGE(j.verdict == NXRT_CACHE_OPTIMAL, j.reason);
    REQUIRE(imported.k);
    auto a = conf::compute(s_imported, imported.k, m->inputs, m->outputs);
    auto t1 = clock::now();
    REQUIRE(conf::take(api().kernel_create(s_fresh.raw(), sub.get(), &fresh.k)).ok);
    auto b = conf::compute(s_fresh, fresh.k, m->inputs, m->outputs);
    auto t2 = clock::now();
    auto millis = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
    MESSAGE(m->name << ": import + first run " << millis(t1 - t0) << " ms, create + first run " << millis(t2 - t1) << " ms");
    REQUIRE_MESSAGE(a.status.ok, a.status.str());
    REQUIRE_MESSAGE(b.status.ok, b.status.str());
    REQUIRE(a.outputs.size() == 1);
    CHECK(a.outputs[0].dims == b.outputs[0].dims);
    CHECK(a.outputs[0].bytes == b.outputs[0].bytes);
    // Exported again from the real session: the same choices (plus the driver's cache bytes).
    auto again = export_blob(fresh.k);
    MESSAGE(m->name << ": blob " << blobs.back().size() << " bytes offline, " << again.size() << " from lavapipe");
    // Lavapipe's own blob carries its driver cache bytes: they merge (OPTIMAL, not USABLE).
    Kernel re;
    auto j2 = import(s_imported.raw(), *sub, again, re);
    CHECK_MESSAGE(j2.verdict == NXRT_CACHE_OPTIMAL, j2.reason);
    CHECK(re.k != nullptr);
    CHECK(again.size() >= blobs.back().size());
  }

  // Hostile blobs through kernel_import: a verdict with a reason and no kernel.
  auto sub0 = ms[0]->b.subgraph(all_nodes(*ms[0]));
  auto expect_rejected = [&](const std::vector<uint8_t>& b, nxrt_cache_verdict want) {
    Kernel k;
    auto j = import(real.raw(), *sub0, b, k);
    CHECK(j.verdict == want);
    CHECK(std::string(j.reason) != "");
    CHECK(k.k == nullptr);
  };
  expect_rejected({}, NXRT_CACHE_UNSUPPORTED);
  for (size_t n = 0; n < blobs[0].size(); n += 64) expect_rejected({blobs[0].begin(), blobs[0].begin() + ptrdiff_t(n)}, NXRT_CACHE_UNSUPPORTED);
  for (size_t i = 0; i < blobs[0].size(); i += 7) {
    auto b = blobs[0];
    b[i] ^= 0xff;
    expect_rejected(b, NXRT_CACHE_UNSUPPORTED);
  }
  std::mt19937 g(11);
  for (int t = 0; t < 50; ++t) {
    std::vector<uint8_t> b(size_t(g() % 300));
    for (auto& x : b) x = uint8_t(g());
    expect_rejected(b, NXRT_CACHE_UNSUPPORTED);
  }
  // Another claim's blob (Softmax's for the MatMul claim): RECOMPILE naming both.
  {
    Kernel k;
    auto j = import(real.raw(), *sub0, blobs[3], k);
    CHECK(j.verdict == NXRT_CACHE_RECOMPILE);
    CHECK(std::string(j.reason).find("Softmax") != std::string::npos);
    CHECK(std::string(j.reason).find("MatMul") != std::string::npos);
    CHECK(k.k == nullptr);
  }
  CHECK(conf::host_log().take().empty());
}
