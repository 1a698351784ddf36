// nxrt Vulkan execution provider: the SDK glue over the Vulkan core.
#include "device_traits.hpp"
#include "kernel_blob.hpp"
#include "program.hpp"
#include "run_registry.hpp"

#include <nxrt_sdk/sdk.hpp>

#include <cstring>
#include <deque>

namespace nxrt::vk {
namespace {

using namespace nxrt::sdk;

constexpr const char* kVersion = "0.3.0";

struct VkStreamW : sdk::Stream {
  std::unique_ptr<vk::Stream> s;
  explicit VkStreamW(Device& d) : s(std::make_unique<vk::Stream>(d)) {}
  explicit VkStreamW(std::unique_ptr<vk::Stream> imported) : s(std::move(imported)) {}
  void synchronize() override { s->synchronize(); }
  void wait(sdk::Event& e) override;
};
struct VkEventW : sdk::Event {
  vk::Event e;
  void record(sdk::Stream& s) override { e.record(*static_cast<VkStreamW&>(s).s); }
  void synchronize() override { e.synchronize(); }
};
void VkStreamW::wait(sdk::Event& e) { static_cast<VkEventW&>(e).e.wait_on(*s); }

vk::Stream* native(const Context& ctx) {
  auto* w = stream_of<VkStreamW>(ctx);
  return w ? w->s.get() : nullptr;
}

// ------------------------------------------------------- graph -> IR

// Constants up to this size are copied into the IR (shapes, axes, Clip bounds...).
constexpr size_t kSmallConst = 1 << 16;

struct IrBuilder {
  IrGraph g;
  std::map<const nxrt_value*, int> ids;

  int value(Value v) {
    if (!v.present()) return -1;
    auto it = ids.find(v.raw());
    if (it != ids.end()) return it->second;
    IrValue iv;
    iv.name = std::string(v.name());
    iv.dtype = v.dtype();
    iv.rank = v.rank();
    auto d = v.dims();
    iv.dims.assign(d.begin(), d.end());
    iv.is_const = v.is_constant();
    if (iv.is_const) {
      nxrt_const_tensor t{};
      t.struct_size = sizeof t;
      nxrt_status* st = host().value_constant(v.raw(), &t);
      if (st) host().status_release(st);
      if (!st && t.memory != NXRT_MEMORY_DEVICE) {
        size_t n = dtype_size(t.dtype);
        for (uint32_t i = 0; i < t.rank; ++i) n *= size_t(t.dims[i]);
        if (n <= kSmallConst && (t.data || n == 0)) {
          iv.has_data = true;
          iv.data.dtype = t.dtype;
          iv.data.dims.assign(t.dims, t.dims + t.rank);
          auto* p = static_cast<const uint8_t*>(t.data) + t.byte_offset;
          iv.data.bytes.assign(p, p + n);
        }
      }
    }
    int id = g.add_value(std::move(iv));
    ids[v.raw()] = id;
    return id;
  }

  void node(const Graph& graph, Node n) {
    IrNode in;
    in.op = std::string(n.op_type());
    in.domain = std::string(n.domain());
    if (in.domain == "ai.onnx") in.domain.clear();
    in.opset = graph.opset(in.domain.c_str());
    in.index = n.index();
    in.name = std::string(n.name());
    for (size_t i = 0; i < n.attribute_count(); ++i) {
      Attribute a = n.attribute_at(i);
      Attr at;
      at.type = a.type();
      switch (at.type) {
        case NXRT_ATTR_INT: at.i = a.i(); break;
        case NXRT_ATTR_FLOAT: at.f = a.f(); break;
        case NXRT_ATTR_STRING: at.s = a.s(); break;
        case NXRT_ATTR_INTS: at.ints = a.ints(); break;
        case NXRT_ATTR_FLOATS: at.floats = a.floats(); break;
        default: break;
      }
      in.attrs[std::string(a.name())] = std::move(at);
    }
    for (size_t i = 0; i < n.input_count(); ++i) in.in.push_back(value(n.input(i)));
    for (size_t i = 0; i < n.output_count(); ++i) in.out.push_back(value(n.output(i)));
    g.nodes.push_back(std::move(in));
  }
};

// The IR of one claim's view, every node checked as get_capability checked it.
IrGraph claim_ir(const Graph& sg, const DeviceLimits& limits) {
  IrBuilder b;
  for (size_t i = 0; i < sg.input_count(); ++i) b.g.inputs.push_back(b.value(sg.input(i)));
  for (size_t i = 0; i < sg.node_count(); ++i) b.node(sg, sg.node(i));
  for (size_t i = 0; i < sg.output_count(); ++i) b.g.outputs.push_back(b.value(sg.output(i)));
  for (auto& n : b.g.nodes)
    if (auto r = check_node(b.g, n, limits)) fail(NXRT_UNSUPPORTED, "node {} ({}): {}", n.index, n.op, r->message);
  return std::move(b.g);
}

// ------------------------------------------------------- kernels

// A kernel of an offline session (ABI 2.4 offline compile): its compile choices for the
// described device, to be exported; it never runs.
class OfflineKernel : public Kernel {
 public:
  explicit OfflineKernel(KernelChoices c) : c_(std::move(c)) {}
  void compute(Context&) override {
    fail(NXRT_UNSUPPORTED, "a kernel compiled for a described Vulkan device is exported, never run");
  }
  void export_blob(BlobWriter& w) override { write_blob(w, c_, {}); }

 private:
  KernelChoices c_;
};

class VkKernel : public Kernel {
 public:
  VkKernel(Device& d, IrGraph g, RunRegistry& runs, KernelChoices identity)
      : dev_(d), prog_(d, std::move(g)), runs_(runs), identity_(std::move(identity)) {}
  // The choices of the Program (its fused group, the pipelines of the claim's static
  // shapes) and the driver's pipeline cache as it is now.
  void export_blob(BlobWriter& w) override {
    KernelChoices c = identity_;
    choose(c, prog_.graph());
    const std::vector<uint8_t> driver_cache = dev_.pipeline_cache_data();
    write_blob(w, c, driver_cache);
  }
  // ABI 2.5: the group as the Program runs it (after epilogue fusion), recorded once into
  // one command buffer and replayed.
  std::string describe() const override {
    return fmt::format("one command buffer of {} compute steps ({} activations fused into epilogues)",
                       prog_.graph().nodes.size(), prog_.fused_count());
  }
  void compute(Context& ctx) override {
    const IrGraph& g = prog_.graph();
    std::vector<Program::Input> in(g.inputs.size());
    for (size_t i = 0; i < in.size(); ++i) {
      auto t = ctx.optional_input(i);
      if (!t) continue;
      in[i].dims = t->dims();
      in[i].loc = resolve(*t, "input", i);
    }
    vk::Stream* s = native(ctx);
    bool own = !s;
    std::unique_lock<std::mutex> shared;
    if (own) {
      shared = dev_.default_stream_lock();
      s = &dev_.default_stream();
    }
    // Profiled runs (on_run_start said so) record timestamps around the command buffer.
    const uint64_t run_id = ctx.run_id();
    const bool profile = runs_.profiled(run_id);
    auto timing = prog_.run(in, [&](size_t i, nxrt_dtype dt, const Shape& dims) {
      auto t = ctx.output(i, dt, std::span<const int64_t>(dims.data(), dims.size()));
      return resolve(t, "output", i);
    }, *s, profile);
    if (timing) runs_.add(run_id, std::move(timing));
    if (own) s->synchronize();
  }

 private:
  Loc resolve(const ConstTensorView& t, const char* what, size_t i) {
    Loc l;
    l.bytes = t.bytes();
    l.off = t.byte_offset();
    if (t.memory() == NXRT_MEMORY_DEVICE) {
      // Inputs are read-only to the kernel; the Alloc is the plugin's own bookkeeping.
      l.a = static_cast<Alloc*>(const_cast<void*>(t.handle()));
    } else if (t.memory() == NXRT_MEMORY_HOST_PINNED) {
      const char* p = static_cast<const char*>(t.handle()) + t.byte_offset();
      l.a = dev_.find_pinned(p);
      if (l.a) l.off = uint64_t(p - l.a->mapped);
    }
    if (!l.a) fail(NXRT_INVALID_ARGUMENT, "Vulkan kernel {} {} is in host memory; it must be in this session's memory", what, i);
    if (l.off + l.bytes > l.a->size) fail(NXRT_INVALID_ARGUMENT, "Vulkan kernel {} {} overruns its allocation", what, i);
    if (l.off % dev_.limits().minStorageBufferOffsetAlignment)
      fail(NXRT_INVALID_ARGUMENT, "Vulkan kernel {} {} at offset {} is not aligned to {}", what, i, l.off, dev_.limits().minStorageBufferOffsetAlignment);
    return l;
  }
  Device& dev_;
  Program prog_;
  RunRegistry& runs_;
  KernelChoices identity_;  // the claim's digest and text
};

// ------------------------------------------------------- session

class VkSession : public Session {
 public:
  // A compile-only session for a described device (ABI 2.4 offline compile): no
  // VkInstance or VkDevice is touched.
  explicit VkSession(DeviceTraits described) : traits_(std::move(described)) { limits_ = traits_.limits(); }
  VkSession(uint32_t index, const Options& o) {
    int64_t dev = option_int(o, "vulkan.device", index);
    auto& inst = Instance::get();
    if (dev < 0 || size_t(dev) >= inst.devices().size())
      fail(NXRT_INVALID_ARGUMENT, "option vulkan.device={} is out of range: there are {} Vulkan devices", dev,
           inst.devices().size());
    auto it = o.find("vulkan.pipeline_cache");
    dev_ = std::make_unique<Device>(uint32_t(dev), it == o.end() ? std::string() : it->second);
    traits_ = DeviceTraits::from_device(dev_->info());
    limits_ = traits_.limits();
  }

  // Claims maximal runs of the view's nodes (topological order) between refused ones.
  // Model indices may skip nodes the host optimizer removed (a BatchNormalization folded
  // into its Conv, Identity, Constant) or nodes another EP took: the former must not split
  // a group (Conv -> Relu would never meet in one group for epilogue fusion), and the host
  // splits a claim made non-convex by the latter into consecutive runs itself.
  void get_capability(const Graph& g, nxrt_claim_sink* sink) override {
    std::vector<size_t> run;
    auto flush = [&] {
      if (!run.empty()) check(host().claim_nodes(sink, run.data(), run.size(), 0.0));
      run.clear();
    };
    for (size_t i = 0; i < g.node_count(); ++i) {
      Node n = g.node(i);
      IrBuilder b;
      b.node(g, n);
      auto r = check_node(b.g, b.g.nodes[0], limits_);
      size_t idx = n.index();
      if (r) {
        flush();
        check(host().refuse_node(sink, idx, r->reason, r->message.c_str()));
        continue;
      }
      run.push_back(idx);
    }
    flush();
  }

  std::unique_ptr<Kernel> create_kernel(const Graph& sg) override {
    IrGraph g = claim_ir(sg, limits_);
    KernelChoices c = identify(g);
    if (!dev_) {
      prepare_group(g);
      choose(c, g);
      return std::make_unique<OfflineKernel>(std::move(c));
    }
    return std::make_unique<VkKernel>(*dev_, std::move(g), runs_, std::move(c));
  }

  // ABI 2.4 kernel cache: equal for an opened device and its description (device_traits).
  std::string fingerprint() override { return traits_.fingerprint(kVersion); }
  CacheJudgement judge(const std::string& fp) override { return judge_fingerprint(fp, fingerprint()); }
  // The blob's choices must be the ones this device makes for this claim (anything else is
  // another claim, device or build: RECOMPILE with the difference); then its driver
  // pipeline-cache bytes are merged and, when they hold code, its pipelines created now,
  // through the cache, so the first run only records. The kernel is the one kernel_create makes.
  std::unique_ptr<Kernel> import_kernel(const Graph& sg, std::span<const uint8_t> blob, CacheJudgement& j) override {
    Device& d = dev();
    ReadBlob rb = read_blob(blob);
    IrGraph g = claim_ir(sg, limits_);
    KernelChoices here = identify(g);
    IrGraph prepared = g;
    prepare_group(prepared);
    choose(here, prepared);
    if (auto why = mismatch(rb.choices, here)) throw BlobRejected{NXRT_CACHE_RECOMPILE, *why};
    const bool merged = !rb.driver_cache.empty() && d.merge_pipeline_cache(rb.driver_cache);
    if (!rb.driver_cache.empty() && !merged)
      j = {NXRT_CACHE_USABLE, "the blob's driver pipeline cache is not for this device and driver: pipelines compile at first run"};
    // Pipelines are made now only when the driver's cache holds their code (more than its
    // 32-byte header: lavapipe's never does): then creating them costs a lookup, and the
    // first run only records. Otherwise they stay lazy, as after kernel_create, so loading
    // from the cache never costs more than compiling.
    constexpr size_t kCacheHeaderBytes = 16 + VK_UUID_SIZE;
    try {
      if (merged && rb.driver_cache.size() > kCacheHeaderBytes && rb.choices.pipelines)
        for (const PipelineKey& k : *rb.choices.pipelines) d.pipeline(k.shader, k.spec);
    } catch (const Error& e) {
      throw BlobRejected{NXRT_CACHE_RECOMPILE, fmt::format("creating the blob's pipelines failed: {}", e.what())};
    }
    return std::make_unique<VkKernel>(d, std::move(g), runs_, std::move(here));
  }

  void* alloc(nxrt_memory_kind kind, uint64_t bytes, uint64_t alignment) override {
    if (alignment & (alignment - 1)) fail(NXRT_INVALID_ARGUMENT, "alignment {} is not a power of two", alignment);
    if (kind == NXRT_MEMORY_DEVICE) return dev().alloc(bytes, false, alignment);
    if (kind == NXRT_MEMORY_HOST_PINNED) return dev().alloc(bytes, true, alignment)->mapped;
    fail(NXRT_INVALID_ARGUMENT, "memory_alloc: kind {} is not allocated by the Vulkan plugin", int(kind));
  }
  void free(nxrt_memory_kind kind, void* h) override {
    if (kind == NXRT_MEMORY_DEVICE) dev().free(static_cast<Alloc*>(h));
    else if (kind == NXRT_MEMORY_HOST_PINNED) dev().free(dev().find_pinned(h));
  }
  void copy(std::span<const nxrt_copy_region> regions, sdk::Stream* stream) override {
    copy_regions(dev(), regions, stream ? static_cast<VkStreamW*>(stream)->s.get() : nullptr);
  }
  std::unique_ptr<sdk::Stream> create_stream() override { return std::make_unique<VkStreamW>(dev()); }

  // ABI 2.1 interop (vk_core: native_handle, import_stream).
  nxrt_native_handle native_handle(nxrt_native_object what, const void* memory, sdk::Stream* stream) override {
    return vk::native_handle(dev(), what, memory, stream ? static_cast<VkStreamW*>(stream)->s.get() : nullptr);
  }
  std::unique_ptr<sdk::Stream> import_stream(const nxrt_native_handle& h) override {
    return std::make_unique<VkStreamW>(vk::import_stream(dev(), h));
  }
  void set_allocator(const nxrt_device_allocator& a) override { dev().set_allocator(a); }
  nxrt_memory_stats memory_stats() override { return dev().counters().stats(); }
  // Another session of this instance (the SDK checked), so another VkSession.
  void copy_peer(sdk::Session& src, std::span<const nxrt_copy_region> regions, sdk::Stream* stream) override {
    copy_between(static_cast<VkSession&>(src).dev(), dev(), regions, stream ? static_cast<VkStreamW*>(stream)->s.get() : nullptr);
  }
  // ABI 2.2: a caller's VkBuffer on this device, or host memory (VK_EXT_external_memory_host).
  void* import_memory(const nxrt_native_handle& h) override { return dev().import(h); }
  std::unique_ptr<sdk::Event> create_event() override { return std::make_unique<VkEventW>(); }

  // Run hooks. A run is profiled when the host asks for it and this device has
  // timestamp queries; the plugin reads no run options (they are kept with the run).
  void on_run_start(const RunOptions& ro) override {
    runs_.start(ro.run_id, ro.profiling && dev().timestamps(), ro.options);
  }
  // Called after the run's streams were synchronized: every Timing of the run is
  // complete. One event per kernel execution of the run, on the device clock.
  void on_run_end(uint64_t run_id, const nxrt_status* run_status, nxrt_profile_sink* sink) override {
    auto events = runs_.finish(run_id, sink && !run_status);
    for (auto& e : events) report_device_time(sink, e.node, e.name, e.start_ns, e.end_ns);
  }

 private:
  // The opened device; offline sessions answer only what the ABI asks of them.
  Device& dev() {
    if (!dev_) fail(NXRT_UNSUPPORTED, "this Vulkan session compiles for a described device ('{}') and has no device", traits_.name);
    return *dev_;
  }
  std::unique_ptr<Device> dev_;
  DeviceTraits traits_;
  DeviceLimits limits_;
  RunRegistry runs_;  // after dev_: its Timings hold query pools of the device
};

// ------------------------------------------------------- plugin

const char* vendor_name(uint32_t id) {
  switch (id) {
    case 0x1002: return "AMD";
    case 0x10DE: return "NVIDIA";
    case 0x8086: return "Intel";
    case 0x13B5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x106B: return "Apple";
    case 0x10005: return "Mesa";
    default: return "unknown";
  }
}

class VkPlugin : public Plugin {
 public:
  VkPlugin() { Instance::acquire(); }
  ~VkPlugin() override { Instance::release(); }
  const char* name() const override { return "vulkan"; }
  const char* version() const override { return kVersion; }
  // Run hooks and device profiling when some device has timestamps on its compute
  // queue. features() must not differ between instances, so the answer is taken once
  // per process; a session on a device without timestamps reports no device events.
  uint64_t features() const override {
    static const bool timestamps = [] {
      for (auto& d : Instance::get().devices())
        if (d.timestamp_bits > 0 && d.timestamp_period > 0) return true;
      return false;
    }();
    return NXRT_FEATURE_FUSED_GROUPS | NXRT_FEATURE_STREAMS | NXRT_FEATURE_NATIVE_HANDLES | NXRT_FEATURE_STREAM_IMPORT |
           NXRT_FEATURE_EXTERNAL_ALLOCATOR | NXRT_FEATURE_MEMORY_STATS | NXRT_FEATURE_PEER_COPY |
           NXRT_FEATURE_MEMORY_IMPORT | NXRT_FEATURE_KERNEL_CACHE | NXRT_FEATURE_OFFLINE_COMPILE |
           (timestamps ? NXRT_FEATURE_RUN_HOOKS | NXRT_FEATURE_DEVICE_PROFILING : 0);
  }
  uint32_t device_count() override { return uint32_t(Instance::get().devices().size()); }
  const char* no_device_reason() override {
    auto& r = Instance::get().reason();
    return r.empty() ? "" : r.c_str();
  }
  DeviceDescription describe_device(uint32_t index) override {
    auto& d = Instance::get().devices()[index];
    DeviceDescription out;
    switch (d.props.deviceType) {
      case VK_PHYSICAL_DEVICE_TYPE_CPU: out.kind = NXRT_DEVICE_CPU; break;
      case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: out.kind = NXRT_DEVICE_GPU; break;
      default: out.kind = NXRT_DEVICE_OTHER;
    }
    out.name = d.props.deviceName;
    out.vendor = vendor_name(d.props.vendorID);
    out.vendor_id = d.props.vendorID <= 0xffff ? d.props.vendorID : 0;
    out.device_id = d.props.vendorID <= 0xffff ? d.props.deviceID : 0;
    std::memcpy(out.uuid, d.uuid, 16);
    out.memory_bytes = d.device_local_bytes;
    out.dtypes = (1ull << NXRT_DTYPE_FLOAT32) | (1ull << NXRT_DTYPE_INT32) | (1ull << NXRT_DTYPE_INT64) |
                 (d.storage16 ? 1ull << NXRT_DTYPE_FLOAT16 : 0);
    out.host_addressable = false;
    out.properties = d.properties;
    out.pci_bus_id = d.pci_bus_id;
    return out;
  }
  uint64_t memory_free(uint32_t index) override {
    auto& devs = Instance::get().devices();
    return index < devs.size() ? device_local_free_bytes(devs[index]) : 0;
  }
  std::vector<OptionSpec> options() const override {
    return {{"vulkan.device", NXRT_OPTION_INT, "", "Vulkan physical device index to use instead of the session's device"},
            {"vulkan.pipeline_cache", NXRT_OPTION_PATH, "",
             "file the VkPipelineCache is loaded from and saved to (created if missing)"}};
  }
  std::unique_ptr<Session> create_session(uint32_t device, const Options& o) override {
    return std::make_unique<VkSession>(device, o);
  }
  // Needs no driver: the description's properties (DeviceTraits::from_description).
  std::unique_ptr<Session> create_offline_session(const Options& device, const Options&) override {
    return std::make_unique<VkSession>(DeviceTraits::from_description(device));
  }
};

}  // namespace
}  // namespace nxrt::vk

NXRT_SDK_DEFINE_PLUGIN(nxrt::vk::VkPlugin)
