// nxrt CUDA execution provider: the SDK glue over the driver probe, the session's
// device state (device.cpp) and the group executor (executor.cpp).
#include "code_cache.hpp"
#include "cuda_libs.hpp"
#include "device.hpp"
#include "driver_probe.hpp"
#include "executor.hpp"
#include "nvrtc.hpp"
#include "ops.hpp"

#include <nxrt_sdk/sdk.hpp>

#include <fmt/format.h>

namespace nxrt::cuda {
namespace {

using namespace nxrt::sdk;

bool option_bool(const Options& o, const std::string& key, bool fallback) {
  auto it = o.find(key);
  if (it == o.end() || it->second.empty()) return fallback;
  if (it->second == "1" || it->second == "true") return true;
  if (it->second == "0" || it->second == "false") return false;
  fail(NXRT_INVALID_ARGUMENT, "option '{}' must be 0, 1, true or false, got '{}'", key, it->second);
}

constexpr const char* kVersion = "0.1.0";

// What a session compiles for: the architecture and the options that change code.
struct Target {
  int arch = 0;
  std::string name;
  bool tf32 = false, cudnn = true;
};

class CudaSession : public Session {
 public:
  // A session on an opened device.
  CudaSession(const SessionOptions& o, Target t) : dev_(std::make_unique<DeviceContext>(o)), target_(std::move(t)) {}
  // A compile-only session for a described device (ABI 2.4 offline compile): no driver or
  // GPU is touched; NVRTC compiles for the described architecture.
  explicit CudaSession(Target t) : target_(std::move(t)) {
    std::string why;
    nvrtc_ = Nvrtc::get(&why);
    if (!nvrtc_) fail(NXRT_UNSUPPORTED, "{}", why);
  }

  // Claims maximal runs of supported nodes (the view's topological order) as groups, so a
  // whole model becomes one kernel (one CUDA graph) when every node is supported; the host
  // splits a run that is not convex in the whole model.
  void get_capability(const Graph& g, nxrt_claim_sink* sink) override {
    std::vector<size_t> run;
    auto flush = [&] {
      if (!run.empty()) check(host().claim_nodes(sink, run.data(), run.size(), 0.0));
      run.clear();
    };
    for (size_t i = 0; i < g.node_count(); ++i) {
      Node n = g.node(i);
      // A one-node IR through the same builder kernels use: claims and kernels agree.
      IrGraph one = build_node_ir(g, n);
      auto r = check_node(one, one.nodes[0]);
      if (!r) {
        for (size_t k = 1; k < one.nodes[0].in.size(); ++k)
          if (one.nodes[0].in[k] >= 0 && !reads_on_device(one.nodes[0].op, k) && !one.value(one.nodes[0].in[k]).has_data)
            r = refuse(NXRT_REFUSE_OTHER, "{}: input {} must be a constant", one.nodes[0].op, k);
      }
      if (r) {
        flush();
        check(host().refuse_node(sink, n.index(), r->reason, r->message.c_str()));
        continue;
      }
      run.push_back(n.index());
    }
    flush();
  }

  std::unique_ptr<Kernel> create_kernel(const Graph& g) override {
    if (!dev_) {
      PreparedGroup p = prepare_group(build_ir(g), true);
      KernelBlob b;
      b.claim = p.claim;
      b.source = source_digest(p.source);
      if (!p.source.empty()) b.code = nvrtc_->compile(p.source, target_.arch);
      b.cublaslt = cublaslt_version_text();
      b.cudnn = cudnn_version_text();
      return std::make_unique<OfflineKernel>(std::move(b));
    }
    // Element-wise chains are generated and compiled with NVRTC; without it they run as
    // the plugin's precompiled per-node kernels.
    const Nvrtc* nvrtc = online_nvrtc();
    PreparedGroup p = prepare_group(build_ir(g), nvrtc != nullptr);
    KernelCode code;
    if (!p.source.empty()) {
      try {
        code.code = nvrtc->compile(p.source, target_.arch);
      } catch (const Error& e) {  // an NVRTC older than the GPU: the precompiled kernels still run
        const std::string m = fmt::format("{}; this group's element-wise chains run as separate kernels", e.what());
        host().log(NXRT_LOG_WARNING, "cuda", m.c_str());
        p = prepare_group(build_ir(g), false);
      }
    }
    return std::make_unique<GroupKernel>(dev(), std::move(p), runs_, std::move(code));
  }

  // ABI 2.4 kernel cache (code_cache.hpp): equal for an opened device and its description.
  std::string fingerprint() override {
    FingerprintFields f;
    f.plugin_version = kVersion;
    f.arch = target_.arch;
    f.cudart = fmt::format("{}.{}", CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
    f.nvrtc = nvrtc_version_text();
    f.cublaslt = cublaslt_version_text();
    f.cudnn = cudnn_version_text();
    f.tf32 = target_.tf32;
    f.cudnn_conv = target_.cudnn;
    f.name = target_.name;
    return fingerprint_text(f);
  }
  CacheJudgement judge(const std::string& fp) override { return judge_fingerprint(fp, fingerprint()); }

  // The blob's claim and generated source must be this claim's (RECOMPILE otherwise); its
  // cubin is loaded when it is for this architecture (OPTIMAL), its PTX when the code is for
  // a lower one (USABLE: JIT at load), and its algorithm choices are taken when made with
  // the cuBLASLt/cuDNN this session loads (else USABLE: chosen again at the first run).
  std::unique_ptr<Kernel> import_kernel(const Graph& sg, std::span<const uint8_t> blob, CacheJudgement& j) override {
    DeviceContext& d = dev();
    KernelBlob b = read_kernel_blob(blob);
    // The blob's code needs no NVRTC; without code, chains are fused as kernel_create would.
    PreparedGroup p = prepare_group(build_ir(sg), b.source != 0 || online_nvrtc() != nullptr);
    if (b.claim != p.claim)
      throw BlobRejected{NXRT_CACHE_RECOMPILE, "the blob was made for another claim (other nodes, shapes or constants)"};
    if (b.source != source_digest(p.source))
      throw BlobRejected{NXRT_CACHE_RECOMPILE, "the blob's generated code is not what this plugin generates for the claim"};
    std::vector<std::string> slower;
    KernelCode code;
    if (b.source != 0) code = code_for_device(std::move(b.code), &slower);
    take_gemm_choices(d, b, &slower);
    take_conv_choices(d, b, &slower);
    std::unique_ptr<Kernel> k;
    try {
      k = std::make_unique<GroupKernel>(d, std::move(p), runs_, std::move(code));
    } catch (const Error& e) {  // the driver refused the module
      throw BlobRejected{NXRT_CACHE_RECOMPILE, e.what()};
    }
    if (!slower.empty()) {
      j.verdict = NXRT_CACHE_USABLE;
      j.reason = slower[0];
      for (size_t i = 1; i < slower.size(); ++i) j.reason += "; " + slower[i];
    }
    return k;
  }

  void* alloc(nxrt_memory_kind kind, uint64_t bytes, uint64_t alignment) override { return dev().alloc(kind, bytes, alignment); }
  void free(nxrt_memory_kind kind, void* handle) override { dev().free(kind, handle); }
  void copy(std::span<const nxrt_copy_region> regions, Stream* stream) override {
    dev().copy(regions, stream ? static_cast<CudaStream*>(stream)->get() : nullptr, false);
  }
  std::unique_ptr<Stream> create_stream() override {
    DeviceGuard g(dev().device());
    cudaStream_t s = nullptr;
    cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    return std::make_unique<CudaStream>(dev().device(), s, true);
  }
  std::unique_ptr<Event> create_event() override { return std::make_unique<CudaEvent>(dev().device()); }

  void on_run_start(const RunOptions& r) override {
    runs_.start(r.run_id, option_bool(r.options, "cuda.cuda_graph", dev().options().cuda_graph), r.profiling);
  }
  // Profiled runs: each group's device time, on a clock whose zero is the run's first event
  // (the host aligns each run's first device event with its step).
  void on_run_end(uint64_t run_id, const nxrt_status* status, nxrt_profile_sink* sink) override {
    RunState run = runs_.take(run_id);
    DeviceGuard g(dev().device());
    std::string error;
    if (sink && !status && !run.timings.empty()) {
      cudaEvent_t zero = run.timings.front().start;
      for (const auto& t : run.timings) {
        float start_ms = 0.f, end_ms = 0.f;
        cudaError_t e = cudaEventSynchronize(t.end);
        if (e == cudaSuccess) e = cudaEventElapsedTime(&start_ms, zero, t.start);
        if (e == cudaSuccess) e = cudaEventElapsedTime(&end_ms, zero, t.end);
        if (e != cudaSuccess) {
          error = fmt::format("device timing of {}: {}", t.name, cudaGetErrorString(e));
          break;
        }
        report_device_time(sink, t.node_index, t.name, uint64_t(double(start_ms) * 1e6), uint64_t(double(end_ms) * 1e6));
      }
    }
    for (auto& t : run.timings) {
      cudaEventDestroy(t.start);
      cudaEventDestroy(t.end);
    }
    if (!error.empty()) fail(NXRT_INTERNAL, "{}", error);
  }

  nxrt_native_handle native_handle(nxrt_native_object what, const void* memory, Stream* stream) override {
    nxrt_native_handle h{};
    h.struct_size = sizeof h;
    switch (what) {
      case NXRT_NATIVE_OBJECT_DEVICE:
        h.type = NXRT_NATIVE_CUDA_DEVICE;
        h.value = uint64_t(dev().device());
        return h;
      case NXRT_NATIVE_OBJECT_MEMORY: return dev().native_memory(memory);
      case NXRT_NATIVE_OBJECT_STREAM:
        h.type = NXRT_NATIVE_CUDA_STREAM;
        h.handle = uint64_t(uintptr_t(static_cast<CudaStream*>(stream)->get()));
        h.value = uint64_t(dev().device());
        return h;
      default: fail(NXRT_UNSUPPORTED, "the CUDA plugin has no native handle for object kind {}", what);
    }
  }
  std::unique_ptr<Stream> import_stream(const nxrt_native_handle& n) override {
    if (n.type != NXRT_NATIVE_CUDA_STREAM) fail(NXRT_UNSUPPORTED, "stream_import: the CUDA plugin takes CUDA_STREAM (got {})", n.type);
    // The caller's stream (0 = the legacy default stream): work is enqueued on it; never destroyed here.
    return std::make_unique<CudaStream>(dev().device(), reinterpret_cast<cudaStream_t>(uintptr_t(n.handle)), false);
  }
  void set_allocator(const nxrt_device_allocator& a) override { dev().set_allocator(a); }
  nxrt_memory_stats memory_stats() override { return dev().stats(); }
  void copy_peer(Session& src, std::span<const nxrt_copy_region> regions, Stream* stream) override {
    dev().copy_peer(static_cast<CudaSession&>(src).dev(), regions, stream ? static_cast<CudaStream*>(stream)->get() : nullptr, false);
  }
  void* import_memory(const nxrt_native_handle& n) override { return dev().import(n); }

 private:
  // The blob's cubin when it is for this architecture; its PTX (JIT) when the code is for a
  // lower one; RECOMPILE otherwise.
  KernelCode code_for_device(CompiledCode c, std::vector<std::string>* slower) const {
    const int here = target_.arch;
    if (c.arch == 0 || c.arch > here || (c.arch == here && c.cubin.empty()))
      throw BlobRejected{NXRT_CACHE_RECOMPILE, fmt::format("the blob's code is for sm_{}, this device is sm_{}", c.arch, here)};
    KernelCode k;
    k.use_ptx = c.arch < here;
    if (k.use_ptx && c.ptx.empty())
      throw BlobRejected{NXRT_CACHE_RECOMPILE,
                         fmt::format("the blob has a cubin for sm_{} and no PTX; this device is sm_{}", c.arch, here)};
    if (k.use_ptx) slower->push_back(fmt::format("PTX for sm_{} JIT-compiled on sm_{}: slower first run", c.arch, here));
    k.code = std::move(c);
    return k;
  }
  // Algorithm choices go into the session's tables when made with the library version this
  // session loads (the results are that version's opaque structs); else they are made again.
  static void take_gemm_choices(DeviceContext& d, const KernelBlob& b, std::vector<std::string>* slower) {
    if (b.gemm.empty()) return;
    if (b.cublaslt != cublaslt_version_text()) {
      slower->push_back(fmt::format("cuBLASLt choices were made with cuBLASLt {}, this session has {}: chosen again",
                                    b.cublaslt, cublaslt_version_text()));
      return;
    }
    for (const auto& c : b.gemm) {
      cublasLtMatmulHeuristicResult_t r;
      if (c.result.size() != sizeof r)
        throw BlobRejected{NXRT_CACHE_UNSUPPORTED, "corrupt blob: a cuBLASLt choice of another size"};
      std::memcpy(&r, c.result.data(), sizeof r);
      d.cache_algo(c.key, r);
    }
  }
  static void take_conv_choices([[maybe_unused]] DeviceContext& d, const KernelBlob& b, std::vector<std::string>* slower) {
    if (b.conv.empty()) return;
    if (b.cudnn != cudnn_version_text()) {
      slower->push_back(fmt::format("cuDNN choices were made with cuDNN {}, this session has {}: chosen again", b.cudnn,
                                    cudnn_version_text()));
      return;
    }
#if NXRT_CUDA_HAVE_CUDNN
    for (const auto& c : b.conv) {
      cudnnConvolutionFwdAlgoPerf_t r;
      if (c.result.size() != sizeof r) throw BlobRejected{NXRT_CACHE_UNSUPPORTED, "corrupt blob: a cuDNN choice of another size"};
      std::memcpy(&r, c.result.data(), sizeof r);
      d.cache_conv_algo(c.key, r);
    }
#endif
  }
  DeviceContext& dev() {
    if (!dev_)
      fail(NXRT_UNSUPPORTED, "a session compiling for a described CUDA device (no GPU) only compiles and exports kernels");
    return *dev_;
  }
  const Nvrtc* online_nvrtc() {
    std::string why;
    const Nvrtc* n = Nvrtc::get(&why);
    if (!n) {
      std::call_once(nvrtc_warned_, [&] {
        const std::string m = fmt::format("{}; element-wise chains run as separate kernels", why);
        host().log(NXRT_LOG_WARNING, "cuda", m.c_str());
      });
    }
    return n;
  }
  std::unique_ptr<DeviceContext> dev_;
  Target target_;
  const Nvrtc* nvrtc_ = nullptr;  // offline sessions
  std::once_flag nvrtc_warned_;
  RunRegistry runs_;
};

class CudaPlugin : public Plugin {
 public:
  CudaPlugin() : probe_(probe_cuda()) {}
  const char* name() const override { return "cuda"; }
  const char* version() const override { return kVersion; }
  uint64_t features() const override {
    return NXRT_FEATURE_FUSED_GROUPS | NXRT_FEATURE_STREAMS | NXRT_FEATURE_RUN_HOOKS | NXRT_FEATURE_DEVICE_PROFILING |
           NXRT_FEATURE_NATIVE_HANDLES |
           NXRT_FEATURE_STREAM_IMPORT | NXRT_FEATURE_EXTERNAL_ALLOCATOR | NXRT_FEATURE_MEMORY_STATS |
           NXRT_FEATURE_PEER_COPY | NXRT_FEATURE_MEMORY_IMPORT | NXRT_FEATURE_KERNEL_CACHE |
           NXRT_FEATURE_OFFLINE_COMPILE;
  }
  uint32_t device_count() override { return uint32_t(probe_.device_count); }
  const char* no_device_reason() override { return probe_.reason.empty() ? "no device" : probe_.reason.c_str(); }

  DeviceDescription describe_device(uint32_t index) override {
    if (int(index) >= probe_.device_count) fail(NXRT_INVALID_ARGUMENT, "device {} of {}", index, probe_.device_count);
    cudaDeviceProp p{};
    cuda_check(cudaGetDeviceProperties(&p, int(index)), "cudaGetDeviceProperties");
    DeviceDescription d;
    d.kind = NXRT_DEVICE_GPU;
    d.name = p.name;
    d.vendor = "NVIDIA";
    d.vendor_id = 0x10de;
    std::memcpy(d.uuid, p.uuid.bytes, 16);
    d.memory_bytes = p.totalGlobalMem;
    d.dtypes = supported_dtypes();
    d.pci_bus_id = fmt::format("{:04x}:{:02x}:{:02x}.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
    d.properties = {
        {"cuda.compute_capability", fmt::format("{}.{}", p.major, p.minor)},
        {"cuda.sm_count", std::to_string(p.multiProcessorCount)},
        {"cuda.driver_version", fmt::format("{}.{}", probe_.driver_version / 1000, (probe_.driver_version % 1000) / 10)},
        {"cuda.runtime_version", fmt::format("{}.{}", probe_.runtime_version / 1000, (probe_.runtime_version % 1000) / 10)},
        {"cuda.precisions", p.major >= 8 ? "float32 float16 (tf32 with cuda.allow_tf32)" : "float32 float16"},
        {"cuda.kernel_architectures", NXRT_CUDA_ARCHS},
    };
    return d;
  }
  uint64_t memory_free(uint32_t index) override {
    if (int(index) >= probe_.device_count) return 0;
    DeviceGuard g{int(index)};
    size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return free_bytes;
  }
  std::vector<OptionSpec> options() const override {
    return {
        {"cuda.allow_tf32", NXRT_OPTION_BOOL, "0", "float32 MatMul/Gemm/Conv may use TF32 tensor cores (10-bit mantissa products)"},
        {"cuda.cuda_graph", NXRT_OPTION_BOOL, "0", "capture each kernel group's launches as a CUDA graph and replay it while shapes and addresses repeat"},
        {"cuda.cudnn", NXRT_OPTION_BOOL, "1", "convolutions through cuDNN when it loads (else the plugin's own kernels)"},
        {"cuda.arena_keep_bytes", NXRT_OPTION_INT, "-1", "bytes the session's memory pool keeps reserved when idle (-1: all)"},
        {"cuda.vmm_arena", NXRT_OPTION_BOOL, "0", "DEVICE allocations from one growable virtual-memory range (cuMemCreate/cuMemMap) instead of the pool"},
    };
  }
  std::unique_ptr<Session> create_session(uint32_t device, const Options& o) override {
    if (probe_.device_count == 0) fail(NXRT_UNSUPPORTED, "{}", probe_.reason);
    if (int(device) >= probe_.device_count)
      fail(NXRT_INVALID_ARGUMENT, "CUDA device {} does not exist: there are {}", device, probe_.device_count);
    SessionOptions s;
    s.device = int(device);
    s.allow_tf32 = option_bool(o, "cuda.allow_tf32", false);
    s.cuda_graph = option_bool(o, "cuda.cuda_graph", false);
    s.use_cudnn = option_bool(o, "cuda.cudnn", true);
    s.vmm_arena = option_bool(o, "cuda.vmm_arena", false);
    const int64_t keep = option_int(o, "cuda.arena_keep_bytes", -1);
    if (keep < -1) fail(NXRT_INVALID_ARGUMENT, "option 'cuda.arena_keep_bytes' must be -1 or a byte count, got {}", keep);
    s.pool_release_threshold = keep < 0 ? UINT64_MAX : uint64_t(keep);
    cudaDeviceProp p{};
    cuda_check(cudaGetDeviceProperties(&p, int(device)), "cudaGetDeviceProperties");
    Target t{p.major * 10 + p.minor, p.name, s.allow_tf32, s.use_cudnn};
    return std::make_unique<CudaSession>(s, std::move(t));
  }
  // ABI 2.4 offline compile: the description's cuda.compute_capability is what the code
  // depends on; the name is kept for people.
  std::unique_ptr<Session> create_offline_session(const Options& device, const Options& o) override {
    auto cc = device.find("cuda.compute_capability");
    if (cc == device.end())
      fail(NXRT_INVALID_ARGUMENT,
           "the device description has no 'cuda.compute_capability' (e.g. \"9.0\"; give what `nxrt plugins --json` "
           "prints for a CUDA device)");
    const int arch = parse_compute_capability(cc->second);
    if (arch < 0)
      fail(NXRT_INVALID_ARGUMENT, "cuda.compute_capability '{}' is not MAJOR.MINOR", printable_utf8(cc->second.substr(0, 32)));
    auto vendor = device.find("vendor_id");
    if (vendor != device.end() && vendor->second != "4318" && vendor->second != "0x10de")
      fail(NXRT_UNSUPPORTED, "the described device is not an NVIDIA GPU (vendor_id {})",
           printable_utf8(vendor->second.substr(0, 16)));
    Target t{arch, device.at("name"), option_bool(o, "cuda.allow_tf32", false), option_bool(o, "cuda.cudnn", true)};
    return std::make_unique<CudaSession>(std::move(t));
  }

 private:
  ProbeResult probe_;
};

}  // namespace
}  // namespace nxrt::cuda

NXRT_SDK_DEFINE_PLUGIN(nxrt::cuda::CudaPlugin)
