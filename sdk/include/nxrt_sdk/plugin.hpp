// Implements the whole C plugin table over a C++ class. A plugin writes:
//
//   class MySession : public nxrt::sdk::Session { ... };
//   class MyPlugin : public nxrt::sdk::Plugin { ... };
//   NXRT_SDK_DEFINE_PLUGIN(MyPlugin)
//
// and gets negotiation, struct_size checks, exception->status conversion and
// object lifetimes for free.
#pragma once
#include "context.hpp"
#include "graph.hpp"
#include "kernel_registry.hpp"

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
};

// Memory for plugins whose device memory is host memory (CPU-like).
class HostMemorySession : public Session {
 public:
  void* alloc(nxrt_memory_kind, uint64_t bytes, uint64_t alignment) override {
    if (alignment < 64) alignment = 64;
    if (alignment & (alignment - 1)) fail(NXRT_INVALID_ARGUMENT, "alignment {} is not a power of two", alignment);
    uint64_t rounded = (bytes + alignment - 1) / alignment * alignment;
    if (rounded == 0) rounded = alignment;  // zero-byte requests get a unique handle
    void* p = std::aligned_alloc(alignment, rounded);
    if (!p) fail(NXRT_OUT_OF_MEMORY, "cannot allocate {} bytes", bytes);
    return p;
  }
  void free(nxrt_memory_kind, void* handle) override { std::free(handle); }
  void copy(std::span<const nxrt_copy_region> regions, Stream*) override {
    for (auto& r : regions) {
      if (r.bytes == 0) continue;
      if (!r.src || !r.dst) fail(NXRT_INVALID_ARGUMENT, "copy region with a null buffer");
      std::memmove(static_cast<char*>(r.dst) + r.dst_offset, static_cast<const char*>(r.src) + r.src_offset, r.bytes);
    }
  }
};

class Plugin {
 public:
  virtual ~Plugin() = default;
  virtual const char* name() const = 0;
  virtual const char* version() const = 0;
  virtual uint64_t features() const { return 0; }
  virtual uint32_t device_count() = 0;
  virtual const char* no_device_reason() { return "no device"; }
  virtual void device_info(uint32_t index, nxrt_device_info& info) = 0;
  // Option keys this plugin reads under its own prefix ("<name>.key"). The SDK rejects any
  // other "<name>." key with INVALID_ARGUMENT naming it, as the ABI requires.
  virtual std::vector<std::string> option_keys() const { return {}; }
  virtual std::unique_ptr<Session> create_session(uint32_t device, const Options& options) = 0;
};

// Fills the fields of `info` the host knows about from a complete local copy.
inline void copy_device_info(const nxrt_device_info& full, nxrt_device_info& out) {
  uint32_t size = out.struct_size;
  if (size > sizeof(nxrt_device_info)) size = sizeof(nxrt_device_info);
  std::memcpy(static_cast<void*>(&out), &full, size);
  out.struct_size = size;
}

namespace detail {

// Objects handed across the ABI are these C++ objects; the opaque C types
// are never defined, so we cast.
template <typename T, typename C>
T* from(C* c) { return reinterpret_cast<T*>(c); }
template <typename C, typename T>
C* to(T* t) { return reinterpret_cast<C*>(t); }

struct SessionBox { std::unique_ptr<Session> s; };
struct KernelBox { std::unique_ptr<Kernel> k; };
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
  // Owned by hand: destroyed by shutdown() only. A host that unloads without calling
  // shutdown leaks it rather than running device teardown inside dlclose's static
  // destructors (where drivers such as the Vulkan loader may crash).
  static inline Plugin* plugin = nullptr;
  static inline nxrt_plugin_api api{};
  static inline std::mutex mu;

  static nxrt_status* device_count(uint32_t* count) {
    return guard([&] {
      if (!count) fail(NXRT_INVALID_ARGUMENT, "device_count: count is NULL");
      *count = plugin->device_count();
    });
  }
  static const char* no_device_reason() { return plugin->no_device_reason(); }
  static nxrt_status* device_info(uint32_t index, nxrt_device_info* info) {
    return guard([&] {
      if (!info) fail(NXRT_INVALID_ARGUMENT, "device_info: info is NULL");
      if (info->struct_size < offsetof(nxrt_device_info, kind) + sizeof(info->kind))
        fail(NXRT_INVALID_ARGUMENT, "device_info: struct_size {} too small", info->struct_size);
      if (index >= plugin->device_count()) fail(NXRT_NOT_FOUND, "no device {} (plugin has {})", index, plugin->device_count());
      plugin->device_info(index, *info);
    });
  }
  static nxrt_status* session_create(uint32_t device, const nxrt_option* opts, size_t n, nxrt_ep_session** out) {
    return guard([&] {
      if (!out) fail(NXRT_INVALID_ARGUMENT, "session_create: out is NULL");
      *out = nullptr;
      if (n && !opts) fail(NXRT_INVALID_ARGUMENT, "session_create: options is NULL");
      if (device >= plugin->device_count()) fail(NXRT_NOT_FOUND, "no device {} (plugin has {})", device, plugin->device_count());
      Options o;
      const std::string prefix = std::string(plugin->name()) + ".";
      const auto known = plugin->option_keys();
      for (size_t i = 0; i < n; ++i) {
        if (!opts[i].key || !opts[i].value) fail(NXRT_INVALID_ARGUMENT, "option {} has a NULL key or value", i);
        std::string key = opts[i].key;
        if (key.rfind(prefix, 0) == 0 && std::find(known.begin(), known.end(), key) == known.end()) {
          std::string list;
          for (auto& k : known) list += (list.empty() ? "" : ", ") + k;
          fail(NXRT_INVALID_ARGUMENT, "unknown {} option '{}' (known: {})", plugin->name(), key, list.empty() ? "none" : list);
        }
        o[key] = opts[i].value;
      }
      auto box = std::make_unique<SessionBox>();
      box->s = plugin->create_session(device, o);
      *out = to<nxrt_ep_session>(box.release());
    });
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
  static nxrt_status* memory_alloc(nxrt_ep_session* s, nxrt_memory_kind kind, uint64_t bytes, uint64_t align, void** h) {
    return guard([&] {
      if (!s || !h) fail(NXRT_INVALID_ARGUMENT, "memory_alloc: NULL argument");
      *h = from<SessionBox>(s)->s->alloc(kind, bytes, align);
    });
  }
  static void memory_free(nxrt_ep_session* s, nxrt_memory_kind kind, void* h) {
    if (s && h) from<SessionBox>(s)->s->free(kind, h);
  }
  static nxrt_status* copy(nxrt_ep_session* s, const nxrt_copy_region* r, size_t n, nxrt_stream* st) {
    return guard([&] {
      if (!s || (n && !r)) fail(NXRT_INVALID_ARGUMENT, "copy: NULL argument");
      for (size_t i = 0; i < n; ++i)
        if (r[i].struct_size < sizeof(nxrt_copy_region)) fail(NXRT_INVALID_ARGUMENT, "copy: region {} struct_size {} too small", i, r[i].struct_size);
      from<SessionBox>(s)->s->copy(std::span(r, n), st ? from<StreamBox>(st)->s.get() : nullptr);
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

  static void shutdown() {
    std::lock_guard lock(mu);
    delete plugin;
    plugin = nullptr;
  }

  static void set_message(nxrt_negotiate_reply* reply, const std::string& m) {
    std::snprintf(reply->message, sizeof reply->message, "%s", m.c_str());
  }

  static int32_t negotiate(const nxrt_negotiate_request* rq, nxrt_negotiate_reply* rp) noexcept {
    constexpr size_t reply_prefix = offsetof(nxrt_negotiate_reply, message) + sizeof(rp->message);
    if (!rp || rp->struct_size < reply_prefix) return NXRT_INVALID_ARGUMENT;
    rp->message[0] = '\0';
    if (!rq || rq->struct_size < offsetof(nxrt_negotiate_request, host) + sizeof(rq->host) || !rq->host) {
      set_message(rp, "negotiation request is too small or has no host services");
      return NXRT_INVALID_ARGUMENT;
    }
    if (rq->abi_major != NXRT_EP_ABI_MAJOR) {
      set_message(rp, fmt::format("plugin speaks nxrt EP ABI {}.x, host offers {}.{}", NXRT_EP_ABI_MAJOR, rq->abi_major, rq->abi_minor));
      return NXRT_VERSION_MISMATCH;
    }
    if (!NXRT_HAS_FIELD(rq->host, nxrt_host_services, ctx_cancelled)) {
      set_message(rp, fmt::format("host services table is {} bytes, plugin needs at least the ABI 1.0 table ({} bytes)", rq->host->struct_size,
                              offsetof(nxrt_host_services, ctx_cancelled) + sizeof(rq->host->ctx_cancelled)));
      return NXRT_VERSION_MISMATCH;
    }
    if (rp->struct_size < offsetof(nxrt_negotiate_reply, api) + sizeof(rp->api)) {
      set_message(rp, "negotiation reply is too small for ABI 1.0");
      return NXRT_VERSION_MISMATCH;
    }
    std::lock_guard lock(mu);
    try {
      host_services_slot() = rq->host;
      if (!plugin) plugin = new P();
    } catch (const std::exception& e) {
      set_message(rp, fmt::format("plugin initialisation failed: {}", e.what()));
      return NXRT_INTERNAL;
    } catch (...) {
      set_message(rp, "plugin initialisation failed");
      return NXRT_INTERNAL;
    }
    const uint64_t f = plugin->features();
    const bool streams = (f & NXRT_FEATURE_STREAMS) != 0;
    api = nxrt_plugin_api{};
    api.struct_size = sizeof(nxrt_plugin_api);
    api.name = plugin->name();
    api.version = plugin->version();
    api.shutdown = &shutdown;
    api.device_count = &device_count;
    api.no_device_reason = &no_device_reason;
    api.device_info = &device_info;
    api.session_create = &session_create;
    api.session_release = &session_release;
    api.get_capability = &get_capability;
    api.kernel_create = &kernel_create;
    api.kernel_compute = &kernel_compute;
    api.kernel_release = &kernel_release;
    api.memory_alloc = &memory_alloc;
    api.memory_free = &memory_free;
    api.copy = &copy;
    api.stream_create = streams ? &stream_create : nullptr;
    api.stream_synchronize = streams ? &stream_synchronize : nullptr;
    api.stream_release = streams ? &stream_release : nullptr;
    api.event_create = streams ? &event_create : nullptr;
    api.event_record = streams ? &event_record : nullptr;
    api.stream_wait_event = streams ? &stream_wait_event : nullptr;
    api.event_synchronize = streams ? &event_synchronize : nullptr;
    api.event_release = streams ? &event_release : nullptr;
    rp->abi_major = NXRT_EP_ABI_MAJOR;
    rp->abi_minor = rq->abi_minor < NXRT_EP_ABI_MINOR ? rq->abi_minor : NXRT_EP_ABI_MINOR;
    rp->features = f;
    rp->api = &api;
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
