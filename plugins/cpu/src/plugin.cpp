// The CPU plugin: identity, the one CPU device, sessions (options + thread
// pool). The registry of single-node kernels is built in ops.cpp.
#include <unistd.h>

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

// Free physical memory now, as the kernel counts it.
uint64_t available_memory_bytes() {
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

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
  const char* name() const override { return "cpu"; }
  const char* version() const override { return "0.2.0"; }
  uint64_t features() const override {
    return NXRT_FEATURE_CONCURRENT_RUN | NXRT_FEATURE_FUSED_GROUPS | NXRT_FEATURE_STRING_TENSORS | sdk::kHostMemoryFeatures;
  }
  uint32_t device_count() override { return 1; }
  const char* no_device_reason() override { return "the CPU is always available"; }
  sdk::DeviceDescription describe_device(uint32_t) override {
    const CpuInfo& c = cpu_info();
    sdk::DeviceDescription d;
    d.kind = NXRT_DEVICE_CPU;
    d.name = c.model_name;
    d.vendor = c.vendor;
    d.memory_bytes = c.memory_bytes;
    for (nxrt_dtype t : kAllFixed) d.dtypes |= uint64_t(1) << unsigned(t);
    d.dtypes |= uint64_t(1) << unsigned(NXRT_DTYPE_STRING);
    d.host_addressable = true;
    d.properties = {{"isa", c.isa_name()},
                    {"active_isa", active_isa() == Isa::avx512 ? "avx512f" : active_isa() == Isa::avx2 ? "avx2" : "generic"},
                    {"threads", std::to_string(c.hardware_threads)},
                    {"gemm_kernel", gemm_kernel_name()},
                    {"streams", "none (synchronous)"}};
    return d;
  }
  uint64_t memory_free(uint32_t) override { return available_memory_bytes(); }
  std::unique_ptr<sdk::Session> create_session(uint32_t, const sdk::Options& options) override {
    return std::make_unique<CpuSession>(parse_threads(options));
  }
};

}  // namespace
}  // namespace nxrt::cpu

NXRT_SDK_DEFINE_PLUGIN(nxrt::cpu::CpuPlugin)
