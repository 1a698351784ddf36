// Test plugin for the optimizer's fusion groups (level 3): it claims exactly the nodes the host
// annotated as one "Gelu" group (node_attribute "nxrt.fusion" / "nxrt.fusion_group"), as one
// claim, and runs the whole group as one kernel computing 0.5 x (1 + erf(x / sqrt 2)). Every
// other node it refuses, so without the annotation (levels 0..2) it claims nothing.
#include <nxrt_sdk/sdk.hpp>

#include <cmath>
#include <set>
#include <vector>

namespace {

using nxrt::sdk::Context;
using nxrt::sdk::Kernel;

class GeluKernel : public Kernel {
 public:
  explicit GeluKernel(size_t x) : x_(x) {}
  void compute(Context& ctx) override {
    auto x = ctx.input(x_);
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    const float* in = x.data<float>();
    float* out = y.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = float(0.5 * in[i] * (1.0 + std::erf(in[i] / std::sqrt(2.0))));
  }

 private:
  size_t x_;  // the group's one non-constant input
};

class FusionSession : public nxrt::sdk::HostMemorySession {
 public:
  void get_capability(const nxrt::sdk::Graph& g, nxrt_claim_sink* sink) override {
    std::set<size_t> in_view, claimed;
    for (size_t i = 0; i < g.node_count(); ++i) in_view.insert(g.node(i).index());
    for (size_t i = 0; i < g.node_count(); ++i) {
      auto n = g.node(i);
      if (claimed.count(n.index())) continue;
      if (n.attr_string("nxrt.fusion", "") == "Gelu") {
        std::vector<int64_t> group = n.attr_ints("nxrt.fusion_group");
        std::vector<size_t> nodes(group.begin(), group.end());
        bool all = !nodes.empty();
        for (size_t k : nodes) all = all && in_view.count(k);
        if (all) {
          nxrt::sdk::check(nxrt::sdk::host().claim_nodes(sink, nodes.data(), nodes.size(), 0.0));
          claimed.insert(nodes.begin(), nodes.end());
          continue;
        }
      }
      nxrt::sdk::check(nxrt::sdk::host().refuse_node(sink, n.index(), NXRT_REFUSE_OP, "only annotated Gelu groups"));
    }
  }
  std::unique_ptr<Kernel> create_kernel(const nxrt::sdk::Graph& g) override {
    if (g.node_count() != 5 || g.output_count() != 1) nxrt::sdk::fail(NXRT_UNSUPPORTED, "expected one Gelu group of 5 nodes");
    for (size_t i = 0; i < g.input_count(); ++i)
      if (!g.input(i).is_constant()) return std::make_unique<GeluKernel>(i);
    nxrt::sdk::fail(NXRT_UNSUPPORTED, "the Gelu group has no non-constant input");
  }
};

class FusionPlugin : public nxrt::sdk::Plugin {
 public:
  const char* name() const override { return "fusion"; }
  const char* version() const override { return "0.0.1"; }
  uint64_t features() const override { return NXRT_FEATURE_FUSED_GROUPS | NXRT_FEATURE_CONCURRENT_RUN; }
  uint32_t device_count() override { return 1; }
  nxrt::sdk::DeviceDescription describe_device(uint32_t) override {
    nxrt::sdk::DeviceDescription d;
    d.kind = NXRT_DEVICE_CPU;
    d.name = "fusion test device";
    d.vendor = "nxrt tests";
    d.dtypes = 1ull << NXRT_DTYPE_FLOAT32;
    d.host_addressable = true;
    return d;
  }
  std::unique_ptr<nxrt::sdk::Session> create_session(uint32_t, const nxrt::sdk::Options&) override {
    return std::make_unique<FusionSession>();
  }
};

}  // namespace

NXRT_SDK_DEFINE_PLUGIN(FusionPlugin)
