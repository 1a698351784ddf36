#include "kernel_blob.hpp"

#include <nxrt_sdk/dtype.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

namespace nxrt::vk {

namespace {

constexpr char kMagic[8] = {'N', 'X', 'V', 'K', 'K', 'B', '0', '1'};
constexpr uint32_t kMaxSpec = 16;
constexpr uint64_t kMaxDriverCache = 256ull << 20;

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 1099511628211ull;
    }
  }
  template <typename T>
  void pod(const T& v) { bytes(&v, sizeof v); }
  void str(const std::string& s) {
    pod(uint64_t(s.size()));
    bytes(s.data(), s.size());
  }
  template <typename T>
  void vec(const std::vector<T>& v) {
    pod(uint64_t(v.size()));
    if (!v.empty()) bytes(v.data(), v.size() * sizeof(T));
  }
};

// Everything of the claim that a kernel depends on; value and node names are left out.
uint64_t digest(const IrGraph& g) {
  Fnv f;
  f.pod(uint64_t(g.values.size()));
  for (const IrValue& v : g.values) {
    f.pod(int32_t(v.dtype));
    f.pod(v.rank);
    f.vec(v.dims);
    f.pod(uint8_t(v.is_const));
    f.pod(uint8_t(v.has_data));
    if (v.has_data) {
      f.pod(int32_t(v.data.dtype));
      f.vec(v.data.dims);
      f.vec(v.data.bytes);
    }
  }
  f.pod(uint64_t(g.nodes.size()));
  for (const IrNode& n : g.nodes) {
    f.str(n.op);
    f.str(n.domain);
    f.pod(n.opset);
    f.pod(uint64_t(n.attrs.size()));
    for (const auto& [k, a] : n.attrs) {
      f.str(k);
      f.pod(int32_t(a.type));
      f.pod(a.i);
      f.pod(a.f);
      f.str(a.s);
      f.vec(a.ints);
      f.vec(a.floats);
    }
    f.vec(n.in);
    f.vec(n.out);
  }
  f.vec(g.inputs);
  f.vec(g.outputs);
  return f.h;
}

std::string value_text(const IrGraph& g, int v) {
  if (v < 0) return "none";
  const IrValue& iv = g.values[size_t(v)];
  std::vector<std::string> d;
  for (int64_t x : iv.dims) d.push_back(x < 0 ? "?" : std::to_string(x));
  return fmt::format("{}[{}]", sdk::dtype_name(iv.dtype), fmt::join(d, ","));
}

std::string claim_text(const IrGraph& g) {
  std::string s;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (i && s.size() > 96) {
      s += fmt::format("+...({} nodes)", g.nodes.size());
      break;
    }
    s += (i ? "+" : "") + g.nodes[i].op;
  }
  std::vector<std::string> in, out;
  for (int v : g.inputs) in.push_back(value_text(g, v));
  for (int v : g.outputs) out.push_back(value_text(g, v));
  return fmt::format("{}; in {}; out {}", s, fmt::join(in, " "), fmt::join(out, " "));
}

}  // namespace

KernelChoices identify(const IrGraph& claim) {
  KernelChoices c;
  c.claim_digest = digest(claim);
  c.claim_text = claim_text(claim);
  return c;
}

void choose(KernelChoices& c, const IrGraph& prepared) {
  c.fused.clear();
  for (const IrNode& n : prepared.nodes) c.fused.push_back({n.op, int32_t(n.act), n.act_a, n.act_b});
  c.pipelines = plan_pipelines(prepared);
}

namespace {
// Collects the blob so its checksum can follow it.
struct Bytes {
  std::vector<uint8_t> b;
  void write(const void* p, size_t n) {
    auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  }
  template <typename T>
  void pod(const T& v) { write(&v, sizeof v); }
  void string(const std::string& s) {
    pod(uint64_t(s.size()));
    write(s.data(), s.size());
  }
};
uint64_t checksum(std::span<const uint8_t> b) {
  Fnv f;
  f.bytes(b.data(), b.size());
  return f.h;
}
}  // namespace

void write_blob(sdk::BlobWriter& out, const KernelChoices& c, std::span<const uint8_t> driver_cache) {
  Bytes w;
  w.write(kMagic, sizeof kMagic);
  w.pod(kBlobFormat);
  w.pod(uint32_t(0));
  w.pod(c.claim_digest);
  w.string(c.claim_text);
  w.pod(uint32_t(c.fused.size()));
  for (const FusedNode& n : c.fused) {
    w.string(n.op);
    w.pod(n.act);
    w.pod(n.act_a);
    w.pod(n.act_b);
  }
  w.pod(uint8_t(c.pipelines ? 1 : 0));
  const size_t np = c.pipelines ? c.pipelines->size() : 0;
  w.pod(uint32_t(np));
  for (size_t i = 0; i < np; ++i) {
    const PipelineKey& k = (*c.pipelines)[i];
    w.pod(uint32_t(k.shader));
    w.pod(shader_digest(k.shader));
    w.pod(uint32_t(k.spec.size()));
    for (uint32_t v : k.spec) w.pod(v);
  }
  w.pod(uint64_t(driver_cache.size()));
  if (!driver_cache.empty()) w.write(driver_cache.data(), driver_cache.size());
  w.pod(checksum(w.b));
  out.write(w.b.data(), w.b.size());
}

ReadBlob read_blob(std::span<const uint8_t> blob) {
  // Every byte counts (even those only shown in reasons): a blob the host did not check
  // (conformance feeds garbage) is rejected before anything in it is believed.
  if (blob.size() < sizeof kMagic + 8) sdk::BlobReader(blob.data(), blob.size()).reject("{} bytes: too short for a Vulkan kernel blob", blob.size());
  uint64_t sum;
  std::memcpy(&sum, blob.data() + blob.size() - 8, 8);
  if (sum != checksum(blob.first(blob.size() - 8)))
    sdk::BlobReader(blob.data(), blob.size()).reject("checksum mismatch over {} bytes", blob.size() - 8);
  sdk::BlobReader r(blob.data(), blob.size() - 8);
  ReadBlob out;
  auto magic = r.bytes(sizeof kMagic);
  if (std::memcmp(magic.data(), kMagic, sizeof kMagic) != 0) r.reject("not a Vulkan kernel blob (magic)");
  const uint32_t format = r.pod<uint32_t>();
  if (format != kBlobFormat) r.reject("blob format {}, this plugin reads format {}", format, kBlobFormat);
  if (r.pod<uint32_t>() != 0) r.reject("reserved word is not 0");
  KernelChoices& c = out.choices;
  c.claim_digest = r.pod<uint64_t>();
  c.claim_text = r.string(4096);
  const uint32_t nodes = r.pod<uint32_t>();
  // Each node takes at least 20 bytes: a count beyond the rest of the blob is corrupt.
  if (nodes > r.remaining() / 20) r.reject("{} fused nodes in {} bytes", nodes, r.remaining());
  for (uint32_t i = 0; i < nodes; ++i) {
    FusedNode n;
    n.op = r.string(256);
    n.act = r.pod<int32_t>();
    n.act_a = r.pod<float>();
    n.act_b = r.pod<float>();
    c.fused.push_back(std::move(n));
  }
  const uint8_t planned = r.pod<uint8_t>();
  if (planned > 1) r.reject("planned flag {}", planned);
  const uint32_t np = r.pod<uint32_t>();
  if (!planned && np) r.reject("{} pipelines without a plan", np);
  if (np > r.remaining() / 16) r.reject("{} pipelines in {} bytes", np, r.remaining());
  if (planned) c.pipelines.emplace();
  for (uint32_t i = 0; i < np; ++i) {
    PipelineKey k;
    const uint32_t id = r.pod<uint32_t>();
    if (id >= uint32_t(Shader::count)) r.reject("pipeline {} names shader {} (there are {})", i, id, uint32_t(Shader::count));
    k.shader = Shader(id);
    const uint64_t spirv = r.pod<uint64_t>();
    const uint32_t ns = r.pod<uint32_t>();
    if (ns > kMaxSpec) r.reject("pipeline {} has {} specialization constants (at most {})", i, ns, kMaxSpec);
    for (uint32_t j = 0; j < ns; ++j) k.spec.push_back(r.pod<uint32_t>());
    if (spirv != shader_digest(k.shader))
      throw sdk::BlobRejected{NXRT_CACHE_RECOMPILE,
                              fmt::format("shader '{}' of this plugin build differs from the one the blob was compiled with",
                                          shader_name(k.shader))};
    c.pipelines->push_back(std::move(k));
  }
  const uint64_t cache = r.pod<uint64_t>();
  if (cache > kMaxDriverCache) r.reject("a driver pipeline cache of {} bytes", cache);
  out.driver_cache = r.bytes(cache);
  if (r.remaining()) r.reject("{} bytes after the end", r.remaining());
  return out;
}

std::optional<std::string> mismatch(const KernelChoices& blob, const KernelChoices& here) {
  if (blob.claim_digest != here.claim_digest)
    return fmt::format("the blob is for another claim ('{}'), this claim is '{}'", blob.claim_text, here.claim_text);
  if (blob.fused != here.fused) {
    auto ops = [](const std::vector<FusedNode>& f) {
      std::vector<std::string> s;
      for (auto& n : f) s.push_back(n.act >= 0 ? fmt::format("{}(act {})", n.op, n.act) : n.op);
      return fmt::format("{}", fmt::join(s, "+"));
    };
    return fmt::format("the blob's fused group is {}, this device's is {}", ops(blob.fused), ops(here.fused));
  }
  if (blob.pipelines.has_value() != here.pipelines.has_value())
    return fmt::format("the blob {} a pipeline list, this claim {} one", blob.pipelines ? "has" : "has no",
                       here.pipelines ? "makes" : "makes no");
  if (blob.pipelines && *blob.pipelines != *here.pipelines) {
    const auto& a = *blob.pipelines;
    const auto& b = *here.pipelines;
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
      if (i >= a.size() || i >= b.size() || !(a[i] == b[i]))
        return fmt::format("pipeline {} of the blob is {}, this device chooses {}", i,
                           i < a.size() ? describe(a[i]) : "none", i < b.size() ? describe(b[i]) : "none");
  }
  return std::nullopt;
}

}  // namespace nxrt::vk
