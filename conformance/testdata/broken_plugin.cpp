// Test plugins for nxrt-conformance. Built without a BROKEN_* switch this is
// a small, well-behaved plugin ("conftest_good": float32 Add and Relu on the
// host, synchronous streams, and the SDK's 2.1 host-memory interop: native
// handles, an external allocator, memory stats); each BROKEN_* switch breaks
// exactly one rule so the conformance runner can be shown to catch it and name it.
#include <nxrt_sdk/sdk.hpp>

#include <chrono>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>

#ifndef CONFTEST_NAME
#define CONFTEST_NAME "conftest_good"
#endif

namespace {
using namespace nxrt::sdk;

class SyncStream : public Stream {
 public:
  void synchronize() override {}
  void wait(Event&) override {}
};
class SyncEvent : public Event {
 public:
  void record(Stream&) override {}
  void synchronize() override {}
};

class RefSession;

class AddKernel : public Kernel {
 public:
  void compute(Context& ctx) override {
#ifdef BROKEN_SEGFAULT_KERNEL
    volatile int* p = nullptr;
    *p = 42;  // a kernel that crashes
#endif
#ifdef BROKEN_HANGS
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // never returns
#endif
#ifdef BROKEN_LEAKS
    {
      void* leak = std::malloc(1 << 20);  // 1 MiB lost per run
      if (leak) std::memset(leak, 1, 1 << 20);
    }
#endif
    auto a = ctx.input(0);
    auto b = ctx.input(1);
    if (a.dims() != b.dims()) fail(NXRT_INVALID_ARGUMENT, "Add: input shapes differ");
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, std::span<const int64_t>(a.dims()));
    const float* x0 = a.data<float>();
    const float* x1 = b.data<float>();
    float* out = y.data<float>();
    for (int64_t i = 0; i < a.numel(); ++i) {
#ifdef BROKEN_WRONG_RESULTS
      out[i] = x0[i] - x1[i];  // claims Add, computes Sub
#else
      out[i] = x0[i] + x1[i];
#endif
    }
  }
};

class ReluKernel : public Kernel {
 public:
  void compute(Context& ctx) override {
    auto a = ctx.input(0);
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, std::span<const int64_t>(a.dims()));
    const float* x = a.data<float>();
    float* out = y.data<float>();
    for (int64_t i = 0; i < a.numel(); ++i) out[i] = x[i] > 0 ? x[i] : 0.f;
  }
};

const KernelRegistry<RefSession>& registry() {
  static KernelRegistry<RefSession> r = [] {
    KernelRegistry<RefSession> k;
    k.add({"Add", "", 7, INT_MAX,
           [](const Node& n) -> std::optional<Refusal> {
             if (auto r = require_dtypes(n, {NXRT_DTYPE_FLOAT32})) return r;
             auto a = n.input(0), b = n.input(1);
             if (!a.static_shape() || !b.static_shape() || a.rank() != b.rank() ||
                 !std::equal(a.dims().begin(), a.dims().end(), b.dims().begin()))
               return refuse(NXRT_REFUSE_SHAPE, "Add: only equal static shapes (no broadcasting)");
             return std::nullopt;
           },
           [](const Node&, RefSession&) -> std::unique_ptr<Kernel> { return std::make_unique<AddKernel>(); }});
    k.add({"Relu", "", 6, INT_MAX,
           [](const Node& n) -> std::optional<Refusal> { return require_dtypes(n, {NXRT_DTYPE_FLOAT32}); },
           [](const Node&, RefSession&) -> std::unique_ptr<Kernel> { return std::make_unique<ReluKernel>(); }});
    return k;
  }();
  return r;
}

class RefSession : public HostMemorySession {
 public:
  void get_capability(const Graph& g, nxrt_claim_sink* sink) override { registry().claim(g, sink); }
  std::unique_ptr<Kernel> create_kernel(const Graph& sub) override { return registry().create(sub, *this); }
  std::unique_ptr<Stream> create_stream() override { return std::make_unique<SyncStream>(); }
  std::unique_ptr<Event> create_event() override { return std::make_unique<SyncEvent>(); }
#ifdef BROKEN_STATS_NO_COPIES
  // The copies happen, but session_stats never hears of them.
  void copy(std::span<const nxrt_copy_region> regions, Stream*) override {
    for (auto& r : regions)
      if (r.bytes)
        std::memmove(static_cast<char*>(r.dst) + r.dst_offset, static_cast<const char*>(r.src) + r.src_offset, r.bytes);
  }
#endif
#ifdef BROKEN_HANDLE_ZERO
  // Every native handle it gives is 0.
  nxrt_native_handle native_handle(nxrt_native_object what, const void* memory, Stream* stream) override {
    nxrt_native_handle h = HostMemorySession::native_handle(what, memory, stream);
    h.handle = 0;
    return h;
  }
#endif
#ifdef BROKEN_ALLOCATOR_BYPASS
  // Accepts the caller's allocator and never uses it.
  void set_allocator(const nxrt_device_allocator&) override {}
#endif
#ifdef BROKEN_IMPORT_COPIES
  // "Imports" by copying: the caller's later writes are never seen.
  void* import_memory(const nxrt_native_handle& n) override {
    if (n.type != NXRT_NATIVE_HOST_POINTER || !n.handle) fail(NXRT_UNSUPPORTED, "host pointers only");
    void* p = alloc(NXRT_MEMORY_DEVICE, n.size, 64);
    std::memcpy(p, reinterpret_cast<const void*>(uintptr_t(n.handle)), n.size);
    return p;
  }
#endif
};

class RefPlugin : public Plugin {
 public:
  const char* name() const override { return CONFTEST_NAME; }
  const char* version() const override { return "0.1.0"; }
  uint64_t features() const override {
    return NXRT_FEATURE_STREAMS | NXRT_FEATURE_CONCURRENT_RUN | NXRT_FEATURE_RUN_HOOKS | kHostMemoryFeatures;
  }
  uint32_t device_count() override { return 1; }
  DeviceDescription describe_device(uint32_t) override {
    DeviceDescription d;
    d.kind = NXRT_DEVICE_CPU;
    d.name = "conformance test device";
    d.vendor = "nxrt";
    d.memory_bytes = 1ull << 32;
    for (int b : {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16}) d.dtypes |= 1ull << b;
    d.host_addressable = true;
    return d;
  }
  std::vector<OptionSpec> options() const override {
    return {{std::string(CONFTEST_NAME) + ".verbose", NXRT_OPTION_BOOL, "false", "log each kernel (accepted, unused)"}};
  }
  std::unique_ptr<Session> create_session(uint32_t, const Options& o) override {
#ifdef BROKEN_ABORTS
    std::abort();  // dies inside session_create
#endif
    option_int(o, "threads", 0);  // the SDK already refused undeclared "<name>." keys
    return std::make_unique<RefSession>();
  }
};

using Entry = detail::Entry<RefPlugin>;

#ifdef BROKEN_THROWS
nxrt_status* throwing_capability(nxrt_ep_session*, const nxrt_graph*, nxrt_claim_sink*) {
  throw std::runtime_error("get_capability threw a C++ exception");  // crosses the C ABI
}
#endif

#ifdef BROKEN_PHANTOM_CLAIM
nxrt_status* phantom_capability(nxrt_ep_session* s, const nxrt_graph* g, nxrt_claim_sink* sink) {
  size_t ghost = host().graph_node_count(g) + 5;  // a node that does not exist
  nxrt_status* st = host().claim_nodes(sink, &ghost, 1, 0.0);
  if (st) host().status_release(st);
  return Entry::get_capability(s, g, sink);
}
#endif

#ifdef BROKEN_EMPTY_MESSAGE
nxrt_status* blank(nxrt_status* st) {
  if (!st) return st;
  nxrt_status_code code = host().status_code(st);
  host().status_release(st);
  return host().status_create(code, 0, "");
}
nxrt_status* blank_device_info(nxrt_plugin* p, uint32_t i, nxrt_device_info* info) {
  return blank(Entry::device_info(p, i, info));
}
nxrt_status* blank_session_create(nxrt_plugin* p, uint32_t d, const nxrt_option* const* o, size_t n, nxrt_ep_session** out) {
  return blank(Entry::session_create(p, d, o, n, out));
}
nxrt_status* blank_alloc(nxrt_ep_session* s, nxrt_memory_kind k, uint64_t b, uint64_t a, void** h) {
  return blank(Entry::memory_alloc(s, k, b, a, h));
}
nxrt_status* blank_kernel_create(nxrt_ep_session* s, const nxrt_graph* g, nxrt_kernel** out) {
  return blank(Entry::kernel_create(s, g, out));
}
#endif

#ifdef BROKEN_GARBAGE_STRINGS
// Error messages that are not UTF-8 (stray continuation bytes, an overlong NUL, a lone
// 0xFF) with quotes, backslashes and control characters: a report must still parse.
nxrt_status* garbage(nxrt_status* st) {
  if (!st) return st;
  nxrt_status_code code = host().status_code(st);
  host().status_release(st);
  return host().status_create(code, 0, "bad \xff\xfe index \"\\\x01\x7f \xc0\x80 \xed\xa0\x80 \xe2\x82");
}
nxrt_status* garbage_device_info(nxrt_plugin* p, uint32_t i, nxrt_device_info* info) {
  return garbage(Entry::device_info(p, i, info));
}
nxrt_status* garbage_session_create(nxrt_plugin* p, uint32_t d, const nxrt_option* const* o, size_t n, nxrt_ep_session** out) {
  return garbage(Entry::session_create(p, d, o, n, out));
}
#endif

#ifdef BROKEN_HANDLE_OVERRUN
// Fills the whole nxrt_native_handle whatever the caller's struct_size.
nxrt_status* overrun_native_handle(nxrt_ep_session* s, nxrt_native_object what, const void* object, nxrt_native_handle* out) {
  if (!out) return Entry::native_handle(s, what, object, out);
  nxrt_native_handle full{};
  full.struct_size = sizeof full;
  nxrt_status* st = Entry::native_handle(s, what, object, &full);
  if (st) return st;
  std::memcpy(static_cast<void*>(out), &full, sizeof full);
  return nullptr;
}
#endif

// The table handed out: the SDK's, patched by the BROKEN_* switches. Built once
// and immutable, like every table (the same for every instance).
[[maybe_unused]] const nxrt_plugin_api* patched_table(const nxrt_plugin_api* sdk) {
  static const nxrt_plugin_api api = [sdk] {
    nxrt_plugin_api a = *sdk;
#ifdef BROKEN_SHORT_STRUCT_SIZE
    a.struct_size = uint32_t(offsetof(nxrt_plugin_api, session_create));  // claims an older, shorter table
#endif
#ifdef BROKEN_THROWS
    a.get_capability = throwing_capability;
#endif
#ifdef BROKEN_HANDLE_OVERRUN
    a.native_handle = overrun_native_handle;
#endif
#ifdef BROKEN_NULL_SESSION_STATS
    a.session_stats = nullptr;  // NXRT_FEATURE_MEMORY_STATS stays declared
#endif
#ifdef BROKEN_PHANTOM_CLAIM
    a.get_capability = phantom_capability;
#endif
#ifdef BROKEN_GARBAGE_STRINGS
    a.device_info = garbage_device_info;
    a.session_create = garbage_session_create;
#endif
#ifdef BROKEN_EMPTY_MESSAGE
    a.device_info = blank_device_info;
    a.session_create = blank_session_create;
    a.memory_alloc = blank_alloc;
    a.kernel_create = blank_kernel_create;
#endif
    return a;
  }();
  return &api;
}

}  // namespace

#ifndef BROKEN_NO_ENTRY
extern "C" NXRT_EP_EXPORT int32_t nxrt_ep_negotiate(const nxrt_negotiate_request* rq, nxrt_negotiate_reply* rp) {
#ifdef BROKEN_WRONG_MAJOR
  // Speaks "3.x": accepts any major and answers major 3.
  nxrt_negotiate_request copy{};
  if (rq && rq->struct_size >= offsetof(nxrt_negotiate_request, library_path)) {
    std::memcpy(&copy, rq, std::min<size_t>(rq->struct_size, sizeof copy));
    copy.struct_size = std::min<uint32_t>(rq->struct_size, sizeof copy);
    copy.abi_major = NXRT_EP_ABI_MAJOR;
    rq = &copy;
  }
#endif
  int32_t rc = Entry::negotiate(rq, rp);
  if (rc != NXRT_OK) return rc;
#ifdef BROKEN_WRONG_MAJOR
  rp->abi_major = 3;
#endif
  rp->api = patched_table(rp->api);
#ifdef BROKEN_NULL_TABLE
  rp->api = nullptr;
#endif
  return rc;
}
#else
// No entry symbol: something else is exported instead.
extern "C" NXRT_EP_EXPORT int32_t nxrt_ep_negotiate_v2(const nxrt_negotiate_request*, nxrt_negotiate_reply*) { return 0; }
#endif
