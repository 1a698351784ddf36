// The CPU plugin: identity, the one CPU device, sessions (options + thread
// pool). The registry of single-node kernels is built in ops.cpp.
#include <string>
#include <vector>

#include "cpu_info.hpp"
#include "gemm.hpp"
#include "ops.hpp"

namespace nxrt::cpu {

CpuSession::CpuSession(int threads) : pool_(threads) {}

void CpuSession::get_capability(const sdk::Graph& g, nxrt_claim_sink* sink) { claim_nodes_fused(g, sink); }

std::unique_ptr<Kernel> CpuSession::create_kernel(const sdk::Graph& subgraph) {
  if (subgraph.node_count() > 1) return create_fused_kernel(subgraph, *this);
  return registry().create(subgraph, *this);
}

namespace {

constexpr int kMaxThreads = 1024;

int parse_threads(const sdk::Options& o) {
  auto it = o.find("threads");
  if (it == o.end()) return cpu_info().hardware_threads;
  const int64_t v = sdk::option_int(o, "threads", 0);
  if (v < 0 || v > kMaxThreads)
    sdk::fail(NXRT_INVALID_ARGUMENT, "option 'threads' must be between 0 and {} (0 = one per hardware thread), got '{}'",
              kMaxThreads, it->second);
  return v == 0 ? cpu_info().hardware_threads : int(v);
}

class CpuPlugin final : public sdk::Plugin {
 public:
  CpuPlugin() {
    const CpuInfo& c = cpu_info();
    name_ = c.model_name;
    vendor_ = c.vendor;
    isa_ = c.isa_name();
    threads_ = std::to_string(c.hardware_threads);
    gemm_ = gemm_kernel_name();
    active_isa_ = active_isa() == Isa::avx512 ? "avx512f" : active_isa() == Isa::avx2 ? "avx2" : "generic";
    props_ = {{"isa", isa_.c_str()},
              {"active_isa", active_isa_.c_str()},
              {"threads", threads_.c_str()},
              {"gemm_kernel", gemm_.c_str()},
              {"streams", "none (synchronous)"}};
    info_ = nxrt_device_info{};
    info_.struct_size = sizeof(nxrt_device_info);
    info_.kind = NXRT_DEVICE_CPU;
    info_.name = name_.c_str();
    info_.vendor = vendor_.c_str();
    info_.memory_bytes = c.memory_bytes;
    for (nxrt_dtype t : kAllFixed) info_.dtypes |= uint64_t(1) << unsigned(t);
    info_.host_addressable = 1;
    info_.property_count = uint32_t(props_.size());
    info_.properties = props_.data();
  }
  const char* name() const override { return "cpu"; }
  const char* version() const override { return "0.1.0"; }
  uint64_t features() const override { return NXRT_FEATURE_CONCURRENT_RUN | NXRT_FEATURE_FUSED_GROUPS; }
  uint32_t device_count() override { return 1; }
  const char* no_device_reason() override { return "the CPU is always available"; }
  void device_info(uint32_t, nxrt_device_info& info) override { sdk::copy_device_info(info_, info); }
  std::unique_ptr<sdk::Session> create_session(uint32_t, const sdk::Options& options) override {
    return std::make_unique<CpuSession>(parse_threads(options));
  }

 private:
  std::string name_, vendor_, isa_, active_isa_, threads_, gemm_;
  std::vector<nxrt_property> props_;
  nxrt_device_info info_{};
};

}  // namespace
}  // namespace nxrt::cpu

NXRT_SDK_DEFINE_PLUGIN(nxrt::cpu::CpuPlugin)
