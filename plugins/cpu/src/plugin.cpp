// The CPU plugin: identity, the one CPU device, sessions (options + thread
// pool). The registry of single-node kernels is built in ops.cpp.
#include <unistd.h>

#include <string>
#include <vector>

#include "cpu_info.hpp"
#include "gemm.hpp"
#include "gemm_bf16.hpp"
#include "kernel_cache.hpp"
#include "ops.hpp"

namespace nxrt::cpu {

CpuSession::CpuSession(int threads, std::string fingerprint, bool offline, bool bf16)
    : pool_(threads), fingerprint_(std::move(fingerprint)), offline_(offline), bf16_(bf16) {}

void CpuSession::get_capability(const sdk::Graph& g, nxrt_claim_sink* sink) { claim_nodes_fused(g, sink); }

std::unique_ptr<Kernel> CpuSession::create_kernel(const sdk::Graph& subgraph) {
  if (subgraph.node_count() > 1)
    return sdk::create_prepacked(fused_kind(subgraph), &counters(),
                                 [&](sdk::Prepacked& pp) { return create_fused_kernel(subgraph, *this, pp); });
  return registry().create(subgraph, *this);
}

sdk::CacheJudgement CpuSession::judge(const std::string& fingerprint) {
  return judge_cpu_fingerprint(fingerprint, fingerprint_);
}

std::unique_ptr<Kernel> CpuSession::import_kernel(const sdk::Graph& subgraph, std::span<const uint8_t> blob,
                                                  sdk::CacheJudgement&) {
  try {
    if (subgraph.node_count() > 1)
      return sdk::import_prepacked(fused_kind(subgraph), blob,
                                   [&](sdk::Prepacked& pp) { return create_fused_kernel(subgraph, *this, pp); });
    return registry().import(subgraph, *this, blob);
  } catch (const sdk::Error& e) {
    // The node itself is the problem (kernel_create will say so), not the blob: compile it.
    throw sdk::BlobRejected{NXRT_CACHE_RECOMPILE, fmt::format("rebuilding the kernel from the blob failed: {}", e.what())};
  }
}

void* CpuSession::alloc(nxrt_memory_kind kind, uint64_t bytes, uint64_t alignment) {
  if (offline_) sdk::fail(NXRT_UNSUPPORTED, "an offline (compile-only) CPU session has no memory");
  return HostMemorySession::alloc(kind, bytes, alignment);
}

void CpuSession::copy(std::span<const nxrt_copy_region> regions, sdk::Stream* stream) {
  if (offline_) sdk::fail(NXRT_UNSUPPORTED, "an offline (compile-only) CPU session copies nothing");
  HostMemorySession::copy(regions, stream);
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

// cpu.precision: "fp32" (the default) or "bf16". bf16 needs a CPU with AVX-512 BF16, which
// `has_bf16` says (this one, or a described one for offline compiles) and `where` names.
bool parse_bf16(const sdk::Options& o, bool has_bf16, const std::string& where) {
  auto it = o.find("cpu.precision");
  if (it == o.end() || it->second.empty() || it->second == "fp32") return false;
  if (it->second != "bf16")
    sdk::fail(NXRT_INVALID_ARGUMENT, "option 'cpu.precision' must be 'fp32' or 'bf16', got '{}'", it->second);
  if (!has_bf16)
    sdk::fail(NXRT_UNSUPPORTED,
              "option 'cpu.precision=bf16' needs AVX-512 BF16 (VDPBF16PS), which {} lacks; run without it for float32",
              where);
  return true;
}

std::string session_fingerprint(Isa isa, bool bf16) {
  return bf16 ? cpu_fingerprint(isa) + "; precision=bf16" : cpu_fingerprint(isa);
}

class CpuPlugin final : public sdk::Plugin {
 public:
  const char* name() const override { return "cpu"; }
  const char* version() const override { return kCpuPluginVersion; }
  uint64_t features() const override {
    return NXRT_FEATURE_CONCURRENT_RUN | NXRT_FEATURE_FUSED_GROUPS | NXRT_FEATURE_STRING_TENSORS | sdk::kHostMemoryFeatures |
           NXRT_FEATURE_KERNEL_CACHE | NXRT_FEATURE_OFFLINE_COMPILE;
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
                    {"active_isa", isa_label(active_isa())},
                    {"threads", std::to_string(c.hardware_threads)},
                    {"gemm_kernel", gemm_kernel_name()},
                    {"bf16", gemm_bf16_supported() ? "yes" : "no"},
                    {"streams", "none (synchronous)"}};
    return d;
  }
  uint64_t memory_free(uint32_t) override { return available_memory_bytes(); }
  std::vector<sdk::OptionSpec> options() const override {
    return {{"cpu.precision", NXRT_OPTION_STRING, "fp32",
             "fp32, or bf16: MatMul and Gemm with constant weights round both operands to bfloat16 and sum in "
             "float32 (AVX-512 BF16; about 2x the multiply-adds, ~3 significant digits per operand)"}};
  }
  std::unique_ptr<sdk::Session> create_session(uint32_t, const sdk::Options& options) override {
    const std::string cpu = cpu_info().model_name + (active_isa() == cpu_info().isa
                                                         ? ""
                                                         : fmt::format(", capped to {} by NXRT_CPU_ISA", isa_label(active_isa())));
    const bool bf16 = parse_bf16(options, gemm_bf16_supported(), "this CPU (" + cpu + ")");
    return std::make_unique<CpuSession>(parse_threads(options), session_fingerprint(active_isa(), bf16), false, bf16);
  }
  // Packs for the CPU a description names: its ISA ("active_isa", as describe_device reports
  // it, else "isa") sets the fingerprint; the packed layout is the same for every ISA this
  // build knows, so only an unknown ISA or a non-CPU device is refused.
  std::unique_ptr<sdk::Session> create_offline_session(const sdk::Options& device, const sdk::Options& options) override {
    auto kind = device.find("kind");
    if (kind != device.end() && kind->second != "cpu")
      sdk::fail(NXRT_UNSUPPORTED, "the CPU plugin compiles for CPU devices, the description is of kind '{}'", kind->second);
    auto isa = device.find("active_isa");
    if (isa == device.end()) isa = device.find("isa");
    if (isa == device.end())
      sdk::fail(NXRT_INVALID_ARGUMENT, "the device description has no 'isa' (or 'active_isa') property, e.g. avx2");
    const auto target = isa_from_name(isa->second);
    if (!target)
      sdk::fail(NXRT_UNSUPPORTED, "this CPU plugin build cannot pack for ISA '{}' (it knows avx512f, avx2, generic)",
                isa->second);
    auto bf16_prop = device.find("bf16");
    const bool bf16 = parse_bf16(options, *target == Isa::avx512 && bf16_prop != device.end() && bf16_prop->second == "yes",
                                 "the described CPU (no property bf16=yes with ISA avx512f)");
    return std::make_unique<CpuSession>(1, session_fingerprint(*target, bf16), true, bf16);
  }
};

}  // namespace
}  // namespace nxrt::cpu

NXRT_SDK_DEFINE_PLUGIN(nxrt::cpu::CpuPlugin)
