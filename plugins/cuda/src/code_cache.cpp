#include "code_cache.hpp"

#include "elementwise_chain.hpp"
#include "ops.hpp"
#include "schedule.hpp"

#include <nxrt_sdk/digest64.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <cstring>

namespace nxrt::cuda {

// ---------------------------------------------------------------- fingerprint

std::string fingerprint_text(const FingerprintFields& f) {
  std::string n = f.name;
  for (char& c : n)
    if (c == ';' || c == '\n' || c == '\r') c = ',';
  return fmt::format("cuda {}; blob={}; arch=sm_{}; cudart={}; nvrtc={}; cublaslt={}; cudnn={}; tf32={}; cudnn_conv={}; name={}",
                     f.plugin_version, kBlobFormat, f.arch, f.cudart, f.nvrtc, f.cublaslt, f.cudnn, int(f.tf32),
                     int(f.cudnn_conv), n);
}

namespace {

// "sm_90" -> 90; -1 otherwise.
int sm_of(const std::string& s) {
  if (s.size() < 4 || s.size() > 6 || s.rfind("sm_", 0) != 0) return -1;
  int v = 0;
  for (size_t i = 3; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

const char* const kRequired[] = {"blob", "arch", "cudart", "nvrtc", "cublaslt", "cudnn", "tf32", "cudnn_conv"};
// Fields that never change the verdict: the name (the code depends on the architecture,
// not the product) and the NVRTC version (code from another NVRTC runs as well; a driver
// too old for it is found when the module loads, and the kernel is then compiled again).
bool informational(const std::string& k) { return k == "name" || k == "nvrtc"; }

}  // namespace

sdk::CacheJudgement judge_fingerprint(const std::string& compiled, const std::string& here) {
  if (compiled == here) return {};
  sdk::Fingerprint a, b;
  if (!sdk::parse_fingerprint(here, "cuda", b)) return {NXRT_CACHE_UNSUPPORTED, "this session's own fingerprint is unreadable"};
  if (!sdk::parse_fingerprint(compiled, "cuda", a))
    return {NXRT_CACHE_UNSUPPORTED, fmt::format("not a CUDA plugin fingerprint: '{}'", compiled.substr(0, 80))};
  for (const char* k : kRequired)
    if (!a.get(k)) return {NXRT_CACHE_UNSUPPORTED, fmt::format("the CUDA fingerprint has no '{}' field", k)};
  const std::string &name_a = *a.get("name"), &name_b = *b.get("name");
  const std::string &arch_a = *a.get("arch"), &arch_b = *b.get("arch");
  if (*a.get("blob") != *b.get("blob"))
    return {NXRT_CACHE_UNSUPPORTED,
            fmt::format("CUDA kernel blob format {}, this plugin reads format {}", *a.get("blob"), *b.get("blob"))};
  const int sm_a = sm_of(arch_a), sm_b = sm_of(arch_b);
  if (sm_a < 0) return {NXRT_CACHE_UNSUPPORTED, fmt::format("the fingerprint's architecture '{}' is not sm_NN", arch_a.substr(0, 16))};
  if (a.version != b.version)
    return {NXRT_CACHE_RECOMPILE, fmt::format("compiled by CUDA plugin {} for {}, this is CUDA plugin {} on {}", a.version, arch_a,
                                              b.version, arch_b)};
  if (*a.get("cudart") != *b.get("cudart"))
    return {NXRT_CACHE_RECOMPILE, fmt::format("compiled by a CUDA plugin built with CUDA {}, this one was built with CUDA {}",
                                              *a.get("cudart"), *b.get("cudart"))};
  for (auto [k, option] : {std::pair{"tf32", "cuda.allow_tf32"}, std::pair{"cudnn_conv", "cuda.cudnn"}})
    if (*a.get(k) != *b.get(k))
      return {NXRT_CACHE_RECOMPILE, fmt::format("compiled with {}={}, this session has {}={}", option, *a.get(k), option, *b.get(k))};
  if (sm_a > sm_b)
    return {NXRT_CACHE_RECOMPILE, fmt::format("compiled for {} ('{}'), this device is {} ('{}'): its code cannot run here", arch_a,
                                              name_a, arch_b, name_b)};
  // Fields this version does not know (or other values of them).
  for (auto& [k, v] : a.fields) {
    bool known = informational(k) || k == "blob" || k == "arch" || k == "cudart" || k == "tf32" || k == "cudnn_conv" ||
                 k == "cublaslt" || k == "cudnn";
    if (!known && (!b.get(k) || *b.get(k) != v))
      return {NXRT_CACHE_RECOMPILE, fmt::format("compiled with {}={}, this session has {}", k, v, b.get(k) ? *b.get(k) : "none")};
  }
  std::vector<std::string> slower;
  if (sm_a < sm_b) slower.push_back(fmt::format("PTX for {} JIT-compiled on {}: slower first run", arch_a, arch_b));
  for (auto [k, lib] : {std::pair{"cublaslt", "cuBLASLt"}, std::pair{"cudnn", "cuDNN"}})
    if (*a.get(k) != *b.get(k))
      slower.push_back(fmt::format("{} algorithm choices were made with {} {}, this session has {}: chosen again at the first run",
                                   lib, lib, *a.get(k), *b.get(k)));
  if (!slower.empty()) {
    std::string r = slower[0];
    for (size_t i = 1; i < slower.size(); ++i) r += "; " + slower[i];
    return {NXRT_CACHE_USABLE, r};
  }
  // Only informational fields differ (the device's name, the NVRTC version), or text
  // this session would never write around equal fields.
  for (auto& [k, v] : a.fields)
    if (!informational(k) && (!b.get(k) || *b.get(k) != v))
      return {NXRT_CACHE_RECOMPILE, fmt::format("compiled with {}={}, this session has {}", k, v, b.get(k) ? *b.get(k) : "none")};
  if (a.fields.size() != b.fields.size())
    return {NXRT_CACHE_RECOMPILE, fmt::format("the fingerprint ({} bytes) is not one this plugin writes: '{}'", compiled.size(),
                                              compiled.substr(0, 80))};
  return {};
}

int parse_compute_capability(const std::string& s) {
  const size_t dot = s.find('.');
  if (dot == std::string::npos || dot == 0 || dot > 2 || dot + 2 != s.size()) return -1;
  int major = 0;
  for (size_t i = 0; i < dot; ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    major = major * 10 + (s[i] - '0');
  }
  const char minor = s[dot + 1];
  if (minor < '0' || minor > '9' || major == 0) return -1;
  return major * 10 + (minor - '0');
}

int cubin_arch(std::span<const uint8_t> c) {
  // ELF64 little-endian: e_ident[7] OS ABI (0x33/0x41 for CUDA), e_ident[8] ABI version,
  // e_machine at 18 (EM_CUDA = 190), e_flags at 48: the SM in bits 0-7 up to ABI version 7,
  // in bits 8-15 from version 8 on (CUDA 12.8+).
  if (c.size() < 64 || std::memcmp(c.data(), "\x7f" "ELF", 4) != 0 || c[4] != 2 || c[5] != 1) return -1;
  uint16_t machine;
  uint32_t flags;
  std::memcpy(&machine, c.data() + 18, 2);
  std::memcpy(&flags, c.data() + 48, 4);
  if (machine != 190) return -1;
  return int(c[8] >= 8 ? (flags >> 8) & 0xff : flags & 0xff);
}

uint64_t claim_digest(const IrGraph& g) {
  std::string t;
  for (const auto& v : g.values) {
    t += fmt::format("v {} {} {} [{}] {} {} {};", v.name, int(v.dtype), v.rank, fmt::join(v.dims, ","), int(v.is_const),
                     v.group_input, v.group_output);
    if (v.has_data) t += fmt::format("d{:x}[{}];", sdk::digest64(v.data.data(), v.data.size()), fmt::join(v.data_dims, ","));
  }
  for (const auto& n : g.nodes) {
    t += fmt::format("n {} {} {} in[{}] out[{}]", n.op, n.opset, n.index, fmt::join(n.in, ","), fmt::join(n.out, ","));
    for (const auto& [k, a] : n.attrs) {
      t += fmt::format(" {}:{}:{}:{:x}:{}:[{}]:[", k, int(a.type), a.i, std::bit_cast<uint32_t>(a.f), a.s, fmt::join(a.ints, ","));
      for (float f : a.floats) t += fmt::format("{:x},", std::bit_cast<uint32_t>(f));
      t += ']';
    }
    t += ';';
  }
  t += fmt::format("io [{}] [{}]", fmt::join(g.inputs, ","), fmt::join(g.outputs, ","));
  return sdk::digest64(t.data(), t.size());
}

uint64_t source_digest(const std::string& source) {
  return source.empty() ? 0 : sdk::digest64(source.data(), source.size()) | 1;
}

PreparedGroup prepare_group(IrGraph g, bool chains) {
  PreparedGroup p;
  for (const auto& n : g.nodes)
    if (auto r = check_node(g, n)) sdk::fail(NXRT_UNSUPPORTED, "node {} ({}): {}", n.index, n.op, r->message);
  p.claim = claim_digest(g);
  fuse_epilogues(g);
  if (chains) fuse_elementwise_chains(g);
  for (const auto& n : g.nodes) {
    if (n.fused_away) continue;
    for (size_t i = 0; i < n.in.size(); ++i)
      if (n.in[i] >= 0 && !reads_on_device(n.op, i) && !g.value(n.in[i]).has_data)
        sdk::fail(NXRT_UNSUPPORTED, "node {} ({}): input {} must be a constant", n.index, n.op, i);
  }
  p.source = chain_source(g);
  p.g = std::move(g);
  return p;
}

// ---------------------------------------------------------------- blob

namespace {

constexpr char kMagic[8] = {'N', 'X', 'R', 'T', 'C', 'U', 'D', 'A'};
constexpr uint64_t kMaxKey = 64, kMaxResult = 4096, kMaxChoices = 1 << 16;

// Collects what is written (for the trailing digest) and passes it on.
struct Digesting {
  sdk::BlobWriter& w;
  std::vector<uint8_t> all;
  void write(const void* p, uint64_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    all.insert(all.end(), b, b + n);
    w.write(p, n);
  }
  template <typename T>
  void pod(const T& v) { write(&v, sizeof v); }
  void bytes(const void* p, uint64_t n) {
    pod(n);
    write(p, n);
  }
};

void write_choices(Digesting& d, const std::vector<AlgoChoice>& cs) {
  d.pod(uint32_t(cs.size()));
  for (const auto& c : cs) {
    d.pod(uint32_t(c.key.size()));
    d.write(c.key.data(), c.key.size() * sizeof(int64_t));
    d.bytes(c.result.data(), c.result.size());
  }
}

std::vector<AlgoChoice> read_choices(sdk::BlobReader& r) {
  const auto n = r.pod<uint32_t>();
  if (n > kMaxChoices) r.reject("{} algorithm choices (at most {})", n, kMaxChoices);
  std::vector<AlgoChoice> out;
  for (uint32_t i = 0; i < n; ++i) {
    AlgoChoice c;
    const auto k = r.pod<uint32_t>();
    if (k > kMaxKey) r.reject("an algorithm key of {} integers (at most {})", k, kMaxKey);
    auto kb = r.bytes(uint64_t(k) * sizeof(int64_t));
    c.key.resize(k);
    std::memcpy(c.key.data(), kb.data(), kb.size());
    const auto size = r.pod<uint64_t>();
    if (size > kMaxResult) r.reject("an algorithm choice of {} bytes (at most {})", size, kMaxResult);
    auto rb = r.bytes(size);
    c.result.assign(rb.begin(), rb.end());
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

void write_kernel_blob(sdk::BlobWriter& w, const KernelBlob& b) {
  Digesting d{w, {}};
  d.write(kMagic, sizeof kMagic);
  d.pod(kBlobFormat);
  d.pod(uint32_t(b.code.arch));
  d.pod(b.claim);
  d.pod(b.source);
  d.bytes(b.code.cubin.data(), b.code.cubin.size());
  d.bytes(b.code.ptx.data(), b.code.ptx.size());
  d.bytes(b.cublaslt.data(), b.cublaslt.size());
  d.bytes(b.cudnn.data(), b.cudnn.size());
  write_choices(d, b.gemm);
  write_choices(d, b.conv);
  const uint64_t digest = sdk::digest64(d.all.data(), d.all.size());
  w.pod(digest);
}

KernelBlob read_kernel_blob(std::span<const uint8_t> blob) {
  if (blob.size() < sizeof kMagic || std::memcmp(blob.data(), kMagic, sizeof kMagic) != 0)
    throw sdk::BlobRejected{NXRT_CACHE_UNSUPPORTED, "not a CUDA plugin kernel blob (no NXRTCUDA header)"};
  if (blob.size() < sizeof kMagic + 4 + 8)
    throw sdk::BlobRejected{NXRT_CACHE_UNSUPPORTED, fmt::format("corrupt blob: {} bytes, too short for a header", blob.size())};
  uint32_t format;
  std::memcpy(&format, blob.data() + sizeof kMagic, 4);
  if (format != kBlobFormat)
    throw sdk::BlobRejected{NXRT_CACHE_UNSUPPORTED,
                            fmt::format("CUDA kernel blob format {}, this plugin reads format {}", format, kBlobFormat)};
  const size_t body = blob.size() - 8;
  uint64_t stored;
  std::memcpy(&stored, blob.data() + body, 8);
  if (sdk::digest64(blob.data(), body) != stored)
    throw sdk::BlobRejected{NXRT_CACHE_UNSUPPORTED, "corrupt blob: its checksum does not match (changed or truncated bytes)"};
  sdk::BlobReader r(blob.data(), body);
  r.bytes(sizeof kMagic + 4);
  KernelBlob b;
  b.code.arch = int(r.pod<uint32_t>());
  b.claim = r.pod<uint64_t>();
  b.source = r.pod<uint64_t>();
  auto cubin = r.bytes(r.pod<uint64_t>());
  b.code.cubin.assign(cubin.begin(), cubin.end());
  b.code.ptx = r.string(uint64_t(1) << 30);
  b.cublaslt = r.string(64);
  b.cudnn = r.string(64);
  b.gemm = read_choices(r);
  b.conv = read_choices(r);
  if (r.remaining()) r.reject("{} bytes after its last section", r.remaining());
  if (b.code.arch > 1000) r.reject("architecture {}", b.code.arch);
  if (!b.code.cubin.empty() && cubin_arch(b.code.cubin) != b.code.arch)
    r.reject("its cubin is not a CUDA ELF for sm_{}", b.code.arch);
  return b;
}

}  // namespace nxrt::cuda
