// ep_minimal: the smallest useful nxrt EP plugin. Host memory; float32 Add, Sub, Mul, Div with
// numpy broadcasting and dynamic shapes (the output shape comes from the run-time inputs), and
// Relu. Built against an installed nxrt: find_package(nxrt) + nxrt_add_ep_plugin.
#include <nxrt_sdk/broadcast.hpp>
#include <nxrt_sdk/sdk.hpp>

#include <algorithm>
#include <climits>
#include <functional>

namespace {

namespace sdk = nxrt::sdk;

template <typename Op>
class Binary : public sdk::Kernel {
 public:
  void compute(sdk::Context& ctx) override {
    auto a = ctx.input(0), b = ctx.input(1);
    auto dims = sdk::broadcast_shape(a.dims(), b.dims());  // fails clearly on a mismatch
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, dims);
    const float *pa = a.data<float>(), *pb = b.data<float>();
    float* out = y.data<float>();
    sdk::for_each_broadcast(dims, a.dims(), b.dims(), [&](int64_t i, int64_t ia, int64_t ib) { out[i] = Op{}(pa[ia], pb[ib]); });
  }
};

class Relu : public sdk::Kernel {
 public:
  void compute(sdk::Context& ctx) override {
    auto x = ctx.input(0);
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    const float* in = x.data<float>();
    float* out = y.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = std::max(in[i], 0.0f);
  }
};

class MinimalSession : public sdk::HostMemorySession {
 public:
  MinimalSession() {
    binary<std::plus<float>>("Add", 7);
    binary<std::minus<float>>("Sub", 7);
    binary<std::multiplies<float>>("Mul", 7);
    binary<std::divides<float>>("Div", 7);
    registry_.add({.op = "Relu", .domain = "", .since = 6, .until = INT_MAX, .check = [](const sdk::Node& n) { return sdk::require_dtypes(n, {NXRT_DTYPE_FLOAT32}); },
                   .create = [](const sdk::Node&, MinimalSession&) { return std::make_unique<Relu>(); }});
  }
  void get_capability(const sdk::Graph& g, nxrt_claim_sink* sink) override { registry_.claim(g, sink); }
  std::unique_ptr<sdk::Kernel> create_kernel(const sdk::Graph& g) override { return registry_.create(g, *this); }

 private:
  // The opset range and type constraint sit beside the kernel they describe.
  template <typename Op>
  void binary(const char* op, int since) {
    registry_.add({.op = op, .domain = "", .since = since, .until = INT_MAX, .check = [](const sdk::Node& n) -> std::optional<sdk::Refusal> {
                     if (auto r = sdk::require_dtypes(n, {NXRT_DTYPE_FLOAT32})) return r;
                     return sdk::check_broadcast(n);
                   },
                   .create = [](const sdk::Node&, MinimalSession&) { return std::make_unique<Binary<Op>>(); }});
  }
  sdk::KernelRegistry<MinimalSession> registry_;
};

class MinimalPlugin : public sdk::Plugin {
 public:
  const char* name() const override { return "minimal"; }
  const char* version() const override { return "1.0.0"; }
  uint64_t features() const override { return NXRT_FEATURE_CONCURRENT_RUN | sdk::kHostMemoryFeatures; }
  uint32_t device_count() override { return 1; }
  sdk::DeviceDescription describe_device(uint32_t) override {
    sdk::DeviceDescription d;
    d.kind = NXRT_DEVICE_CPU;
    d.name = "ep_minimal host device";
    d.vendor = "nxrt samples";
    d.dtypes = 1ull << NXRT_DTYPE_FLOAT32;
    d.host_addressable = true;
    return d;
  }
  std::unique_ptr<sdk::Session> create_session(uint32_t, const sdk::Options&) override { return std::make_unique<MinimalSession>(); }
};

}  // namespace

NXRT_SDK_DEFINE_PLUGIN(MinimalPlugin)
