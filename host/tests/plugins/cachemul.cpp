// Test plugin for the compiled-model cache (ABI 2.4): float32 Mul by a constant second
// input. kernel_create "compiles" the constant (packs it reversed, the way a real plugin
// prepacks weights); kernel_export writes that packing, kernel_import points into the blob
// instead of packing again. Its device has a number of "lanes" (NXRT_TEST_CACHEMUL_LANES,
// default 8) in the fingerprint: a blob packed for fewer lanes is usable but slower, for
// more it must be recompiled. Offline sessions take the lanes from the described device's
// "cachemul.lanes". Built twice, as version 1.0.0 and (CACHEMUL_VERSION) 1.1.0.
#include <nxrt_sdk/sdk.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#ifndef CACHEMUL_VERSION
#define CACHEMUL_VERSION "1.0.0"
#endif

namespace {

using nxrt::sdk::BlobReader;
using nxrt::sdk::BlobRejected;
using nxrt::sdk::BlobWriter;
using nxrt::sdk::CacheJudgement;
using nxrt::sdk::Context;
using nxrt::sdk::Kernel;

constexpr uint32_t kBlobMagic = 0x4c554d43;  // "CMUL"
constexpr uint32_t kBlobVersion = 1;

int lanes_from_env() {
  const char* e = std::getenv("NXRT_TEST_CACHEMUL_LANES");
  return e && *e ? std::atoi(e) : 8;
}

class PackedMul : public Kernel {
 public:
  // owned: packed here (kernel_create); else `view` points into the blob (kernel_import).
  PackedMul(std::vector<float> owned, const float* view, size_t n) : owned_(std::move(owned)), n_(n) {
    packed_ = owned_.empty() ? view : owned_.data();
  }
  void compute(Context& ctx) override {
    auto x = ctx.input(0);
    if (size_t(x.numel()) != n_) nxrt::sdk::fail(NXRT_INVALID_ARGUMENT, "cachemul: input has {} elements, the constant {}", x.numel(), n_);
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    const float* in = x.data<float>();
    float* out = y.data<float>();
    for (size_t i = 0; i < n_; ++i) out[i] = in[i] * packed_[n_ - 1 - i];
  }
  void export_blob(BlobWriter& w) override {
    w.pod(kBlobMagic);
    w.pod(kBlobVersion);
    w.pod(uint64_t(n_));
    w.align(64);
    w.write(packed_, n_ * sizeof(float));
  }
  const float* packed() const { return packed_; }

 private:
  std::vector<float> owned_;
  const float* packed_ = nullptr;
  size_t n_ = 0;
};

class CacheMulSession : public nxrt::sdk::HostMemorySession {
 public:
  explicit CacheMulSession(int lanes) : lanes_(lanes) {}
  void get_capability(const nxrt::sdk::Graph& g, nxrt_claim_sink* sink) override {
    for (size_t i = 0; i < g.node_count(); ++i) {
      auto n = g.node(i);
      if (n.op_type() == "Mul" && n.domain().empty() && n.input_count() == 2 && n.input(1).is_constant() &&
          n.input(0).dtype() == NXRT_DTYPE_FLOAT32)
        nxrt::sdk::check(nxrt::sdk::host().claim_nodes(sink, std::vector<size_t>{n.index()}.data(), 1, 0));
      else
        nxrt::sdk::check(nxrt::sdk::host().refuse_node(sink, n.index(), NXRT_REFUSE_OP, "cachemul takes Mul by a constant"));
    }
  }
  std::unique_ptr<Kernel> create_kernel(const nxrt::sdk::Graph& g) override {
    auto c = g.node(0).input(1);
    auto t = c.constant();
    const float* p = t.data<float>();
    std::vector<float> packed(p, p + t.numel());
    std::reverse(packed.begin(), packed.end());
    c.capture();
    return std::make_unique<PackedMul>(std::move(packed), nullptr, size_t(t.numel()));
  }
  std::string fingerprint() override { return fmt::format("cachemul {} blob={} lanes={}", CACHEMUL_VERSION, kBlobVersion, lanes_); }
  CacheJudgement judge(const std::string& fp) override {
    const auto at = fp.find("lanes=");
    const auto blob = fp.find(fmt::format("blob={}", kBlobVersion));
    if (fp.rfind("cachemul ", 0) != 0 || at == std::string::npos || blob == std::string::npos)
      return {NXRT_CACHE_UNSUPPORTED, fmt::format("not a cachemul fingerprint: '{}'", fp.substr(0, 80))};
    const int lanes = std::atoi(fp.c_str() + at + 6);
    if (lanes == lanes_) return {};
    if (lanes > 0 && lanes < lanes_)
      return {NXRT_CACHE_USABLE, fmt::format("packed for {} lanes, this device has {}: recompiling would be faster", lanes, lanes_)};
    return {NXRT_CACHE_RECOMPILE, fmt::format("packed for {} lanes, this device has {}", lanes, lanes_)};
  }
  std::unique_ptr<Kernel> import_kernel(const nxrt::sdk::Graph& g, std::span<const uint8_t> blob, CacheJudgement&) override {
    BlobReader r(blob.data(), blob.size());
    if (r.pod<uint32_t>() != kBlobMagic) r.reject("no cachemul magic");
    if (const uint32_t v = r.pod<uint32_t>(); v != kBlobVersion) throw BlobRejected{NXRT_CACHE_RECOMPILE, fmt::format("blob version {}", v)};
    const uint64_t n = r.pod<uint64_t>();
    auto c = g.node(0).input(1);
    if (int64_t(n) != c.constant().numel())
      throw BlobRejected{NXRT_CACHE_RECOMPILE, fmt::format("packed for {} elements, this node's constant has {}", n, c.constant().numel())};
    r.align(64);
    auto data = r.array<float>(n);
    c.capture();
    return std::make_unique<PackedMul>(std::vector<float>{}, data.data(), size_t(n));
  }

 private:
  int lanes_;
};

class CacheMulPlugin : public nxrt::sdk::Plugin {
 public:
  const char* name() const override { return "cachemul"; }
  const char* version() const override { return CACHEMUL_VERSION; }
  uint64_t features() const override {
    return NXRT_FEATURE_CONCURRENT_RUN | NXRT_FEATURE_KERNEL_CACHE | NXRT_FEATURE_OFFLINE_COMPILE;
  }
  uint32_t device_count() override { return 1; }
  nxrt::sdk::DeviceDescription describe_device(uint32_t) override {
    nxrt::sdk::DeviceDescription d;
    d.kind = NXRT_DEVICE_CPU;
    d.name = "cachemul test device";
    d.vendor = "nxrt tests";
    d.dtypes = 1ull << NXRT_DTYPE_FLOAT32;
    d.host_addressable = true;
    d.properties = {{"cachemul.lanes", std::to_string(lanes_from_env())}};
    return d;
  }
  std::unique_ptr<nxrt::sdk::Session> create_session(uint32_t, const nxrt::sdk::Options&) override {
    return std::make_unique<CacheMulSession>(lanes_from_env());
  }
  std::unique_ptr<nxrt::sdk::Session> create_offline_session(const nxrt::sdk::Options& device, const nxrt::sdk::Options&) override {
    auto it = device.find("cachemul.lanes");
    if (it == device.end()) nxrt::sdk::fail(NXRT_INVALID_ARGUMENT, "the described device has no 'cachemul.lanes'");
    const int lanes = std::atoi(it->second.c_str());
    if (lanes <= 0) nxrt::sdk::fail(NXRT_INVALID_ARGUMENT, "'cachemul.lanes' must be a positive integer, got '{}'", it->second);
    return std::make_unique<CacheMulSession>(lanes);
  }
};

}  // namespace

NXRT_SDK_DEFINE_PLUGIN(CacheMulPlugin)
