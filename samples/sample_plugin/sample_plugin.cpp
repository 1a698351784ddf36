// The smallest useful nxrt plugin: float32 Relu and same-shape Add on the CPU,
// written with the SDK. Copy this file to start a new plugin.
#include <nxrt_sdk/sdk.hpp>

#include <algorithm>
#include <cstring>

namespace {

using nxrt::sdk::Context;
using nxrt::sdk::Kernel;
using nxrt::sdk::Node;

class Relu : public Kernel {
 public:
  void compute(Context& ctx) override {
    auto x = ctx.input(0);
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    const float* in = x.data<float>();
    float* out = y.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = std::max(in[i], 0.0f);
  }
};

class Add : public Kernel {
 public:
  void compute(Context& ctx) override {
    auto a = ctx.input(0), b = ctx.input(1);
    if (a.dims() != b.dims()) nxrt::sdk::fail(NXRT_INVALID_ARGUMENT, "sample Add needs equal shapes");
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, a.dims());
    const float *pa = a.data<float>(), *pb = b.data<float>();
    float* out = y.data<float>();
    for (int64_t i = 0; i < a.numel(); ++i) out[i] = pa[i] + pb[i];
  }
};

class SampleSession : public nxrt::sdk::HostMemorySession {
 public:
  SampleSession() {
    registry_.add({.op = "Relu", .domain = "", .since = 6, .check = [](const Node& n) { return nxrt::sdk::require_dtypes(n, {NXRT_DTYPE_FLOAT32}); },
                   .create = [](const Node&, SampleSession&) { return std::make_unique<Relu>(); }});
    registry_.add({.op = "Add", .domain = "", .since = 7,
                   .check = [](const Node& n) -> std::optional<nxrt::sdk::Refusal> {
                     if (auto r = nxrt::sdk::require_dtypes(n, {NXRT_DTYPE_FLOAT32})) return r;
                     auto a = n.input(0), b = n.input(1);
                     if (!a.static_shape() || !b.static_shape() || !std::ranges::equal(a.dims(), b.dims()))
                       return nxrt::sdk::refuse(NXRT_REFUSE_SHAPE, "sample Add needs two inputs of the same static shape");
                     return std::nullopt;
                   },
                   .create = [](const Node&, SampleSession&) { return std::make_unique<Add>(); }});
  }
  void get_capability(const nxrt::sdk::Graph& g, nxrt_claim_sink* sink) override { registry_.claim(g, sink); }
  std::unique_ptr<Kernel> create_kernel(const nxrt::sdk::Graph& g) override { return registry_.create(g, *this); }

 private:
  nxrt::sdk::KernelRegistry<SampleSession> registry_;
};

class SamplePlugin : public nxrt::sdk::Plugin {
 public:
  const char* name() const override { return "sample"; }
  const char* version() const override { return "0.1.0"; }
  uint64_t features() const override { return NXRT_FEATURE_CONCURRENT_RUN | nxrt::sdk::kHostMemoryFeatures; }
  uint32_t device_count() override { return 1; }
  nxrt::sdk::DeviceDescription describe_device(uint32_t) override {
    nxrt::sdk::DeviceDescription d;
    d.kind = NXRT_DEVICE_CPU;
    d.name = "sample CPU device";
    d.vendor = "nxrt samples";
    d.dtypes = 1ull << NXRT_DTYPE_FLOAT32;
    d.host_addressable = true;
    return d;
  }
  std::unique_ptr<nxrt::sdk::Session> create_session(uint32_t, const nxrt::sdk::Options&) override {
    return std::make_unique<SampleSession>();
  }
};

}  // namespace

NXRT_SDK_DEFINE_PLUGIN(SamplePlugin)
