// Test plugin: loads and negotiates fine but finds no device.
#include <nxrt_sdk/sdk.hpp>

namespace {
class NoDevicePlugin : public nxrt::sdk::Plugin {
 public:
  const char* name() const override { return "nodevice"; }
  const char* version() const override { return "0.0.1"; }
  uint32_t device_count() override { return 0; }
  const char* no_device_reason() override { return "no test accelerator is attached"; }
  nxrt::sdk::DeviceDescription describe_device(uint32_t) override { return {}; }
  std::unique_ptr<nxrt::sdk::Session> create_session(uint32_t, const nxrt::sdk::Options&) override {
    nxrt::sdk::fail(NXRT_NOT_FOUND, "no device");
  }
};
}  // namespace

NXRT_SDK_DEFINE_PLUGIN(NoDevicePlugin)
