// The compiled-model cache (ABI 2.4, docs/abi.md "Compiled-model cache") through the public
// API, on the cachemul test plugin: nxrt_model_compile and loading what it wrote, a cache
// folder's miss then hit, and every way a container can go wrong (flipped bytes anywhere,
// truncation, a foreign file, another plugin version, another device's fingerprint, a blob
// the plugin refuses) giving a verdict and a correct run, never a crash.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "artifact.hpp"

#include <nxrt/nxrt.hpp>
#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <unistd.h>

namespace fs = std::filesystem;

namespace {

constexpr int64_t kN = 4096;

const std::string kPlugin = std::string(NXRT_TEST_PLUGIN_DIR) + "/libnxrt_ep_cachemul.so";
const std::string kPluginV11 = std::string(NXRT_TEST_PLUGIN_DIR) + "/libnxrt_ep_cachemul_v11.so";

struct TempDir {
  fs::path p;
  TempDir() {
    p = fs::temp_directory_path() / ("nxrt_compiled_" + std::to_string(::getpid()) + "_" + std::to_string(std::rand()));
    fs::create_directories(p);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(p, ec);
  }
};

// Y = (X * C1) * C2, X and the constants [1, kN]: two kernels, both cachemul's. With
// `identity`, X goes through an Identity first (optimization level 1 removes it).
std::string write_model(const fs::path& dir, bool identity = false) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("cachemul_model");
  auto io = [](onnx::ValueInfoProto* v, const char* name) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(1);
    tt->mutable_shape()->add_dim()->set_dim_value(kN);
  };
  io(g->add_input(), "X");
  io(g->add_output(), "Y");
  for (int c = 1; c <= 2; ++c) {
    auto* t = g->add_initializer();
    t->set_name("C" + std::to_string(c));
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(1);
    t->add_dims(kN);
    for (int64_t i = 0; i < kN; ++i) t->add_float_data(float(i % 97) * 0.01f * float(c) - 0.3f);
  }
  auto node = [&](const char* name, const char* a, const char* b, const char* y) {
    auto* n = g->add_node();
    n->set_name(name);
    n->set_op_type("Mul");
    n->add_input(a);
    n->add_input(b);
    n->add_output(y);
  };
  if (identity) {
    auto* n = g->add_node();
    n->set_name("id");
    n->set_op_type("Identity");
    n->add_input("X");
    n->add_output("X2");
  }
  node("mul1", identity ? "X2" : "X", "C1", "T");
  node("mul2", "T", "C2", "Y");
  const std::string path = (dir / "model.onnx").string();
  std::ofstream f(path, std::ios::binary);
  REQUIRE(m.SerializeToOstream(&f));
  return path;
}

nxrt::Env env_with(const std::string& plugin) {
  nxrt::Env env(false);
  env.register_plugin(plugin);
  return env;
}

nxrt::SessionOptions options() {
  nxrt::SessionOptions o;
  o.eps = "cachemul";
  return o;
}

std::vector<float> run(nxrt::Session& s) {
  nxrt::Tensor x;
  x.name = "X";
  x.dtype = 1;
  x.dims = {1, kN};
  x.data.resize(size_t(kN) * 4);
  auto* p = reinterpret_cast<float*>(x.data.data());
  for (int64_t i = 0; i < kN; ++i) p[i] = float(i % 13) - 6.f;
  auto out = s.run({x.view()});
  REQUIRE(out.size() == 1);
  const float* y = static_cast<const float*>(out[0].data);
  return std::vector<float>(y, y + kN);
}

std::vector<float> reference(const std::string& model) {
  auto env = env_with(kPlugin);
  nxrt::Session s(env, nxrt::Model(model), options());
  return run(s);
}

// The EP entry of a session's load report ("cache" part), as text for simple checks.
std::string report(const nxrt::Session& s) { return s.load_report(); }
bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

std::vector<uint8_t> read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void write_all(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

fs::path only_entry(const fs::path& dir) {
  std::vector<fs::path> found;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".nxrt") found.push_back(e.path());
  REQUIRE(found.size() == 1);
  return found[0];
}

}  // namespace

TEST_CASE("nxrt_model_compile writes a compiled model whose kernels are imported, outputs bit-identical") {
  TempDir d;
  const std::string model = write_model(d.p);
  const auto want = reference(model);
  auto env = env_with(kPlugin);
  const std::string out = (d.p / "model.nxrt").string();
  nxrt::compile(env, nxrt::Model(model), options(), {}, out);
  const std::string about = nxrt::describe_compiled_model(out);
  CHECK(has(about, "plugin cachemul 1.0.0"));
  CHECK(has(about, "2 kernel blob(s)"));
  nxrt::Session s(env, nxrt::Model(out), options());
  const std::string r = report(s);
  CHECK(has(r, "\"mode\":\"compiled-model\""));
  CHECK(has(r, "\"ep\":\"cachemul\",\"verdict\":\"optimal\""));
  CHECK(has(r, "\"imported\":2,\"compiled\":0,\"rejected\":0"));
  CHECK(run(s) == want);
  // Other session settings: the kernels are not used, the session compiles them.
  auto other = options();
  other.optimization_level = NXRT_OPT_LEVEL_0;
  nxrt::Session s2(env, nxrt::Model(out), other);
  CHECK(has(report(s2), "compiled with other session settings"));
  CHECK(has(report(s2), "\"imported\":0,\"compiled\":2"));
  CHECK(run(s2) == want);
}

TEST_CASE("a cache folder: the first session misses and writes the entry, the next imports every kernel") {
  TempDir d;
  const std::string model = write_model(d.p);
  const auto want = reference(model);
  const fs::path cache = d.p / "cache";
  auto env = env_with(kPlugin);
  {
    nxrt::Session s(env, nxrt::Model(model, cache.string()), options());
    CHECK(has(report(s), "\"mode\":\"miss\""));
    CHECK(has(report(s), "\"written\":\""));
    CHECK(run(s) == want);
  }
  only_entry(cache);
  nxrt::Session s(env, nxrt::Model(model, cache.string()), options());
  const std::string r = report(s);
  CHECK(has(r, "\"mode\":\"hit\""));
  CHECK(has(r, "\"imported\":2,\"compiled\":0"));
  CHECK(has(r, "\"written\":\"\""));  // nothing stale: nothing rewritten
  CHECK(run(s) == want);
}

namespace {

// The optimizer key an entry's graph went through, and the op types of that graph.
std::pair<std::string, std::vector<std::string>> stored_graph(const fs::path& entry) {
  nxrt::Verdict v;
  auto a = nxrt::Artifact::open(entry.string(), &v);
  REQUIRE(a);
  const nxrt::ArtifactEntry* g = a->find(nxrt::EntryKind::Graph);
  REQUIRE(g);
  std::span<const uint8_t> bytes;
  std::string why;
  REQUIRE(a->data(*g, &bytes, &why));
  onnx::ModelProto m;
  REQUIRE(m.ParseFromArray(bytes.data(), int(bytes.size())));
  std::vector<std::string> ops;
  for (auto& n : m.graph().node()) ops.push_back(n.op_type());
  return {a->info().count("optimized") ? a->info().at("optimized") : "", ops};
}

}  // namespace

TEST_CASE("an entry keeps the graph as optimized: a warm session skips the optimizer, other levels get their own entry") {
  TempDir d;
  const std::string model = write_model(d.p, /*identity=*/true);
  const auto want = reference(model);
  const fs::path cache = d.p / "cache";
  auto env = env_with(kPlugin);
  {
    nxrt::Session s(env, nxrt::Model(model, cache.string()), options());
    CHECK(has(report(s), "\"mode\":\"miss\""));
    CHECK(run(s) == want);
  }
  const fs::path level2 = only_entry(cache);
  auto [key2, ops2] = stored_graph(level2);
  CHECK(key2.rfind("level=2;", 0) == 0);
  CHECK(ops2 == std::vector<std::string>{"Mul", "Mul"});  // Identity removed, as the session ran it
  {
    nxrt::Session s(env, nxrt::Model(model, cache.string()), options());
    CHECK(has(report(s), "\"mode\":\"hit\""));
    CHECK(run(s) == want);
  }
  // Level 1 must not run the level-2 graph: the ONNX model is read again, and its entry
  // written. (Level 0 would keep the Identity, which cachemul does not take.)
  auto o1 = options();
  o1.optimization_level = NXRT_OPT_LEVEL_1;
  {
    nxrt::Session s(env, nxrt::Model(model, cache.string()), o1);
    CHECK(has(report(s), "\"mode\":\"miss\""));
    CHECK(run(s) == want);
  }
  fs::path level1;
  size_t entries = 0;
  for (auto& e : fs::directory_iterator(cache))
    if (e.path().extension() == ".nxrt") {
      ++entries;
      if (e.path() != level2) level1 = e.path();
    }
  REQUIRE(entries == 2);
  auto [key1, ops1] = stored_graph(level1);
  CHECK(key1.rfind("level=1;", 0) == 0);
  CHECK(ops1 == std::vector<std::string>{"Mul", "Mul"});
  // Both settings now start warm, whichever entry the model was first read from.
  for (int round = 0; round < 2; ++round)
    for (const auto& o : {options(), o1}) {
      nxrt::Session s(env, nxrt::Model(model, cache.string()), o);
      CHECK(has(report(s), "\"mode\":\"hit\""));
      CHECK(has(report(s), "\"imported\":2,\"compiled\":0"));
      CHECK(has(report(s), "\"written\":\"\""));
      CHECK(run(s) == want);
    }
}

TEST_CASE("every flipped byte and every truncation of a cache entry gives a verdict and a correct run") {
  TempDir d;
  const std::string model = write_model(d.p);
  const auto want = reference(model);
  const fs::path cache = d.p / "cache";
  auto env = env_with(kPlugin);
  { nxrt::Session s(env, nxrt::Model(model, cache.string()), options()); }
  const fs::path entry = only_entry(cache);
  const auto good = read_all(entry);
  // Where the checksummed parts lie: a flip there must be noticed; padding may not be.
  nxrt::Verdict v;
  auto a = nxrt::Artifact::open(entry.string(), &v);
  REQUIRE(a);
  std::vector<std::pair<uint64_t, uint64_t>> covered = {{0, 64}};
  for (auto& e : a->entries()) covered.push_back({e.offset, e.offset + e.size});
  a.reset();
  std::mt19937 rng(7);
  std::vector<size_t> positions;
  for (size_t i = 0; i < 96; ++i) positions.push_back(i);  // the header and the directory's start
  for (int k = 0; k < 60; ++k) positions.push_back(size_t(rng() % good.size()));
  for (auto& [b, e] : covered)
    if (e > b) positions.push_back(size_t(b + (e - b) / 2));
  size_t noticed = 0, should = 0;
  for (size_t pos : positions) {
    CAPTURE(pos);
    auto bad = good;
    bad[pos] ^= 0x5a;
    write_all(entry, bad);
    nxrt::Session s(env, nxrt::Model(model, cache.string()), options());
    CHECK(run(s) == want);
    bool in_covered = false;
    for (auto& [b, e] : covered) in_covered |= pos >= b && pos < e;
    const std::string r = report(s);
    if (in_covered) {
      ++should;
      const bool seen = !has(r, "\"imported\":2,\"compiled\":0,\"rejected\":0") || !has(r, "\"mode\":\"hit\"");
      noticed += seen;
      CHECK_MESSAGE(seen, r);
    }
  }
  CHECK(noticed == should);
  for (size_t len : {size_t(0), size_t(7), size_t(64), size_t(100), good.size() / 2, good.size() - 1}) {
    CAPTURE(len);
    write_all(entry, std::vector<uint8_t>(good.begin(), good.begin() + long(len)));
    nxrt::Session s(env, nxrt::Model(model, cache.string()), options());
    CHECK(run(s) == want);
    CHECK(has(report(s), "\"mode\":\"miss\""));
    // Shorter than the magic: nothing says it was ever ours.
    CHECK(has(report(s), len < 8 ? "not an nxrt compiled model" : "must recompile"));
  }
  // A stale entry is written again: the next session hits.
  nxrt::Session s(env, nxrt::Model(model, cache.string()), options());
  CHECK(has(report(s), "\"mode\":\"hit\""));
}

TEST_CASE("a foreign file in place of the entry, or given as the model, is never trusted") {
  TempDir d;
  const std::string model = write_model(d.p);
  const auto want = reference(model);
  const fs::path cache = d.p / "cache";
  auto env = env_with(kPlugin);
  { nxrt::Session s(env, nxrt::Model(model, cache.string()), options()); }
  const fs::path entry = only_entry(cache);
  std::vector<uint8_t> junk(5000);
  std::mt19937 rng(3);
  for (auto& b : junk) b = uint8_t(rng());
  write_all(entry, junk);
  {
    nxrt::Session s(env, nxrt::Model(model, cache.string()), options());
    CHECK(has(report(s), "unsupported"));
    CHECK(has(report(s), "not an nxrt compiled model"));
    CHECK(run(s) == want);
  }
  // A compiled model given directly that is corrupt: a clear error, not a crash.
  const fs::path art = d.p / "m.nxrt";
  nxrt::compile(env, nxrt::Model(model), options(), {}, art.string());
  auto bytes = read_all(art);
  bytes[bytes.size() - 3] ^= 1;  // inside the last kernel blob: still loads, that kernel recompiles
  write_all(art, bytes);
  {
    nxrt::Session s(env, nxrt::Model(art.string()), options());
    CHECK(has(report(s), "checksum does not match"));
    CHECK(run(s) == want);
  }
  bytes = read_all(art);
  bytes[20] ^= 1;  // the header
  write_all(art, bytes);
  try {
    nxrt::Model m(art.string());
    FAIL("a compiled model with a corrupt header loaded");
  } catch (const nxrt::Error& e) {
    CHECK(e.code() == NXRT_ERR_MODEL);
    CHECK(has(e.what(), "compile it again"));
  }
}

TEST_CASE("another plugin version, or a device with other lanes, gets the plugin's verdict with the reason") {
  TempDir d;
  const std::string model = write_model(d.p);
  const auto want = reference(model);
  const fs::path art = d.p / "m.nxrt";
  {
    auto env = env_with(kPlugin);
    nxrt::compile(env, nxrt::Model(model), options(), {}, art.string());
  }
  {  // the same plugin name, version 1.1.0
    auto env = env_with(kPluginV11);
    nxrt::Session s(env, nxrt::Model(art.string()), options());
    CHECK(has(report(s), "compiled by plugin 'cachemul' 1.0.0, the loaded one is 1.1.0"));
    CHECK(has(report(s), "\"imported\":0,\"compiled\":2"));
    CHECK(run(s) == want);
  }
  ::setenv("NXRT_TEST_CACHEMUL_LANES", "4", 1);  // compiled for 8 lanes: fewer here
  {
    auto env = env_with(kPlugin);
    nxrt::Session s(env, nxrt::Model(art.string()), options());
    CHECK(has(report(s), "must recompile"));
    CHECK(has(report(s), "packed for 8 lanes, this device has 4"));
    CHECK(run(s) == want);
  }
  ::setenv("NXRT_TEST_CACHEMUL_LANES", "16", 1);  // more lanes here: usable but slower
  {
    auto env = env_with(kPlugin);
    nxrt::Session s(env, nxrt::Model(art.string()), options());
    CHECK(has(report(s), "usable but slower"));
    CHECK(has(report(s), "\"imported\":2"));
    CHECK(run(s) == want);
  }
  ::unsetenv("NXRT_TEST_CACHEMUL_LANES");
}

TEST_CASE("compiling for a described device: optimal on that device, must recompile on another") {
  TempDir d;
  const std::string model = write_model(d.p);
  const auto want = reference(model);
  auto env = env_with(kPlugin);
  auto device = env.device_properties(0, 0);  // what `nxrt plugins --json` prints for it
  bool lanes = false;
  for (auto& [k, v] : device) lanes |= k == "cachemul.lanes" && v == "8";
  REQUIRE(lanes);
  const fs::path same = d.p / "same.nxrt", other = d.p / "other.nxrt";
  nxrt::compile(env, nxrt::Model(model), options(), device, same.string());
  for (auto& [k, v] : device)
    if (k == "cachemul.lanes") v = "2";
  nxrt::compile(env, nxrt::Model(model), options(), device, other.string());
  {
    nxrt::Session s(env, nxrt::Model(same.string()), options());
    CHECK(has(report(s), "\"verdict\":\"optimal\""));
    CHECK(has(report(s), "\"imported\":2,\"compiled\":0"));
    CHECK(run(s) == want);
  }
  {
    nxrt::Session s(env, nxrt::Model(other.string()), options());
    CHECK(has(report(s), "packed for 2 lanes, this device has 8"));
    CHECK(run(s) == want);
  }
  // A description the plugin cannot use: its error, naming the key.
  try {
    nxrt::compile(env, nxrt::Model(model), options(), {{"name", "x"}}, (d.p / "bad.nxrt").string());
    FAIL("compiled for a device without its lanes");
  } catch (const nxrt::Error& e) {
    CHECK(has(e.what(), "cachemul.lanes"));
  }
}

TEST_CASE("a blob with a valid checksum that the plugin refuses: compiled instead, the reason kept") {
  TempDir d;
  const std::string model = write_model(d.p);
  const auto want = reference(model);
  auto env = env_with(kPlugin);
  const fs::path art = d.p / "m.nxrt", cut = d.p / "cut.nxrt";
  nxrt::compile(env, nxrt::Model(model), options(), {}, art.string());
  nxrt::Verdict v;
  auto a = nxrt::Artifact::open(art.string(), &v);
  REQUIRE(a);
  nxrt::ArtifactWriter w;
  for (auto& e : a->entries()) {
    std::span<const uint8_t> bytes;
    std::string why;
    REQUIRE(a->data(e, &bytes, &why));
    std::vector<uint8_t> data(bytes.begin(), bytes.end());
    if (e.kind == nxrt::EntryKind::Kernel && e.get("claim").rfind("mul1", 0) == 0) data.resize(data.size() / 2);
    w.add(e.kind, e.meta, std::move(data));
  }
  w.write(cut.string());
  nxrt::Session s(env, nxrt::Model(cut.string()), options());
  const std::string r = report(s);
  CHECK(has(r, "\"imported\":1,\"compiled\":1,\"rejected\":1"));
  CHECK(has(r, "corrupt blob"));
  CHECK(run(s) == want);
}
