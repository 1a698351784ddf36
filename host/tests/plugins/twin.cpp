// Test plugin built twice (TWIN_NAME = twin_a, twin_b): two EPs that both offer the
// same physical device, as a Vulkan and a vendor plugin would for one GPU. Both
// report the same non-zero uuid, a PCI bus id and free memory, so `nxrt plugins`
// must show the second as the same device as the first. Claims nothing.
#include <nxrt_sdk/sdk.hpp>

#ifndef TWIN_NAME
#error "TWIN_NAME must be defined"
#endif

namespace {

using namespace nxrt::sdk;

class TwinSession : public HostMemorySession {
 public:
  void get_capability(const Graph& g, nxrt_claim_sink* sink) override {
    for (size_t i = 0; i < g.node_count(); ++i)
      check(host().refuse_node(sink, g.node(i).index(), NXRT_REFUSE_OP, "twin runs nothing"));
  }
  std::unique_ptr<Kernel> create_kernel(const Graph&) override { fail(NXRT_UNSUPPORTED, "twin runs nothing"); }
};

class TwinPlugin : public Plugin {
 public:
  const char* name() const override { return TWIN_NAME; }
  const char* version() const override { return "0.0.1"; }
  uint32_t device_count() override { return 1; }
  DeviceDescription describe_device(uint32_t) override {
    DeviceDescription d;
    d.kind = NXRT_DEVICE_OTHER;
    d.name = "twin test accelerator";
    d.vendor = "nxrt tests";
    d.vendor_id = 0x1234;
    d.device_id = 0x5678;
    const uint8_t uuid[16] = {0x6e, 0x78, 0x72, 0x74, 0x2d, 0x74, 0x77, 0x69, 0x6e, 0x2d, 0x75, 0x75, 0x69, 0x64, 0x00, 0x01};
    std::copy(uuid, uuid + 16, d.uuid);
    d.memory_bytes = 8ull << 30;
    d.dtypes = 1ull << NXRT_DTYPE_FLOAT32;
    d.pci_bus_id = "0000:3b:00.0";
    return d;
  }
  uint64_t memory_free(uint32_t) override { return 3ull << 30; }
  std::unique_ptr<Session> create_session(uint32_t, const Options&) override { return std::make_unique<TwinSession>(); }
};

}  // namespace

NXRT_SDK_DEFINE_PLUGIN(TwinPlugin)
