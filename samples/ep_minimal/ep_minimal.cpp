// ep_minimal: the smallest useful nxrt EP plugin. Host memory; float32 Add, Sub, Mul, Div with
// numpy broadcasting and dynamic shapes (the output shape comes from the run-time inputs), and
// Relu. Built against an installed nxrt: find_package(nxrt) + nxrt_add_ep_plugin.
#include <nxrt_sdk/broadcast.hpp>
#include <nxrt_sdk/kernel_def.hpp>
#include <nxrt_sdk/sdk.hpp>

#include <algorithm>
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
  // Each kernel with its ONNX opset range and type constraint.
  MinimalSession() {
    const sdk::Types f32{NXRT_DTYPE_FLOAT32};
    registry_.add(sdk::kernel<Binary<std::plus<float>>, MinimalSession>("Add", {.since = 7}, f32, broadcastable));
    registry_.add(sdk::kernel<Binary<std::minus<float>>, MinimalSession>("Sub", {.since = 7}, f32, broadcastable));
    registry_.add(sdk::kernel<Binary<std::multiplies<float>>, MinimalSession>("Mul", {.since = 7}, f32, broadcastable));
    registry_.add(sdk::kernel<Binary<std::divides<float>>, MinimalSession>("Div", {.since = 7}, f32, broadcastable));
    registry_.add(sdk::kernel<Relu, MinimalSession>("Relu", {.since = 6}, f32));
  }
  void get_capability(const sdk::Graph& g, nxrt_claim_sink* sink) override { registry_.claim(g, sink); }
  std::unique_ptr<sdk::Kernel> create_kernel(const sdk::Graph& g) override { return registry_.create(g, *this); }

 private:
  static std::optional<sdk::Refusal> broadcastable(const sdk::Node& n) { return sdk::check_broadcast(n); }
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
