// Element-wise chain fusion and its generated code (compiled here with NVRTC, no GPU), the
// cache fingerprint's verdicts and the kernel blob against flipped and truncated bytes.
#include <doctest/doctest.h>

#include "code_cache.hpp"
#include "elementwise_chain.hpp"
#include "nvrtc.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

using namespace nxrt::cuda;

namespace {

struct G {
  IrGraph g;
  int value(nxrt_dtype t, Shape dims) {
    IrValue v;
    v.dtype = t;
    v.rank = int64_t(dims.size());
    v.dims = dims;
    return g.add_value(v);
  }
  int scalar(float f) {
    IrValue v;
    v.dtype = NXRT_DTYPE_FLOAT32;
    v.rank = 0;
    v.is_const = v.has_data = true;
    v.data.resize(4);
    std::memcpy(v.data.data(), &f, 4);
    return g.add_value(v);
  }
  IrNode& node(std::string op, std::vector<int> in, std::vector<int> out) {
    IrNode n;
    n.op = std::move(op);
    n.opset = 17;
    n.index = g.nodes.size();
    n.in = std::move(in);
    n.out = std::move(out);
    g.nodes.push_back(n);
    return g.nodes.back();
  }
};

// x -> Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5 -> y: the decomposed Gelu.
G gelu_chain(nxrt_dtype t = NXRT_DTYPE_FLOAT32) {
  G b;
  const int x = b.value(t, {2, 8});
  b.g.values[size_t(x)].group_input = 0;
  b.g.inputs = {x};
  int v[5];
  for (int& i : v) i = b.value(t, {2, 8});
  b.node("Div", {x, b.scalar(1.41421356f)}, {v[0]});
  b.node("Erf", {v[0]}, {v[1]});
  b.node("Add", {v[1], b.scalar(1.f)}, {v[2]});
  b.node("Mul", {x, v[2]}, {v[3]});
  b.node("Mul", {v[3], b.scalar(0.5f)}, {v[4]});
  b.g.values[size_t(v[4])].group_output = 0;
  b.g.outputs = {v[4]};
  return b;
}

struct VecWriter {
  std::vector<uint8_t> bytes;
  nxrt_blob_writer w{sizeof(nxrt_blob_writer), this, &VecWriter::write};
  static nxrt_status* write(void* user, const void* p, uint64_t n) {
    auto* self = static_cast<VecWriter*>(user);
    self->bytes.insert(self->bytes.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    return nullptr;
  }
};

std::vector<uint8_t> blob_bytes(const KernelBlob& b) {
  VecWriter v;
  nxrt::sdk::BlobWriter w(&v.w);
  write_kernel_blob(w, b);
  return v.bytes;
}

const Nvrtc& nvrtc() {
  std::string why;
  const Nvrtc* n = Nvrtc::get(&why);
  INFO(why);
  REQUIRE(n != nullptr);  // the toolkit that built the plugin ships NVRTC
  return *n;
}

}  // namespace

TEST_CASE("element-wise chains: the decomposed Gelu becomes one chain") {
  G b = gelu_chain();
  REQUIRE(fuse_elementwise_chains(b.g) == 1);
  REQUIRE(b.g.chains.size() == 1);
  CHECK(b.g.chains[0].nodes.size() == 5);
  CHECK(b.g.chains[0].input == b.g.inputs[0]);
  CHECK(b.g.chains[0].output == b.g.outputs[0]);
  for (size_t i = 0; i < 4; ++i) CHECK(b.g.nodes[i].fused_away);
  CHECK(b.g.nodes[4].op == kChainOp);
  CHECK(b.g.nodes[4].in == std::vector<int>{b.g.inputs[0]});
  const std::string src = chain_source(b.g);
  CHECK(src.find("nxrt_chain_0") != std::string::npos);
  CHECK(src.find("m::unary(m::Unary(9)") != std::string::npos);  // Erf
}

TEST_CASE("element-wise chains compute what their nodes compute (host evaluation of the generated steps)") {
  SUBCASE("the decomposed Gelu") {
    G b = gelu_chain();
    fuse_elementwise_chains(b.g);
    for (float x = -3.f; x <= 3.f; x += 0.25f) {
      const double want = 0.5 * x * (1.0 + std::erf(double(x) / std::sqrt(2.0)));
      CHECK(std::abs(eval_chain(b.g, b.g.chains[0], x) - want) < 2e-6);
    }
  }
  SUBCASE("x * Sigmoid(x): the second operand is the chain's input") {
    G b;
    const int x = b.value(NXRT_DTYPE_FLOAT32, {4}), s = b.value(NXRT_DTYPE_FLOAT32, {4}), y = b.value(NXRT_DTYPE_FLOAT32, {4});
    b.node("Sigmoid", {x}, {s});
    b.node("Mul", {s, x}, {y});
    b.g.values[size_t(y)].group_output = 0;
    fuse_elementwise_chains(b.g);
    REQUIRE(b.g.chains.size() == 1);
    for (float v : {-4.f, -0.5f, 0.f, 2.f}) CHECK(eval_chain(b.g, b.g.chains[0], v) == doctest::Approx(v / (1 + std::exp(-v))));
  }
  SUBCASE("Clip bounds, Sub's operand order and a folded Relu epilogue") {
    G b;
    const int x = b.value(NXRT_DTYPE_FLOAT32, {4});
    int v[5];
    for (int& i : v) i = b.value(NXRT_DTYPE_FLOAT32, {4});
    b.node("Sub", {b.scalar(1.f), x}, {v[0]});  // 1 - x
    b.node("Relu", {v[0]}, {v[1]});             // folded into Sub by the epilogue fusion
    b.node("Mul", {v[1], b.scalar(3.f)}, {v[2]});
    b.node("Neg", {v[2]}, {v[3]});
    b.node("Clip", {v[3], b.scalar(-4.f), b.scalar(1.f)}, {v[4]});  // after a unary op: a chain step
    b.g.values[size_t(v[4])].group_output = 0;
    PreparedGroup p = prepare_group(b.g, true);
    REQUIRE(p.g.chains.size() == 1);
    CHECK(p.g.chains[0].nodes.size() == 4);  // Sub(+Relu), Mul, Neg, Clip
    CHECK(p.g.chains[0].nodes[3].op == "Clip");
    for (float in : {-3.f, 0.f, 0.5f, 1.f, 2.f}) {
      const float want = std::min(1.f, std::max(-4.f, -(3.f * std::max(0.f, 1.f - in))));
      CHECK(eval_chain(p.g, p.g.chains[0], in) == want);
    }
  }
}

TEST_CASE("element-wise chains stop where a value is needed outside") {
  SUBCASE("an intermediate is a group output") {
    G b = gelu_chain();
    b.g.values[size_t(b.g.nodes[2].out[0])].group_output = 1;
    b.g.outputs.push_back(b.g.nodes[2].out[0]);
    fuse_elementwise_chains(b.g);
    REQUIRE(b.g.chains.size() == 1);
    CHECK(b.g.chains[0].nodes.size() == 3);  // Div, Erf, Add; then Mul x, Mul 0.5 read the output
    CHECK(b.g.chains[0].output == b.g.nodes[2].out[0]);
  }
  SUBCASE("an intermediate is read by a node that is not element-wise") {
    G b = gelu_chain();
    const int t = b.value(NXRT_DTYPE_FLOAT32, {2, 8});
    b.node("Softmax", {b.g.nodes[1].out[0]}, {t});
    fuse_elementwise_chains(b.g);
    REQUIRE(!b.g.chains.empty());
    CHECK(b.g.chains[0].output == b.g.nodes[1].out[0]);  // Div, Erf: Erf's value is materialized
  }
  SUBCASE("two tensors that broadcast are not fused") {
    G b;
    const int x = b.value(NXRT_DTYPE_FLOAT32, {2, 8}), z = b.value(NXRT_DTYPE_FLOAT32, {8});
    const int a = b.value(NXRT_DTYPE_FLOAT32, {2, 8}), c = b.value(NXRT_DTYPE_FLOAT32, {2, 8});
    b.node("Add", {x, z}, {a});
    b.node("Relu", {a}, {c});
    b.node("Add", {c, z}, {b.value(NXRT_DTYPE_FLOAT32, {2, 8})});
    fuse_elementwise_chains(b.g);
    // Add(x, z) cannot start a chain (z is a second tensor); Relu can't take Add(c, z).
    CHECK(b.g.chains.empty());
  }
}

TEST_CASE("generated chains compile with NVRTC into a cubin for the asked architecture") {
  const Nvrtc& n = nvrtc();
  for (nxrt_dtype t : {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT16}) {
    G b = gelu_chain(t);
    fuse_elementwise_chains(b.g);
    const std::string src = chain_source(b.g);
    for (int arch : {80, 90}) {
      CompiledCode c = n.compile(src, arch);
      CHECK(c.arch == arch);
      CHECK(cubin_arch(c.cubin) == arch);
      CHECK(c.ptx.find(fmt::format(".target sm_{}", arch)) != std::string::npos);
      CHECK(c.ptx.find(".entry nxrt_chain_0") != std::string::npos);
    }
  }
  CHECK_THROWS_WITH(n.compile("this is not C++", 90), doctest::Contains("NVRTC could not compile"));
  CHECK_THROWS_WITH(n.compile(chain_source(gelu_chain().g), 12), doctest::Contains("cannot compile for sm_12"));
}

TEST_CASE("prepare_group: the claim digest is taken before fusion and changes with constants") {
  PreparedGroup a = prepare_group(gelu_chain().g, true), b = prepare_group(gelu_chain().g, false);
  CHECK(a.claim == b.claim);
  CHECK(!a.source.empty());
  CHECK(b.source.empty());
  G other = gelu_chain();
  float f = 2.f;
  std::memcpy(other.g.values[size_t(other.g.nodes[0].in[1])].data.data(), &f, 4);
  CHECK(prepare_group(other.g, true).claim != a.claim);
}

TEST_CASE("fingerprint verdicts") {
  FingerprintFields h200{"0.1.0", 90, "13.0", "13.0", "130100", "91300", false, true, "NVIDIA H200"};
  const std::string here = fingerprint_text(h200);
  CHECK(judge_fingerprint(here, here).verdict == NXRT_CACHE_OPTIMAL);

  FingerprintFields h100 = h200;
  h100.name = "NVIDIA H100 80GB HBM3";
  CHECK(judge_fingerprint(fingerprint_text(h100), here).verdict == NXRT_CACHE_OPTIMAL);  // same sm_90 code

  FingerprintFields a100 = h200;
  a100.arch = 80;
  a100.name = "NVIDIA A100-SXM4-80GB";
  auto j = judge_fingerprint(fingerprint_text(a100), here);
  CHECK(j.verdict == NXRT_CACHE_USABLE);
  CHECK(j.reason == "PTX for sm_80 JIT-compiled on sm_90: slower first run");
  j = judge_fingerprint(here, fingerprint_text(a100));
  CHECK(j.verdict == NXRT_CACHE_RECOMPILE);
  CHECK(j.reason == "compiled for sm_90 ('NVIDIA H200'), this device is sm_80 ('NVIDIA A100-SXM4-80GB'): its code cannot run here");

  FingerprintFields old = h200;
  old.plugin_version = "0.0.9";
  j = judge_fingerprint(fingerprint_text(old), here);
  CHECK(j.verdict == NXRT_CACHE_RECOMPILE);
  CHECK(j.reason == "compiled by CUDA plugin 0.0.9 for sm_90, this is CUDA plugin 0.1.0 on sm_90");

  FingerprintFields tf32 = h200;
  tf32.tf32 = true;
  j = judge_fingerprint(fingerprint_text(tf32), here);
  CHECK(j.verdict == NXRT_CACHE_RECOMPILE);
  CHECK(j.reason == "compiled with cuda.allow_tf32=1, this session has cuda.allow_tf32=0");

  FingerprintFields lt = h200;
  lt.cublaslt = "120900";
  j = judge_fingerprint(fingerprint_text(lt), here);
  CHECK(j.verdict == NXRT_CACHE_USABLE);
  CHECK(j.reason.find("cuBLASLt 120900, this session has 130100") != std::string::npos);

  FingerprintFields nv = h200;
  nv.nvrtc = "12.8";
  CHECK(judge_fingerprint(fingerprint_text(nv), here).verdict == NXRT_CACHE_OPTIMAL);

  for (const char* garbage : {"", "cuda", "vulkan 0.1.0; blob=1; name=x", "cuda 0.1.0; arch=sm_90; name=H200",
                              "cuda 0.1.0; blob=1; arch=sm_9x; cudart=13.0; nvrtc=13.0; cublaslt=1; cudnn=1; tf32=0; cudnn_conv=1; name=x",
                              "\xff\xfe garbage \x01"}) {
    INFO(garbage);
    CHECK(judge_fingerprint(garbage, here).verdict == NXRT_CACHE_UNSUPPORTED);
  }
  std::string extra = here;
  extra.insert(extra.find("; name="), "; fast=1");
  CHECK(judge_fingerprint(extra, here).verdict == NXRT_CACHE_RECOMPILE);
}

TEST_CASE("compute capability text") {
  CHECK(parse_compute_capability("9.0") == 90);
  CHECK(parse_compute_capability("8.6") == 86);
  CHECK(parse_compute_capability("10.0") == 100);
  for (const char* bad : {"", "9", "9.", ".0", "9.00", "x.0", "0.5", "123.0", "9.0 "}) CHECK(parse_compute_capability(bad) == -1);
}

TEST_CASE("kernel blobs: round trip, and flipped or truncated bytes are UNSUPPORTED") {
  G g = gelu_chain();
  PreparedGroup p = prepare_group(g.g, true);
  KernelBlob b;
  b.claim = p.claim;
  b.source = source_digest(p.source);
  b.code = nvrtc().compile(p.source, 90);
  b.cublaslt = "130100";
  b.cudnn = "none";
  b.gemm.push_back({{1, 2, 3}, std::vector<uint8_t>(96, 7)});
  const std::vector<uint8_t> bytes = blob_bytes(b);

  KernelBlob r = read_kernel_blob(bytes);
  CHECK(r.claim == b.claim);
  CHECK(r.source == b.source);
  CHECK(r.code.arch == 90);
  CHECK(r.code.cubin == b.code.cubin);
  CHECK(r.code.ptx == b.code.ptx);
  CHECK(r.cublaslt == "130100");
  REQUIRE(r.gemm.size() == 1);
  CHECK(r.gemm[0].key == std::vector<int64_t>{1, 2, 3});
  CHECK(r.gemm[0].result == b.gemm[0].result);

  auto verdict = [](const std::vector<uint8_t>& v) {
    try {
      read_kernel_blob(v);
      return uint32_t(NXRT_CACHE_OPTIMAL);
    } catch (const nxrt::sdk::BlobRejected& e) {
      CHECK(!e.reason.empty());
      return e.verdict;
    }
  };
  size_t rejected = 0, tried = 0;
  for (size_t n = 0; n < bytes.size(); n += (n < 256 ? 1 : 97)) {  // truncations
    ++tried;
    rejected += verdict(std::vector<uint8_t>(bytes.begin(), bytes.begin() + std::ptrdiff_t(n))) == NXRT_CACHE_UNSUPPORTED;
  }
  std::mt19937 rng(12);
  for (int i = 0; i < 2000; ++i) {  // one flipped bit anywhere
    std::vector<uint8_t> v = bytes;
    v[rng() % v.size()] ^= uint8_t(1u << (rng() % 8));
    ++tried;
    rejected += verdict(v) == NXRT_CACHE_UNSUPPORTED;
  }
  CHECK(rejected == tried);
  std::vector<uint8_t> v = bytes;
  v[8] = 2;  // another format
  try {
    read_kernel_blob(v);
    FAIL("format 2 was read");
  } catch (const nxrt::sdk::BlobRejected& e) {
    CHECK(e.reason == "CUDA kernel blob format 2, this plugin reads format 1");
  }
  CHECK(verdict({'N', 'X', 'R', 'T', 'V', 'K'}) == NXRT_CACHE_UNSUPPORTED);
}

TEST_CASE("a cubin of another architecture is not taken as this blob's code") {
  PreparedGroup p = prepare_group(gelu_chain().g, true);
  KernelBlob b;
  b.claim = p.claim;
  b.source = source_digest(p.source);
  b.code = nvrtc().compile(p.source, 80);
  b.code.arch = 90;  // says sm_90, holds sm_80 SASS
  try {
    read_kernel_blob(blob_bytes(b));
    FAIL("a mislabelled cubin was read");
  } catch (const nxrt::sdk::BlobRejected& e) {
    CHECK(e.reason.find("not a CUDA ELF for sm_90") != std::string::npos);
  }
}
