// Implements the whole C plugin table over a C++ class. A plugin writes:
//
//   class MySession : public nxrt::sdk::Session { ... };
//   class MyPlugin : public nxrt::sdk::Plugin { ... };
//   NXRT_SDK_DEFINE_PLUGIN(MyPlugin)
//
// and gets negotiation (one Plugin object per instance), struct_size checks,
// the option schema, exception->status conversion and object lifetimes for free.
//
// Ownership: the SDK owns one Plugin object per negotiation and each Session, Kernel, Stream and
// Event it hands out as a C object, destroying them on the matching release/shutdown call.
// Thread class: each override has the class nxrt_ep.h gives its entry point: Plugin methods,
// create_session, create_kernel, alloc/free/copy, run hooks and the interop calls [any-thread];
// get_capability and each Stream/Event [per-object]; Kernel::compute [per-object], or
// [any-thread] when the plugin declares NXRT_FEATURE_CONCURRENT_RUN.
#pragma once
#include "context.hpp"
#include "graph.hpp"
#include "kernel_registry.hpp"
#include "memory_accounting.hpp"

#include <algorithm>
#include <atomic>
#include <vector>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

namespace nxrt::sdk {

using Options = std::map<std::string, std::string>;

// Reads an integer option, failing with a message that names the key.
inline int64_t option_int(const Options& o, const std::string& key, int64_t fallback) {
  auto it = o.find(key);
  if (it == o.end() || it->second.empty()) return fallback;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (*end != '\0') fail(NXRT_INVALID_ARGUMENT, "option '{}' must be an integer, got '{}'", key, it->second);
  return v;
}

// One option a plugin reads, declared in its schema (Plugin::options()).
struct OptionSpec {
  std::string name;  // full key: "<plugin name>.<key>"
  nxrt_option_type type = NXRT_OPTION_STRING;
  std::string default_value;
  std::string help;
};

// What a plugin says about one device; the SDK keeps it for the instance's
// life and fills the C struct by the callee-filled rule.
struct DeviceDescription {
  nxrt_device_kind kind = NXRT_DEVICE_OTHER;
  std::string name, vendor;
  uint32_t vendor_id = 0, device_id = 0;
  uint8_t uuid[16] = {};
  uint64_t memory_bytes = 0;
  uint64_t dtypes = 0;  // bit (1 << dtype) per element type
  bool host_addressable = false;
  std::string pci_bus_id;
  std::vector<std::pair<std::string, std::string>> properties;
};

// A run as on_run_start sees it.
struct RunOptions {
  uint64_t run_id = 0;
  bool profiling = false;
  Options options;  // "<plugin name>.<key>" entries
};

class Stream {
 public:
  virtual ~Stream() = default;
  virtual void synchronize() = 0;
  virtual void wait(class Event& e) = 0;
};

class Event {
 public:
  virtual ~Event() = default;
  virtual void record(Stream& s) = 0;
  virtual void synchronize() = 0;
};

class Session {
 public:
  virtual ~Session() = default;
  virtual void get_capability(const Graph& g, nxrt_claim_sink* sink) = 0;
  virtual std::unique_ptr<Kernel> create_kernel(const Graph& subgraph) = 0;
  virtual void* alloc(nxrt_memory_kind kind, uint64_t bytes, uint64_t alignment) = 0;
  virtual void free(nxrt_memory_kind kind, void* handle) = 0;
  virtual void copy(std::span<const nxrt_copy_region> regions, Stream* stream) = 0;
  // Only for plugins that declare NXRT_FEATURE_STREAMS.
  virtual std::unique_ptr<Stream> create_stream() { fail(NXRT_UNSUPPORTED, "streams not implemented"); }
  virtual std::unique_ptr<Event> create_event() { fail(NXRT_UNSUPPORTED, "events not implemented"); }
  // Only for plugins that declare NXRT_FEATURE_RUN_HOOKS. `sink` is non-NULL when
  // the run is profiled and the plugin declares NXRT_FEATURE_DEVICE_PROFILING:
  // report each kernel's device time with report_device_time().
  virtual void on_run_start(const RunOptions&) {}
  virtual void on_run_end(uint64_t /*run_id*/, const nxrt_status* /*run_status*/, nxrt_profile_sink* /*sink*/) {}

  // ABI 2.1, each only for plugins that declare its feature.
  // NXRT_FEATURE_NATIVE_HANDLES: `memory` is a DEVICE handle for NXRT_NATIVE_OBJECT_MEMORY,
  // `stream` this session's stream for NXRT_NATIVE_OBJECT_STREAM, else both NULL. The SDK
  // sets struct_size.
  virtual nxrt_native_handle native_handle(nxrt_native_object what, const void* /*memory*/, Stream* /*stream*/) {
    fail(NXRT_UNSUPPORTED, "no native handle for object kind {}", what);
  }
  // NXRT_FEATURE_STREAM_IMPORT: a stream ordered after the caller's native work.
  virtual std::unique_ptr<Stream> import_stream(const nxrt_native_handle&) {
    fail(NXRT_UNSUPPORTED, "stream import not implemented");
  }
  // NXRT_FEATURE_EXTERNAL_ALLOCATOR: called before any other call on the session.
  virtual void set_allocator(const nxrt_device_allocator&) { fail(NXRT_UNSUPPORTED, "external allocators not implemented"); }
  // NXRT_FEATURE_MEMORY_STATS.
  virtual nxrt_memory_stats memory_stats() { fail(NXRT_UNSUPPORTED, "memory stats not implemented"); }
  // NXRT_FEATURE_PEER_COPY: regions from `src`'s DEVICE memory to this session's (`src` is
  // another session of the same plugin instance; the SDK checks that). Throw
  // NXRT_UNSUPPORTED for a pair you cannot copy between: the host then stages.
  virtual void copy_peer(Session& /*src*/, std::span<const nxrt_copy_region>, Stream*) {
    fail(NXRT_UNSUPPORTED, "peer copies not implemented");
  }
  // ABI 2.2, NXRT_FEATURE_MEMORY_IMPORT: `native` (struct_size set by the SDK) as a DEVICE
  // handle of this session that aliases it. free() of that handle must drop the wrapping
  // only. Throw NXRT_UNSUPPORTED with the reason for memory you cannot use.
  virtual void* import_memory(const nxrt_native_handle& /*native*/) {
    fail(NXRT_UNSUPPORTED, "memory import not implemented");
  }
  // ABI 2.4, NXRT_FEATURE_KERNEL_CACHE (kernel_cache.hpp).
  // What this session's compiled kernels depend on, one line; sessions for equal devices
  // (opened or described) give equal text. Asked once; the SDK keeps it.
  virtual std::string fingerprint() { fail(NXRT_UNSUPPORTED, "kernel cache not implemented"); }
  // Kernels compiled by a session whose fingerprint() was `fingerprint`: usable here? The
  // default accepts exactly this session's own fingerprint.
  virtual CacheJudgement judge(const std::string& fingerprint) {
    const std::string own = this->fingerprint();
    if (fingerprint == own) return {};
    return {NXRT_CACHE_RECOMPILE, fmt::format("compiled for '{}', this session is '{}'", fingerprint, own)};
  }
  // The kernel of `subgraph` rebuilt from what its Kernel::export_blob wrote. `blob` stays
  // valid until the kernel is released (keep pointers into it instead of copies). Throw
  // BlobRejected (BlobReader does) for a blob you cannot use; return a kernel otherwise,
  // setting `judgement` to USABLE with the reason when it works but slower.
  virtual std::unique_ptr<Kernel> import_kernel(const Graph& /*subgraph*/, std::span<const uint8_t> /*blob*/,
                                                CacheJudgement& /*judgement*/) {
    fail(NXRT_UNSUPPORTED, "kernel cache not implemented");
  }
};

// From on_run_end: one kernel's device-side time, on the device's clock.
inline void report_device_time(nxrt_profile_sink* sink, size_t node_index, const std::string& name, uint64_t start_ns,
                               uint64_t end_ns) {
  check(host().profile_device_event(sink, node_index, name.c_str(), start_ns, end_ns));
}

// Memory for plugins whose device memory is host memory (CPU-like), with the interop a
// CPU-like plugin can give for free: host pointers as native handles, the caller's
// allocator (asked for HOST_POINTER memory), memory/transfer stats, peer copies and
// (2.2) imports of anyone's host memory. Declare kHostMemoryFeatures to offer them.
class HostMemorySession : public Session {
 public:
  void* alloc(nxrt_memory_kind, uint64_t bytes, uint64_t alignment) override {
    if (alignment < 64) alignment = 64;
    if (alignment & (alignment - 1)) fail(NXRT_INVALID_ARGUMENT, "alignment {} is not a power of two", alignment);
    uint64_t rounded = (bytes + alignment - 1) / alignment * alignment;
    if (rounded == 0) rounded = alignment;  // zero-byte requests get a unique handle
    void* p;
    if (external_.active()) {
      nxrt_native_handle h = external_.allocate(NXRT_NATIVE_HOST_POINTER, rounded, alignment);
      p = reinterpret_cast<void*>(uintptr_t(h.handle));
      if (uintptr_t(p) % alignment) {
        external_.release(h);
        fail(NXRT_OUT_OF_MEMORY, "the external allocator returned memory aligned below {}", alignment);
      }
      counters_.reserve(h.size);
      std::lock_guard lock(mu_);
      held_[p] = {h, rounded};
    } else {
      p = std::aligned_alloc(alignment, rounded);
      if (!p) fail(NXRT_OUT_OF_MEMORY, "cannot allocate {} bytes", bytes);
      nxrt_native_handle h{};
      h.struct_size = sizeof h;
      h.type = NXRT_NATIVE_HOST_POINTER;
      h.handle = uint64_t(uintptr_t(p));
      h.size = rounded;
      counters_.reserve(rounded);
      std::lock_guard lock(mu_);
      held_[p] = {h, rounded};
    }
    counters_.alloc(rounded);
    return p;
  }
  void free(nxrt_memory_kind, void* handle) override {
    if (!handle) return;
    Held held;
    {
      std::lock_guard lock(mu_);
      auto it = held_.find(handle);
      if (it == held_.end()) return;  // not ours: ignore rather than corrupt the heap
      held = it->second;
      held_.erase(it);
    }
    if (held.imported) return;  // the owner's memory: only the wrapping goes
    const nxrt_native_handle& h = held.native;
    counters_.free(held.bytes);     // what alloc counted as in use
    counters_.unreserve(h.size);    // what the allocator actually holds (may be more)
    if (external_.active()) external_.release(h);
    else std::free(handle);
  }
  void copy(std::span<const nxrt_copy_region> regions, Stream*) override {
    for (auto& r : regions) {
      if (r.bytes == 0) continue;
      if (!r.src || !r.dst) fail(NXRT_INVALID_ARGUMENT, "copy region with a null buffer");
      std::memmove(static_cast<char*>(r.dst) + r.dst_offset, static_cast<const char*>(r.src) + r.src_offset, r.bytes);
      counters_.copied(r.src_memory, r.dst_memory, r.bytes);
    }
  }
  nxrt_native_handle native_handle(nxrt_native_object what, const void* memory, Stream*) override {
    if (what != NXRT_NATIVE_OBJECT_MEMORY) fail(NXRT_UNSUPPORTED, "a host-memory device has no native handle for object kind {}", what);
    std::lock_guard lock(mu_);
    auto it = held_.find(const_cast<void*>(memory));
    if (it == held_.end()) fail(NXRT_INVALID_ARGUMENT, "native_handle: {} is not memory of this session", memory);
    return it->second.native;
  }
  void set_allocator(const nxrt_device_allocator& a) override {
    std::lock_guard lock(mu_);
    if (!held_.empty()) fail(NXRT_INVALID_ARGUMENT, "set_allocator after the session allocated memory");
    external_.set(a);
  }
  nxrt_memory_stats memory_stats() override { return counters_.stats(); }
  // Host memory of anyone (the caller's, or a plugin whose memory is host memory) is
  // usable as it is: the handle is the pointer, not counted as allocated. One pointer is
  // imported once at a time (handles are the pointers themselves).
  void* import_memory(const nxrt_native_handle& n) override {
    if (n.type != NXRT_NATIVE_HOST_POINTER)
      fail(NXRT_UNSUPPORTED, "a host-memory device imports HOST_POINTER memory only (got native type {})", n.type);
    void* p = reinterpret_cast<void*>(uintptr_t(n.handle));
    if (!p) fail(NXRT_INVALID_ARGUMENT, "memory_import: a NULL host pointer");
    std::lock_guard lock(mu_);
    if (held_.count(p)) fail(NXRT_UNSUPPORTED, "memory_import: {} is already memory of this session", p);
    held_[p] = {n, 0, true};
    return p;
  }
  // Both sessions' memory is host memory: a plain copy.
  void copy_peer(Session&, std::span<const nxrt_copy_region> regions, Stream*) override {
    for (auto& r : regions) {
      if (r.bytes == 0) continue;
      if (!r.src || !r.dst) fail(NXRT_INVALID_ARGUMENT, "copy region with a null buffer");
      std::memmove(static_cast<char*>(r.dst) + r.dst_offset, static_cast<const char*>(r.src) + r.src_offset, r.bytes);
      counters_.copied(NXRT_MEMORY_DEVICE, NXRT_MEMORY_DEVICE, r.bytes);
    }
  }
  // Plugins with their own internal buffers (prepacked weights) account them here too.
  MemoryCounters& counters() { return counters_; }

 private:
  struct Held {
    nxrt_native_handle native;  // as allocated (size: what the allocator holds)
    uint64_t bytes = 0;         // counted as in use
    bool imported = false;      // import_memory: the owner's, never freed here
  };
  std::mutex mu_;
  std::map<void*, Held> held_;
  MemoryCounters counters_;
  ExternalAllocator external_;
};
inline constexpr uint64_t kHostMemoryFeatures =
    NXRT_FEATURE_NATIVE_HANDLES | NXRT_FEATURE_EXTERNAL_ALLOCATOR | NXRT_FEATURE_MEMORY_STATS | NXRT_FEATURE_PEER_COPY |
    NXRT_FEATURE_MEMORY_IMPORT;

// One plugin instance: made by each negotiation, destroyed by its shutdown.
// Several instances of a library may live at once, so a Plugin keeps its state
// in members, never in globals (process-wide caches must be thread-safe and
// survive any one instance). features() must be the same for every instance.
class Plugin {
 public:
  virtual ~Plugin() = default;
  virtual const char* name() const = 0;
  virtual const char* version() const = 0;
  virtual uint64_t features() const { return 0; }
  virtual uint32_t device_count() = 0;
  virtual const char* no_device_reason() { return "no device"; }
  // Called once per device index and kept; memory_free() is asked each time.
  virtual DeviceDescription describe_device(uint32_t index) = 0;
  virtual uint64_t memory_free(uint32_t /*index*/) { return 0; }
  // The options this plugin reads ("<name>.<key>"). The SDK rejects any other
  // "<name>." key with INVALID_ARGUMENT naming it, as the ABI requires.
  virtual std::vector<OptionSpec> options() const { return {}; }
  virtual std::unique_ptr<Session> create_session(uint32_t device, const Options& options) = 0;
  // ABI 2.4, NXRT_FEATURE_OFFLINE_COMPILE: a compile-only session for a described device
  // (`device`: key/value text as `nxrt plugins --json` prints a device; see nxrt_ep.h).
  // It answers fingerprint, get_capability and create_kernel (kernels are exported, never
  // run); alloc/copy are never called on it.
  virtual std::unique_ptr<Session> create_offline_session(const Options& /*device*/, const Options& /*options*/) {
    fail(NXRT_UNSUPPORTED, "offline compile not implemented");
  }
  // Set by the SDK: the library's path and the host's identity from the request.
  std::string library_path, host_name, host_version;
};

namespace detail {

// Objects handed across the ABI are these C++ objects; the opaque C types
// are never defined, so we cast.
template <typename T, typename C>
T* from(C* c) { return reinterpret_cast<T*>(c); }
template <typename C, typename T>
C* to(T* t) { return reinterpret_cast<C*>(t); }

// The callee-filled rule: writes what fits of `full` in the caller's struct (`out`'s
// struct_size) and writes back the size filled.
template <typename T>
void fill_callee(T* out, const T& full) {
  const uint32_t size = uint32_t(NXRT_FILLED_SIZE(size_t(out->struct_size), sizeof full));
  std::memcpy(static_cast<void*>(out), &full, size);
  out->struct_size = size;
}

// The nxrt_plugin* of one instance: the plugin, its device descriptions (kept
// stable: the ABI lets the host hold their strings) and its option schema.
struct InstanceBox {
  std::unique_ptr<Plugin> plugin;
  std::vector<OptionSpec> options;
  std::mutex mu;  // guards devices
  struct Device {
    DeviceDescription d;
    std::vector<nxrt_property> props;
    std::vector<const nxrt_property*> prop_ptrs;
  };
  std::map<uint32_t, std::unique_ptr<Device>> devices;
};
struct SessionBox {
  std::unique_ptr<Session> s;
  const InstanceBox* owner = nullptr;  // peer copies only between sessions of one instance
  std::once_flag fingerprint_once;     // fingerprint: asked once, kept for the session's life
  std::string fingerprint;
};
struct KernelBox {
  std::unique_ptr<Kernel> k;
  std::string description;  // Kernel::describe() as kernel_describe returns it (ABI 2.5)
  void describe() { description = clip_utf8(printable_utf8(k->describe()), NXRT_KERNEL_DESCRIPTION_MAX + 1); }
};
struct StreamBox { std::unique_ptr<Stream> s; };
struct EventBox { std::unique_ptr<Event> e; };

}  // namespace detail

// The plugin's own Stream behind a kernel context (NULL without NXRT_FEATURE_STREAMS).
template <typename S = Stream>
S* stream_of(const Context& ctx) {
  nxrt_stream* s = ctx.stream();
  return s ? static_cast<S*>(detail::from<detail::StreamBox>(s)->s.get()) : nullptr;
}

namespace detail {

template <typename P>
struct Entry {
  static Plugin& plugin(nxrt_plugin* p) {
    if (!p) fail(NXRT_INVALID_ARGUMENT, "NULL plugin instance");
    return *from<InstanceBox>(p)->plugin;
  }

  static nxrt_status* device_count(nxrt_plugin* p, uint32_t* count) {
    return guard([&] {
      if (!count) fail(NXRT_INVALID_ARGUMENT, "device_count: count is NULL");
      *count = plugin(p).device_count();
    });
  }
  static const char* no_device_reason(nxrt_plugin* p) {
    try {
      return p ? plugin(p).no_device_reason() : "NULL plugin instance";
    } catch (...) {
      return "the plugin failed to say why it has no device";
    }
  }
  static nxrt_status* device_info(nxrt_plugin* p, uint32_t index, nxrt_device_info* info) {
    return guard([&] {
      if (!info) fail(NXRT_INVALID_ARGUMENT, "device_info: info is NULL");
      if (info->struct_size < offsetof(nxrt_device_info, kind) + sizeof(info->kind))
        fail(NXRT_INVALID_ARGUMENT, "device_info: struct_size {} too small", info->struct_size);
      Plugin& pl = plugin(p);
      if (index >= pl.device_count()) fail(NXRT_NOT_FOUND, "no device {} (plugin has {})", index, pl.device_count());
      InstanceBox& box = *from<InstanceBox>(p);
      InstanceBox::Device* dev;
      {
        std::lock_guard lock(box.mu);
        auto& slot = box.devices[index];
        if (!slot) {
          auto d = std::make_unique<InstanceBox::Device>();
          d->d = pl.describe_device(index);
          for (auto& [k, v] : d->d.properties) d->props.push_back(nxrt_property{sizeof(nxrt_property), k.c_str(), v.c_str()});
          for (auto& pr : d->props) d->prop_ptrs.push_back(&pr);
          slot = std::move(d);
        }
        dev = slot.get();
      }
      const DeviceDescription& d = dev->d;
      nxrt_device_info full{};
      full.struct_size = sizeof full;
      full.kind = d.kind;
      full.name = d.name.c_str();
      full.vendor = d.vendor.c_str();
      full.vendor_id = d.vendor_id;
      full.device_id = d.device_id;
      std::memcpy(full.uuid, d.uuid, sizeof full.uuid);
      full.memory_bytes = d.memory_bytes;
      full.memory_free_bytes = pl.memory_free(index);
      full.dtypes = d.dtypes;
      full.host_addressable = d.host_addressable ? 1 : 0;
      full.property_count = uint32_t(dev->prop_ptrs.size());
      full.properties = dev->prop_ptrs.data();
      full.pci_bus_id = d.pci_bus_id.c_str();
      fill_callee(info, full);
    });
  }
  static uint32_t option_count(nxrt_plugin* p) { return p ? uint32_t(from<InstanceBox>(p)->options.size()) : 0; }
  static nxrt_status* option_info(nxrt_plugin* p, uint32_t index, nxrt_option_info* info) {
    return guard([&] {
      if (!p || !info) fail(NXRT_INVALID_ARGUMENT, "option_info: NULL argument");
      if (info->struct_size < offsetof(nxrt_option_info, type) + sizeof(info->type))
        fail(NXRT_INVALID_ARGUMENT, "option_info: struct_size {} too small", info->struct_size);
      auto& opts = from<InstanceBox>(p)->options;
      if (index >= opts.size()) fail(NXRT_NOT_FOUND, "no option {} (plugin has {})", index, opts.size());
      const OptionSpec& o = opts[index];
      nxrt_option_info full{sizeof(nxrt_option_info), o.type, o.name.c_str(), o.default_value.c_str(), o.help.c_str()};
      fill_callee(info, full);
    });
  }
  static nxrt_status* session_create(nxrt_plugin* p, uint32_t device, const nxrt_option* const* opts, size_t n,
                                     nxrt_ep_session** out) {
    return guard([&] {
      if (!out) fail(NXRT_INVALID_ARGUMENT, "session_create: out is NULL");
      *out = nullptr;
      Plugin& pl = plugin(p);
      if (n && !opts) fail(NXRT_INVALID_ARGUMENT, "session_create: options is NULL");
      if (device >= pl.device_count()) fail(NXRT_NOT_FOUND, "no device {} (plugin has {})", device, pl.device_count());
      const Options o = read_options(*from<InstanceBox>(p), opts, n);
      auto box = std::make_unique<SessionBox>();
      box->s = pl.create_session(device, o);
      box->owner = from<InstanceBox>(p);
      *out = to<nxrt_ep_session>(box.release());
    });
  }
  // Options as a map; an undeclared "<name>." key is INVALID_ARGUMENT naming it.
  static Options read_options(const InstanceBox& inst, const nxrt_option* const* opts, size_t n) {
    Options o;
    const std::string prefix = std::string(inst.plugin->name()) + ".";
    for (size_t i = 0; i < n; ++i) {
      const nxrt_option* op = opts[i];
      if (!op || !NXRT_HAS_FIELD(op, nxrt_option, value) || !op->key || !op->value)
        fail(NXRT_INVALID_ARGUMENT, "option {} is NULL, too small or has a NULL key or value", i);
      std::string key = op->key;
      if (key.rfind(prefix, 0) == 0 &&
          std::none_of(inst.options.begin(), inst.options.end(), [&](const OptionSpec& s) { return s.name == key; })) {
        std::string list;
        for (auto& k : inst.options) list += (list.empty() ? "" : ", ") + k.name;
        fail(NXRT_INVALID_ARGUMENT, "unknown {} option '{}' (known: {})", inst.plugin->name(), key, list.empty() ? "none" : list);
      }
      o[key] = op->value;
    }
    return o;
  }
  static void session_release(nxrt_ep_session* s) { delete from<SessionBox>(s); }
  static nxrt_status* get_capability(nxrt_ep_session* s, const nxrt_graph* g, nxrt_claim_sink* sink) {
    return guard([&] {
      if (!s || !g || !sink) fail(NXRT_INVALID_ARGUMENT, "get_capability: NULL argument");
      from<SessionBox>(s)->s->get_capability(Graph(g), sink);
    });
  }
  static nxrt_status* kernel_create(nxrt_ep_session* s, const nxrt_graph* g, nxrt_kernel** out) {
    return guard([&] {
      if (!s || !g || !out) fail(NXRT_INVALID_ARGUMENT, "kernel_create: NULL argument");
      *out = nullptr;
      auto box = std::make_unique<KernelBox>();
      box->k = from<SessionBox>(s)->s->create_kernel(Graph(g));
      if (!box->k) fail(NXRT_INTERNAL, "kernel_create: the session made no kernel");
      box->describe();
      *out = to<nxrt_kernel>(box.release());
    });
  }
  static nxrt_status* kernel_compute(nxrt_kernel* k, nxrt_kernel_context* ctx) {
    return guard([&] {
      if (!k || !ctx) fail(NXRT_INVALID_ARGUMENT, "kernel_compute: NULL argument");
      Context c(ctx);
      from<KernelBox>(k)->k->compute(c);
    });
  }
  static void kernel_release(nxrt_kernel* k) { delete from<KernelBox>(k); }
  static const char* kernel_describe(nxrt_kernel* k) {
    if (!k) return nullptr;
    const std::string& d = from<KernelBox>(k)->description;
    return d.empty() ? nullptr : d.c_str();
  }
  static nxrt_status* memory_alloc(nxrt_ep_session* s, nxrt_memory_kind kind, uint64_t bytes, uint64_t align, void** h) {
    return guard([&] {
      if (!s || !h) fail(NXRT_INVALID_ARGUMENT, "memory_alloc: NULL argument");
      *h = from<SessionBox>(s)->s->alloc(kind, bytes, align);
    });
  }
  static void memory_free(nxrt_ep_session* s, nxrt_memory_kind kind, void* h) {
    if (s && h) from<SessionBox>(s)->s->free(kind, h);
  }
  static nxrt_status* copy(nxrt_ep_session* s, const nxrt_copy_region* const* r, size_t n, nxrt_stream* st) {
    return guard([&] {
      if (!s || (n && !r)) fail(NXRT_INVALID_ARGUMENT, "copy: NULL argument");
      // Regions come as pointers to versioned structs; this plugin reads its own
      // (2.0) layout from each, whatever the host's element size.
      std::vector<nxrt_copy_region> regions(n);
      for (size_t i = 0; i < n; ++i) {
        if (!r[i]) fail(NXRT_INVALID_ARGUMENT, "copy: region {} is NULL", i);
        if (!NXRT_HAS_FIELD(r[i], nxrt_copy_region, bytes))
          fail(NXRT_INVALID_ARGUMENT, "copy: region {} struct_size {} too small", i, r[i]->struct_size);
        std::memcpy(&regions[i], r[i], sizeof(nxrt_copy_region));
      }
      from<SessionBox>(s)->s->copy(std::span<const nxrt_copy_region>(regions), st ? from<StreamBox>(st)->s.get() : nullptr);
    });
  }
  static nxrt_status* stream_create(nxrt_ep_session* s, nxrt_stream** out) {
    return guard([&] {
      if (!s || !out) fail(NXRT_INVALID_ARGUMENT, "stream_create: NULL argument");
      auto box = std::make_unique<StreamBox>();
      box->s = from<SessionBox>(s)->s->create_stream();
      *out = to<nxrt_stream>(box.release());
    });
  }
  static nxrt_status* stream_synchronize(nxrt_stream* st) {
    return guard([&] {
      if (!st) fail(NXRT_INVALID_ARGUMENT, "stream_synchronize: NULL stream");
      from<StreamBox>(st)->s->synchronize();
    });
  }
  static void stream_release(nxrt_stream* st) { delete from<StreamBox>(st); }
  static nxrt_status* event_create(nxrt_ep_session* s, nxrt_event** out) {
    return guard([&] {
      if (!s || !out) fail(NXRT_INVALID_ARGUMENT, "event_create: NULL argument");
      auto box = std::make_unique<EventBox>();
      box->e = from<SessionBox>(s)->s->create_event();
      *out = to<nxrt_event>(box.release());
    });
  }
  static nxrt_status* event_record(nxrt_event* e, nxrt_stream* st) {
    return guard([&] {
      if (!e || !st) fail(NXRT_INVALID_ARGUMENT, "event_record: NULL argument");
      from<EventBox>(e)->e->record(*from<StreamBox>(st)->s);
    });
  }
  static nxrt_status* stream_wait_event(nxrt_stream* st, nxrt_event* e) {
    return guard([&] {
      if (!e || !st) fail(NXRT_INVALID_ARGUMENT, "stream_wait_event: NULL argument");
      from<StreamBox>(st)->s->wait(*from<EventBox>(e)->e);
    });
  }
  static nxrt_status* event_synchronize(nxrt_event* e) {
    return guard([&] {
      if (!e) fail(NXRT_INVALID_ARGUMENT, "event_synchronize: NULL event");
      from<EventBox>(e)->e->synchronize();
    });
  }
  static void event_release(nxrt_event* e) { delete from<EventBox>(e); }
  static nxrt_status* on_run_start(nxrt_ep_session* s, const nxrt_run_options* ro) {
    return guard([&] {
      if (!s || !ro) fail(NXRT_INVALID_ARGUMENT, "on_run_start: NULL argument");
      RunOptions r;
      if (NXRT_HAS_FIELD(ro, nxrt_run_options, run_id)) r.run_id = ro->run_id;
      r.profiling = ro->profiling != 0;
      if (NXRT_HAS_FIELD(ro, nxrt_run_options, options) && ro->options)
        for (size_t i = 0; i < ro->option_count; ++i) {
          const nxrt_option* o = ro->options[i];
          if (o && NXRT_HAS_FIELD(o, nxrt_option, value) && o->key && o->value) r.options[o->key] = o->value;
        }
      from<SessionBox>(s)->s->on_run_start(r);
    });
  }
  static nxrt_status* on_run_end(nxrt_ep_session* s, uint64_t run_id, const nxrt_status* st, nxrt_profile_sink* sink) {
    return guard([&] {
      if (!s) fail(NXRT_INVALID_ARGUMENT, "on_run_end: NULL session");
      from<SessionBox>(s)->s->on_run_end(run_id, st, sink);
    });
  }

  static nxrt_status* native_handle(nxrt_ep_session* s, nxrt_native_object what, const void* object, nxrt_native_handle* out) {
    return guard([&] {
      if (!s || !out) fail(NXRT_INVALID_ARGUMENT, "native_handle: NULL argument");
      if (out->struct_size < offsetof(nxrt_native_handle, handle) + sizeof(out->handle))
        fail(NXRT_INVALID_ARGUMENT, "native_handle: struct_size {} too small", out->struct_size);
      if ((what == NXRT_NATIVE_OBJECT_MEMORY || what == NXRT_NATIVE_OBJECT_STREAM) && !object)
        fail(NXRT_INVALID_ARGUMENT, "native_handle: object kind {} needs an object", what);
      Stream* stream = what == NXRT_NATIVE_OBJECT_STREAM
                           ? from<StreamBox>(const_cast<nxrt_stream*>(static_cast<const nxrt_stream*>(object)))->s.get()
                           : nullptr;
      nxrt_native_handle full = from<SessionBox>(s)->s->native_handle(what, what == NXRT_NATIVE_OBJECT_MEMORY ? object : nullptr, stream);
      full.struct_size = sizeof full;
      fill_callee(out, full);
    });
  }
  static nxrt_status* stream_import(nxrt_ep_session* s, const nxrt_native_handle* h, nxrt_stream** out) {
    return guard([&] {
      if (!s || !h || !out) fail(NXRT_INVALID_ARGUMENT, "stream_import: NULL argument");
      *out = nullptr;
      if (!NXRT_HAS_FIELD(h, nxrt_native_handle, value))
        fail(NXRT_INVALID_ARGUMENT, "stream_import: native handle struct_size {} too small", h->struct_size);
      nxrt_native_handle full{};
      std::memcpy(&full, h, std::min<size_t>(h->struct_size, sizeof full));
      full.struct_size = sizeof full;
      auto box = std::make_unique<StreamBox>();
      box->s = from<SessionBox>(s)->s->import_stream(full);
      *out = to<nxrt_stream>(box.release());
    });
  }
  static nxrt_status* session_set_allocator(nxrt_ep_session* s, const nxrt_device_allocator* a) {
    return guard([&] {
      if (!s || !a) fail(NXRT_INVALID_ARGUMENT, "session_set_allocator: NULL argument");
      if (!NXRT_HAS_FIELD(a, nxrt_device_allocator, free))
        fail(NXRT_INVALID_ARGUMENT, "session_set_allocator: struct_size {} too small", a->struct_size);
      nxrt_device_allocator full{};
      std::memcpy(&full, a, sizeof full);
      full.struct_size = sizeof full;
      from<SessionBox>(s)->s->set_allocator(full);
    });
  }
  static nxrt_status* session_stats(nxrt_ep_session* s, nxrt_memory_stats* out) {
    return guard([&] {
      if (!s || !out) fail(NXRT_INVALID_ARGUMENT, "session_stats: NULL argument");
      if (out->struct_size < offsetof(nxrt_memory_stats, bytes_in_use) + sizeof(out->bytes_in_use))
        fail(NXRT_INVALID_ARGUMENT, "session_stats: struct_size {} too small", out->struct_size);
      nxrt_memory_stats full = from<SessionBox>(s)->s->memory_stats();
      full.struct_size = sizeof full;
      fill_callee(out, full);
    });
  }

  static nxrt_status* copy_peer(nxrt_ep_session* dst, nxrt_ep_session* src, const nxrt_copy_region* const* r, size_t n,
                                nxrt_stream* st) {
    return guard([&] {
      if (!dst || !src || (n && !r)) fail(NXRT_INVALID_ARGUMENT, "copy_peer: NULL argument");
      if (from<SessionBox>(dst)->owner != from<SessionBox>(src)->owner)
        fail(NXRT_INVALID_ARGUMENT, "copy_peer: the two sessions belong to different plugin instances");
      std::vector<nxrt_copy_region> regions(n);
      for (size_t i = 0; i < n; ++i) {
        if (!r[i]) fail(NXRT_INVALID_ARGUMENT, "copy_peer: region {} is NULL", i);
        if (!NXRT_HAS_FIELD(r[i], nxrt_copy_region, bytes))
          fail(NXRT_INVALID_ARGUMENT, "copy_peer: region {} struct_size {} too small", i, r[i]->struct_size);
        std::memcpy(&regions[i], r[i], sizeof(nxrt_copy_region));
        if (regions[i].src_memory != NXRT_MEMORY_DEVICE || regions[i].dst_memory != NXRT_MEMORY_DEVICE)
          fail(NXRT_INVALID_ARGUMENT, "copy_peer: region {} is not device to device", i);
      }
      from<SessionBox>(dst)->s->copy_peer(*from<SessionBox>(src)->s, std::span<const nxrt_copy_region>(regions),
                                          st ? from<StreamBox>(st)->s.get() : nullptr);
    });
  }

  static nxrt_status* memory_import(nxrt_ep_session* s, const nxrt_native_handle* n, void** out) {
    return guard([&] {
      if (!s || !n || !out) fail(NXRT_INVALID_ARGUMENT, "memory_import: NULL argument");
      *out = nullptr;
      if (!NXRT_HAS_FIELD(n, nxrt_native_handle, size))
        fail(NXRT_INVALID_ARGUMENT, "memory_import: native handle struct_size {} too small", n->struct_size);
      nxrt_native_handle full{};
      std::memcpy(&full, n, sizeof full);
      full.struct_size = sizeof full;
      *out = from<SessionBox>(s)->s->import_memory(full);
    });
  }

  // ---- 2.4 ----
  static void judgement_out(nxrt_cache_judgement* out, nxrt_cache_verdict v, const std::string& reason) {
    nxrt_cache_judgement full{};
    full.struct_size = sizeof full;
    full.verdict = v;
    // One line of valid UTF-8 (a reason may quote the untrusted fingerprint), cut at a
    // character boundary.
    const std::string r = clip_utf8(printable_utf8(reason), sizeof full.reason);
    std::snprintf(full.reason, sizeof full.reason, "%s", r.c_str());
    fill_callee(out, full);
  }
  static bool judgement_ok(const nxrt_cache_judgement* out) {
    return out && out->struct_size >= offsetof(nxrt_cache_judgement, verdict) + sizeof(out->verdict);
  }
  static const char* session_fingerprint(nxrt_ep_session* s) {
    if (!s) return "";
    SessionBox& box = *from<SessionBox>(s);
    try {
      std::call_once(box.fingerprint_once, [&] { box.fingerprint = box.s->fingerprint(); });
    } catch (...) {
      return "";
    }
    return box.fingerprint.c_str();
  }
  static nxrt_status* cache_check(nxrt_ep_session* s, const char* fingerprint, nxrt_cache_judgement* out) {
    return guard([&] {
      if (!s || !fingerprint || !judgement_ok(out)) fail(NXRT_INVALID_ARGUMENT, "cache_check: NULL argument or small judgement");
      if (!*session_fingerprint(s)) fail(NXRT_INTERNAL, "cache_check: this session has no fingerprint");
      CacheJudgement j = from<SessionBox>(s)->s->judge(fingerprint);
      judgement_out(out, j.verdict, j.reason);
    });
  }
  static nxrt_status* kernel_export(nxrt_kernel* k, const nxrt_blob_writer* w) {
    return guard([&] {
      if (!k || !w || !NXRT_HAS_FIELD(w, nxrt_blob_writer, write) || !w->write)
        fail(NXRT_INVALID_ARGUMENT, "kernel_export: NULL argument or writer");
      BlobWriter bw(w);
      from<KernelBox>(k)->k->export_blob(bw);
    });
  }
  static nxrt_status* kernel_import(nxrt_ep_session* s, const nxrt_graph* g, const void* blob, uint64_t size,
                                    nxrt_cache_judgement* judgement, nxrt_kernel** out) {
    return guard([&] {
      if (!s || !g || (!blob && size) || !judgement_ok(judgement) || !out)
        fail(NXRT_INVALID_ARGUMENT, "kernel_import: NULL argument or small judgement");
      *out = nullptr;
      CacheJudgement j;
      auto box = std::make_unique<KernelBox>();
      try {
        box->k = from<SessionBox>(s)->s->import_kernel(
            Graph(g), std::span<const uint8_t>(static_cast<const uint8_t*>(blob), size_t(size)), j);
      } catch (const BlobRejected& r) {
        judgement_out(judgement, r.verdict == NXRT_CACHE_OPTIMAL || r.verdict == NXRT_CACHE_USABLE ? nxrt_cache_verdict(NXRT_CACHE_UNSUPPORTED)
                                                                                                  : r.verdict,
                      r.reason);
        return;
      }
      if (!box->k) {
        judgement_out(judgement, j.verdict == NXRT_CACHE_OPTIMAL || j.verdict == NXRT_CACHE_USABLE ? nxrt_cache_verdict(NXRT_CACHE_RECOMPILE)
                                                                                                  : j.verdict,
                      j.reason.empty() ? "the plugin made no kernel from the blob" : j.reason);
        return;
      }
      box->describe();
      judgement_out(judgement, j.verdict, j.reason);
      *out = to<nxrt_kernel>(box.release());
    });
  }
  static nxrt_status* session_create_offline(nxrt_plugin* p, const nxrt_property* const* device, size_t device_count,
                                             const nxrt_option* const* opts, size_t n, nxrt_ep_session** out) {
    return guard([&] {
      if (!out) fail(NXRT_INVALID_ARGUMENT, "session_create_offline: out is NULL");
      *out = nullptr;
      if ((device_count && !device) || (n && !opts)) fail(NXRT_INVALID_ARGUMENT, "session_create_offline: NULL array");
      Options d;
      for (size_t i = 0; i < device_count; ++i) {
        const nxrt_property* e = device[i];
        if (!e || !NXRT_HAS_FIELD(e, nxrt_property, value) || !e->key || !e->value)
          fail(NXRT_INVALID_ARGUMENT, "device property {} is NULL, too small or has a NULL key or value", i);
        d[e->key] = e->value;
      }
      if (d.find("name") == d.end())
        fail(NXRT_INVALID_ARGUMENT, "the device description has no 'name' (give what `nxrt plugins --json` prints for a device)");
      const Options o = read_options(*from<InstanceBox>(p), opts, n);
      auto box = std::make_unique<SessionBox>();
      box->s = plugin(p).create_offline_session(d, o);
      box->owner = from<InstanceBox>(p);
      *out = to<nxrt_ep_session>(box.release());
    });
  }

  static void shutdown(nxrt_plugin* p) { delete from<InstanceBox>(p); }

  // The one table of this library: built on the first negotiation from the
  // plugin's features, immutable afterwards (thread-safe static init).
  static const nxrt_plugin_api* table(const Plugin& first) {
    static const nxrt_plugin_api api = [&] {
      const uint64_t f = first.features();
      const bool streams = (f & NXRT_FEATURE_STREAMS) != 0;
      const bool hooks = (f & NXRT_FEATURE_RUN_HOOKS) != 0;
      nxrt_plugin_api a{};
      a.struct_size = sizeof(nxrt_plugin_api);
      a.name = first.name();
      a.version = first.version();
      a.shutdown = &shutdown;
      a.device_count = &device_count;
      a.no_device_reason = &no_device_reason;
      a.device_info = &device_info;
      a.option_count = &option_count;
      a.option_info = &option_info;
      a.session_create = &session_create;
      a.session_release = &session_release;
      a.get_capability = &get_capability;
      a.kernel_create = &kernel_create;
      a.kernel_compute = &kernel_compute;
      a.kernel_release = &kernel_release;
      a.memory_alloc = &memory_alloc;
      a.memory_free = &memory_free;
      a.copy = &copy;
      a.stream_create = streams ? &stream_create : nullptr;
      a.stream_synchronize = streams ? &stream_synchronize : nullptr;
      a.stream_release = streams ? &stream_release : nullptr;
      a.event_create = streams ? &event_create : nullptr;
      a.event_record = streams ? &event_record : nullptr;
      a.stream_wait_event = streams ? &stream_wait_event : nullptr;
      a.event_synchronize = streams ? &event_synchronize : nullptr;
      a.event_release = streams ? &event_release : nullptr;
      a.on_run_start = hooks ? &on_run_start : nullptr;
      a.on_run_end = hooks ? &on_run_end : nullptr;
      a.native_handle = (f & NXRT_FEATURE_NATIVE_HANDLES) ? &native_handle : nullptr;
      a.stream_import = (f & NXRT_FEATURE_STREAM_IMPORT) ? &stream_import : nullptr;
      a.session_set_allocator = (f & NXRT_FEATURE_EXTERNAL_ALLOCATOR) ? &session_set_allocator : nullptr;
      a.session_stats = (f & NXRT_FEATURE_MEMORY_STATS) ? &session_stats : nullptr;
      a.copy_peer = (f & NXRT_FEATURE_PEER_COPY) ? &copy_peer : nullptr;
      a.memory_import = (f & NXRT_FEATURE_MEMORY_IMPORT) ? &memory_import : nullptr;
      const bool cache = (f & NXRT_FEATURE_KERNEL_CACHE) != 0;
      a.session_fingerprint = cache ? &session_fingerprint : nullptr;
      a.cache_check = cache ? &cache_check : nullptr;
      a.kernel_export = cache ? &kernel_export : nullptr;
      a.kernel_import = cache ? &kernel_import : nullptr;
      a.session_create_offline = (f & NXRT_FEATURE_OFFLINE_COMPILE) ? &session_create_offline : nullptr;
      a.kernel_describe = &kernel_describe;
      return a;
    }();
    return &api;
  }

  static void set_message(nxrt_negotiate_reply* reply, const std::string& m) {
    std::snprintf(reply->message, sizeof reply->message, "%s", m.c_str());
  }

  static int32_t negotiate(const nxrt_negotiate_request* rq, nxrt_negotiate_reply* rp) noexcept {
    constexpr size_t reply_prefix = offsetof(nxrt_negotiate_reply, message) + sizeof(rp->message);
    if (!rp || rp->struct_size < reply_prefix) return NXRT_INVALID_ARGUMENT;
    rp->message[0] = '\0';
    if (!rq || rq->struct_size < offsetof(nxrt_negotiate_request, host) + sizeof(rq->host)) {
      set_message(rp, "negotiation request is too small");
      return NXRT_INVALID_ARGUMENT;
    }
    if (rq->abi_major != NXRT_EP_ABI_MAJOR) {
      set_message(rp, fmt::format("plugin is built for nxrt EP ABI {}.x; the host speaks {}.{}", NXRT_EP_ABI_MAJOR,
                                  rq->abi_major, rq->abi_minor));
      return NXRT_VERSION_MISMATCH;
    }
    if (!rq->host) {
      set_message(rp, "negotiation request has no host services");
      return NXRT_INVALID_ARGUMENT;
    }
    if (!NXRT_HAS_FIELD(rq->host, nxrt_host_services, profile_device_event)) {
      set_message(rp, fmt::format("host services table is {} bytes, plugin needs at least the ABI 2.0 table ({} bytes)",
                                  rq->host->struct_size, sizeof(nxrt_host_services)));
      return NXRT_VERSION_MISMATCH;
    }
    if (rp->struct_size < offsetof(nxrt_negotiate_reply, plugin) + sizeof(rp->plugin)) {
      set_message(rp, "negotiation reply is too small for ABI 2.0");
      return NXRT_VERSION_MISMATCH;
    }
    std::unique_ptr<InstanceBox> box;
    try {
      host_services_slot().store(rq->host, std::memory_order_release);
      box = std::make_unique<InstanceBox>();
      box->plugin = std::make_unique<P>();
      if (NXRT_HAS_FIELD(rq, nxrt_negotiate_request, library_path) && rq->library_path) box->plugin->library_path = rq->library_path;
      if (NXRT_HAS_FIELD(rq, nxrt_negotiate_request, host_name) && rq->host_name) box->plugin->host_name = rq->host_name;
      if (NXRT_HAS_FIELD(rq, nxrt_negotiate_request, host_version) && rq->host_version)
        box->plugin->host_version = rq->host_version;
      box->options = box->plugin->options();
    } catch (const std::exception& e) {
      set_message(rp, fmt::format("plugin initialisation failed: {}", e.what()));
      return NXRT_INTERNAL;
    } catch (...) {
      set_message(rp, "plugin initialisation failed");
      return NXRT_INTERNAL;
    }
    const nxrt_plugin_api* api = table(*box->plugin);
    const uint32_t agreed_minor = rq->abi_minor < NXRT_EP_ABI_MINOR ? rq->abi_minor : NXRT_EP_ABI_MINOR;
    rp->abi_major = NXRT_EP_ABI_MAJOR;
    rp->abi_minor = agreed_minor;
    rp->reserved0 = 0;
    rp->features = box->plugin->features() & NXRT_FEATURES_OF_MINOR(agreed_minor);
    rp->api = api;
    rp->plugin = to<nxrt_plugin>(box.release());
    rp->struct_size = uint32_t(NXRT_FILLED_SIZE(size_t(rp->struct_size), sizeof(nxrt_negotiate_reply)));
    return NXRT_OK;
  }
};

}  // namespace detail
}  // namespace nxrt::sdk

#define NXRT_SDK_DEFINE_PLUGIN(PluginType)                                                  \
  extern "C" NXRT_EP_EXPORT int32_t nxrt_ep_negotiate(const nxrt_negotiate_request* rq,    \
                                                      nxrt_negotiate_reply* rp) {          \
    return ::nxrt::sdk::detail::Entry<PluginType>::negotiate(rq, rp);                       \
  }
