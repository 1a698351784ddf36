// Test plugin for constant capture (graph_capture_constant, ABI 2.0): float32 Mul whose constant second
// input the kernel copies at kernel_create and captures. At run time it checks
// that the host hands it the shape with no data, as the ABI says. A node named
// "capture_x" instead tries to capture its non-constant first input, which the
// host must refuse.
#include <nxrt_sdk/sdk.hpp>

#include <algorithm>
#include <vector>

namespace {

using nxrt::sdk::Context;
using nxrt::sdk::Kernel;
using nxrt::sdk::Node;

class CapturedMul : public Kernel {
 public:
  CapturedMul(std::vector<float> c, std::vector<int64_t> dims, bool captured)
      : c_(std::move(c)), dims_(std::move(dims)), captured_(captured) {}
  void compute(Context& ctx) override {
    auto x = ctx.input(0), c = ctx.input(1);
    if (!std::ranges::equal(c.dims(), dims_)) nxrt::sdk::fail(NXRT_INTERNAL, "captured input lost its shape");
    if (captured_ && c.raw()) nxrt::sdk::fail(NXRT_INTERNAL, "the host still passes data for a captured constant");
    if (x.numel() != int64_t(c_.size())) nxrt::sdk::fail(NXRT_INVALID_ARGUMENT, "capture Mul needs equal sizes");
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    const float* in = x.data<float>();
    float* out = y.data<float>();
    for (size_t i = 0; i < c_.size(); ++i) out[i] = in[i] * c_[i];
  }

 private:
  std::vector<float> c_;
  std::vector<int64_t> dims_;
  bool captured_;
};

class CaptureSession : public nxrt::sdk::HostMemorySession {
 public:
  CaptureSession() {
    registry_.add({.op = "Mul", .domain = "", .since = 7,
                   .check = [](const Node& n) -> std::optional<nxrt::sdk::Refusal> {
                     if (auto r = nxrt::sdk::require_dtypes(n, {NXRT_DTYPE_FLOAT32})) return r;
                     if (!n.input(1).is_constant()) return nxrt::sdk::refuse(NXRT_REFUSE_OTHER, "needs a constant second input");
                     return std::nullopt;
                   },
                   .create = [](const Node& n, CaptureSession&) -> std::unique_ptr<Kernel> {
                     auto c = n.input(1);
                     auto t = c.constant();
                     const float* p = t.data<float>();
                     std::vector<float> copy(p, p + t.numel());
                     std::vector<int64_t> dims(c.dims().begin(), c.dims().end());
                     if (n.name() == "capture_x") n.input(0).capture();  // must throw
                     bool captured = c.capture();
                     return std::make_unique<CapturedMul>(std::move(copy), std::move(dims), captured);
                   }});
  }
  void get_capability(const nxrt::sdk::Graph& g, nxrt_claim_sink* sink) override { registry_.claim(g, sink); }
  std::unique_ptr<Kernel> create_kernel(const nxrt::sdk::Graph& g) override { return registry_.create(g, *this); }

 private:
  nxrt::sdk::KernelRegistry<CaptureSession> registry_;
};

class CapturePlugin : public nxrt::sdk::Plugin {
 public:
  const char* name() const override { return "capture"; }
  const char* version() const override { return "0.0.1"; }
  uint64_t features() const override { return NXRT_FEATURE_CONCURRENT_RUN; }
  uint32_t device_count() override { return 1; }
  nxrt::sdk::DeviceDescription describe_device(uint32_t) override {
    nxrt::sdk::DeviceDescription d;
    d.kind = NXRT_DEVICE_CPU;
    d.name = "capture test device";
    d.vendor = "nxrt tests";
    d.dtypes = 1ull << NXRT_DTYPE_FLOAT32;
    d.host_addressable = true;
    return d;
  }
  std::unique_ptr<nxrt::sdk::Session> create_session(uint32_t, const nxrt::sdk::Options&) override {
    return std::make_unique<CaptureSession>();
  }
};

}  // namespace

NXRT_SDK_DEFINE_PLUGIN(CapturePlugin)
