// A test plugin written straight on the C ABI (no SDK): float32 Add and Relu on
// host memory, synchronous streams, run hooks with device profiling and a
// one-entry option schema. Built without a BROKEN_* switch it is
// "conftest_raw" and passes the abi and stress suites; each BROKEN_* switch
// breaks one ABI 2.0 rule so ctest can show the conformance runner names it.
#include <nxrt_ep.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#ifndef CONFTEST_NAME
#define CONFTEST_NAME "conftest_raw"
#endif

namespace {

constexpr uint32_t kMagic = 0x52415749u;

struct Instance {
  uint32_t magic = kMagic;
  const nxrt_host_services* host = nullptr;
  std::atomic<bool> alive{true};
  std::string library_path;
};

struct Session {
  Instance* inst;
  std::mutex mu;
  std::map<uint64_t, std::vector<size_t>> runs;  // run_id -> nodes of kernels run (profiling)
};

struct Kernel {
  Session* s;
  bool add;
  size_t node;
};

struct Stream {};
struct Event {};

nxrt_status* err(const nxrt_host_services* h, nxrt_status_code code, const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
#ifdef BROKEN_RETRYABLE
  return h->status_create(code, 1, buf);  // every error marked retryable
#else
  return h->status_create(code, 0, buf);
#endif
}

#ifdef BROKEN_SHARED_INSTANCE
Instance g_shared;  // one "instance" for every negotiation
#endif

Instance* inst_of(nxrt_plugin* p) { return reinterpret_cast<Instance*>(p); }

void shutdown(nxrt_plugin* p) {
  Instance* i = inst_of(p);
  if (!i) return;
#ifdef BROKEN_SHARED_INSTANCE
  i->alive = false;  // kills every "instance"
#else
  i->magic = 0;
  delete i;
#endif
}

nxrt_status* device_count(nxrt_plugin* p, uint32_t* count) {
  Instance* i = inst_of(p);
  if (!i->alive) return err(i->host, NXRT_INTERNAL, "this plugin instance was shut down");
  *count = 1;
  return nullptr;
}

const char* no_device_reason(nxrt_plugin*) { return ""; }

#ifdef BROKEN_FOREIGN_STATUS
struct FakeStatus {
  int code = NXRT_NOT_FOUND;
  char text[32] = "no such device";
} g_fake;
#endif

nxrt_status* device_info(nxrt_plugin* p, uint32_t index, nxrt_device_info* info) {
  Instance* i = inst_of(p);
  if (!i->alive) return err(i->host, NXRT_INTERNAL, "this plugin instance was shut down");
  if (!info) return err(i->host, NXRT_INVALID_ARGUMENT, "device_info: NULL info");
#ifdef BROKEN_FOREIGN_STATUS
  if (index != 0) return reinterpret_cast<nxrt_status*>(&g_fake);  // not from status_create
#endif
  if (index != 0) return err(i->host, NXRT_NOT_FOUND, "no device %u (the plugin has 1)", index);
  static const nxrt_property driver{sizeof(nxrt_property), "driver", "none"};
  static const nxrt_property* const props[] = {&driver};
  nxrt_device_info full{};
  full.kind = NXRT_DEVICE_CPU;
  full.name = "conformance raw test device";
  full.vendor = "nxrt";
  for (int k = 0; k < 16; ++k) full.uuid[k] = uint8_t(0xC0 + k);
  full.memory_bytes = 4ull << 30;
  full.memory_free_bytes = 2ull << 30;
  full.dtypes = 1ull << NXRT_DTYPE_FLOAT32;
  full.host_addressable = 1;
  full.property_count = 1;
  full.properties = props;
  full.pci_bus_id = "";
#ifdef BROKEN_INFO_OVERRUN
  full.struct_size = sizeof full;
  std::memcpy(info, &full, sizeof full);  // ignores the caller's struct_size
#else
  uint32_t n = uint32_t(NXRT_FILLED_SIZE(size_t(info->struct_size), sizeof full));
  full.struct_size = n;
  std::memcpy(info, &full, n);
#endif
  return nullptr;
}

uint32_t option_count(nxrt_plugin*) { return 1; }

nxrt_status* option_info(nxrt_plugin* p, uint32_t index, nxrt_option_info* info) {
  Instance* i = inst_of(p);
  if (index != 0) return err(i->host, NXRT_NOT_FOUND, "no option %u (the plugin declares 1)", index);
  nxrt_option_info full{};
  full.type = NXRT_OPTION_INT;
#ifdef BROKEN_OPTION_PREFIX
  full.name = "workers";  // not "<plugin name>.workers"
#else
  full.name = CONFTEST_NAME ".workers";
#endif
  full.default_value = "1";
  full.help = "worker threads (accepted and unused)";
  uint32_t n = uint32_t(NXRT_FILLED_SIZE(size_t(info->struct_size), sizeof full));
  full.struct_size = n;
  std::memcpy(info, &full, n);
  return nullptr;
}

bool parse_int(const char* v) {
  if (!v || !*v) return false;
  char* end = nullptr;
  std::strtoll(v, &end, 10);
  return *end == '\0';
}

nxrt_status* session_create(nxrt_plugin* p, uint32_t device, const nxrt_option* const* options, size_t count,
                            nxrt_ep_session** out) {
  Instance* i = inst_of(p);
  if (!i->alive) return err(i->host, NXRT_INTERNAL, "this plugin instance was shut down");
  if (device != 0) return err(i->host, NXRT_NOT_FOUND, "no device %u (the plugin has 1)", device);
  const std::string prefix = CONFTEST_NAME ".";
  for (size_t k = 0; k < count; ++k) {
    const nxrt_option* o = options[k];
    if (!o || !NXRT_HAS_FIELD(o, nxrt_option, value) || !o->key) continue;
    std::string key = o->key;
    if (key == "threads" || key == prefix + "workers") {
      if (!parse_int(o->value)) return err(i->host, NXRT_INVALID_ARGUMENT, "option '%s' must be an integer", o->key);
    } else if (key.rfind(prefix, 0) == 0) {
      return err(i->host, NXRT_INVALID_ARGUMENT, "unknown option '%s'", o->key);
    }
  }
  *out = reinterpret_cast<nxrt_ep_session*>(new Session{i, {}, {}});
  return nullptr;
}

void session_release(nxrt_ep_session* s) { delete reinterpret_cast<Session*>(s); }

const nxrt_host_services* host_of(nxrt_ep_session* s) { return reinterpret_cast<Session*>(s)->inst->host; }

// Add: two float32 inputs of equal static shape. Relu: one float32 input.
bool supported(const nxrt_host_services* h, const nxrt_node* n, bool* add) {
  std::string op = h->node_op_type(n), dom = h->node_domain(n);
  if (!dom.empty()) return false;
  size_t in = h->node_input_count(n);
  for (size_t k = 0; k < in; ++k) {
    const nxrt_value* v = h->node_input(n, k);
    if (!v || h->value_dtype(v) != NXRT_DTYPE_FLOAT32 || h->value_rank(v) < 0) return false;
  }
  if (op == "Relu" && in == 1) return *add = false, true;
  if (op != "Add" || in != 2) return false;
  const nxrt_value *a = h->node_input(n, 0), *b = h->node_input(n, 1);
  if (h->value_rank(a) != h->value_rank(b)) return false;
  for (int64_t d = 0; d < h->value_rank(a); ++d)
    if (h->value_dims(a)[d] < 0 || h->value_dims(a)[d] != h->value_dims(b)[d]) return false;
  return *add = true, true;
}

nxrt_status* get_capability(nxrt_ep_session* s, const nxrt_graph* g, nxrt_claim_sink* sink) {
  const nxrt_host_services* h = host_of(s);
  for (size_t k = 0; k < h->graph_node_count(g); ++k) {
    const nxrt_node* n = h->graph_node(g, k);
    size_t idx = h->node_index(n);
    bool add = false;
    nxrt_status* st = supported(h, n, &add) ? h->claim_nodes(sink, &idx, 1, 1.0)
                                            : h->refuse_node(sink, idx, NXRT_REFUSE_OP, "only float32 Add and Relu");
    if (st) return st;
  }
  return nullptr;
}

nxrt_status* kernel_create(nxrt_ep_session* s, const nxrt_graph* g, nxrt_kernel** out) {
  const nxrt_host_services* h = host_of(s);
  if (h->graph_node_count(g) != 1) return err(h, NXRT_UNSUPPORTED, "only single-node kernels");
  const nxrt_node* n = h->graph_node(g, 0);
  bool add = false;
  if (!supported(h, n, &add)) return err(h, NXRT_UNSUPPORTED, "op '%s' is not supported", h->node_op_type(n));
  *out = reinterpret_cast<nxrt_kernel*>(new Kernel{reinterpret_cast<Session*>(s), add, h->node_index(n)});
  return nullptr;
}

nxrt_status* kernel_compute(nxrt_kernel* kp, nxrt_kernel_context* ctx) {
  Kernel* k = reinterpret_cast<Kernel*>(kp);
  const nxrt_host_services* h = k->s->inst->host;
  nxrt_const_tensor in[2]{};
  size_t n_in = k->add ? 2 : 1;
  for (size_t i = 0; i < n_in; ++i) {
    in[i].struct_size = sizeof in[i];
    if (nxrt_status* st = h->ctx_input(ctx, i, &in[i])) return st;
  }
  int64_t count = 1;
  for (uint32_t d = 0; d < in[0].rank; ++d) count *= in[0].dims[d];
  nxrt_tensor out{};
  out.struct_size = sizeof out;
  if (nxrt_status* st = h->ctx_output(ctx, 0, NXRT_DTYPE_FLOAT32, in[0].rank, in[0].dims, &out)) return st;
  auto* y = reinterpret_cast<float*>(static_cast<char*>(out.data) + out.byte_offset);
  auto* a = reinterpret_cast<const float*>(static_cast<const char*>(in[0].data) + in[0].byte_offset);
  const float* b = k->add ? reinterpret_cast<const float*>(static_cast<const char*>(in[1].data) + in[1].byte_offset) : nullptr;
  for (int64_t i = 0; i < count; ++i) y[i] = k->add ? a[i] + b[i] : (a[i] > 0 ? a[i] : 0.f);
#ifdef BROKEN_WRITES_INPUTS
  if (k->add && count > 0) const_cast<float*>(a)[0] = 12345.f;  // scribbles on a read-only input
#endif
  uint64_t run = h->ctx_run_id(ctx);
  std::lock_guard lock(k->s->mu);
  auto it = k->s->runs.find(run);
  if (it != k->s->runs.end()) it->second.push_back(k->node);
  return nullptr;
}

void kernel_release(nxrt_kernel* k) { delete reinterpret_cast<Kernel*>(k); }

const char* kernel_describe(nxrt_kernel* kp) {
  const Kernel* k = reinterpret_cast<const Kernel*>(kp);
#ifdef BROKEN_DESCRIBE_UNPRINTABLE
  return k->add ? "add:\n one pass" : "relu\tone pass";  // two lines, a tab: not one printable line
#else
  return k->add ? "add, one pass" : "relu, one pass";
#endif
}

nxrt_status* memory_alloc(nxrt_ep_session* s, nxrt_memory_kind, uint64_t bytes, uint64_t alignment, void** handle) {
  const nxrt_host_services* h = host_of(s);
  uint64_t align = std::max<uint64_t>(alignment, 64);
  if (bytes > (1ull << 40)) return err(h, NXRT_OUT_OF_MEMORY, "cannot allocate %llu bytes", (unsigned long long)bytes);
  uint64_t size = (std::max<uint64_t>(bytes, 1) + align - 1) / align * align;
  void* p = std::aligned_alloc(size_t(align), size_t(size));
  if (!p) return err(h, NXRT_OUT_OF_MEMORY, "cannot allocate %llu bytes", (unsigned long long)bytes);
  *handle = p;
  return nullptr;
}

void memory_free(nxrt_ep_session*, nxrt_memory_kind, void* handle) { std::free(handle); }

nxrt_status* copy(nxrt_ep_session* s, const nxrt_copy_region* const* regions, size_t count, nxrt_stream*) {
  const nxrt_host_services* h = host_of(s);
  for (size_t k = 0; k < count; ++k) {
    const nxrt_copy_region* r = regions[k];
    if (!r || !NXRT_HAS_FIELD(r, nxrt_copy_region, bytes))
      return err(h, NXRT_INVALID_ARGUMENT, "copy region %zu is NULL or too small", k);
    if (!r->bytes) continue;
    std::memmove(static_cast<char*>(r->dst) + r->dst_offset, static_cast<const char*>(r->src) + r->src_offset, r->bytes);
  }
  return nullptr;
}

nxrt_status* stream_create(nxrt_ep_session*, nxrt_stream** out) {
  *out = reinterpret_cast<nxrt_stream*>(new Stream);
  return nullptr;
}
nxrt_status* stream_synchronize(nxrt_stream*) { return nullptr; }
void stream_release(nxrt_stream* s) { delete reinterpret_cast<Stream*>(s); }
nxrt_status* event_create(nxrt_ep_session*, nxrt_event** out) {
  *out = reinterpret_cast<nxrt_event*>(new Event);
  return nullptr;
}
nxrt_status* event_record(nxrt_event*, nxrt_stream*) { return nullptr; }
nxrt_status* stream_wait_event(nxrt_stream*, nxrt_event*) { return nullptr; }
nxrt_status* event_synchronize(nxrt_event*) { return nullptr; }
void event_release(nxrt_event* e) { delete reinterpret_cast<Event*>(e); }

[[maybe_unused]] nxrt_status* on_run_start(nxrt_ep_session* sp, const nxrt_run_options* o) {
  Session* s = reinterpret_cast<Session*>(sp);
  if (!o || !NXRT_HAS_FIELD(o, nxrt_run_options, run_id))
    return err(s->inst->host, NXRT_INVALID_ARGUMENT, "on_run_start: run options too small");
  std::lock_guard lock(s->mu);
  s->runs[o->run_id].clear();
  return nullptr;
}

[[maybe_unused]] nxrt_status* on_run_end(nxrt_ep_session* sp, uint64_t run_id, const nxrt_status* run_status, nxrt_profile_sink* sink) {
  Session* s = reinterpret_cast<Session*>(sp);
  const nxrt_host_services* h = s->inst->host;
#ifdef BROKEN_RELEASES_RUN_STATUS
  if (run_status) h->status_release(const_cast<nxrt_status*>(run_status));  // the host's, not ours
#else
  (void)run_status;
#endif
  std::vector<size_t> nodes;
  {
    std::lock_guard lock(s->mu);
    auto it = s->runs.find(run_id);
    if (it == s->runs.end()) return err(h, NXRT_INVALID_ARGUMENT, "on_run_end: unknown run %llu", (unsigned long long)run_id);
    nodes = std::move(it->second);
    s->runs.erase(it);
  }
  uint64_t t = 1000;
  for (size_t n : nodes) {
    if (sink)
      if (nxrt_status* st = h->profile_device_event(sink, n, "kernel", t, t + 10)) return st;
    t += 20;
  }
  return nullptr;
}

const nxrt_plugin_api* table() {
  static const nxrt_plugin_api api = [] {
    nxrt_plugin_api a{};
#ifdef BROKEN_TABLE_SIZE_PADDED
    a.struct_size = sizeof a + 2 * sizeof(void*);  // "room for two future entries"
#else
    a.struct_size = sizeof a;
#endif
    a.name = CONFTEST_NAME;
    a.version = "0.2.0";
    a.shutdown = shutdown;
    a.device_count = device_count;
    a.no_device_reason = no_device_reason;
    a.device_info = device_info;
    a.option_count = option_count;
    a.option_info = option_info;
    a.session_create = session_create;
    a.session_release = session_release;
    a.get_capability = get_capability;
    a.kernel_create = kernel_create;
    a.kernel_compute = kernel_compute;
    a.kernel_release = kernel_release;
    a.kernel_describe = kernel_describe;
    a.memory_alloc = memory_alloc;
    a.memory_free = memory_free;
    a.copy = copy;
    a.stream_create = stream_create;
    a.stream_synchronize = stream_synchronize;
    a.stream_release = stream_release;
    a.event_create = event_create;
    a.event_record = event_record;
    a.stream_wait_event = stream_wait_event;
    a.event_synchronize = event_synchronize;
    a.event_release = event_release;
#ifndef BROKEN_NULL_RUN_HOOKS
    a.on_run_start = on_run_start;
    a.on_run_end = on_run_end;
#endif
    return a;
  }();
  return &api;
}

void say(nxrt_negotiate_reply* rp, const char* fmt, ...) {
  if (!rp || rp->struct_size < offsetof(nxrt_negotiate_reply, reserved0)) return;
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(rp->message, sizeof rp->message, fmt, ap);
  va_end(ap);
}

}  // namespace

extern "C" NXRT_EP_EXPORT int32_t nxrt_ep_negotiate(const nxrt_negotiate_request* rq, nxrt_negotiate_reply* rp) {
  if (!rp || rp->struct_size < offsetof(nxrt_negotiate_reply, reserved0)) return NXRT_INVALID_ARGUMENT;
  if (!rq || !NXRT_HAS_FIELD(rq, nxrt_negotiate_request, host)) {
    say(rp, "the negotiation request is NULL or too small (struct_size %u)", rq ? rq->struct_size : 0u);
    return NXRT_INVALID_ARGUMENT;
  }
  if (rq->abi_major != NXRT_EP_ABI_MAJOR) {
#ifdef BROKEN_MAJOR_MESSAGE
    say(rp, "unsupported ABI version");
#else
    say(rp, "the host speaks ABI major %u; this plugin speaks major %u", rq->abi_major, NXRT_EP_ABI_MAJOR);
#endif
    return NXRT_VERSION_MISMATCH;
  }
  if (!rq->host) {
    say(rp, "request.host is NULL");
    return NXRT_INVALID_ARGUMENT;
  }
  if (!NXRT_HAS_FIELD(rq->host, nxrt_host_services, profile_device_event)) {
    say(rp, "the host services table (%u bytes) is smaller than ABI 2.0's", rq->host->struct_size);
    return NXRT_INVALID_ARGUMENT;
  }
  if (rp->struct_size < offsetof(nxrt_negotiate_reply, plugin) + sizeof(void*)) {
    say(rp, "the reply (%u bytes) cannot hold the function table and instance", rp->struct_size);
    return NXRT_INVALID_ARGUMENT;
  }
#ifdef BROKEN_SHARED_INSTANCE
  Instance* inst = &g_shared;
  inst->alive = true;
#else
  Instance* inst = new (std::nothrow) Instance;
  if (!inst) {
    say(rp, "out of memory");
    return NXRT_OUT_OF_MEMORY;
  }
#endif
  inst->host = rq->host;
#ifdef BROKEN_READS_PAST_REQUEST
  inst->library_path = rq->library_path ? rq->library_path : "";  // no NXRT_HAS_FIELD check
#else
  if (NXRT_HAS_FIELD(rq, nxrt_negotiate_request, library_path) && rq->library_path) inst->library_path = rq->library_path;
#endif
  nxrt_negotiate_reply full{};
  std::memcpy(&full, rp, offsetof(nxrt_negotiate_reply, reserved0));
  full.abi_major = NXRT_EP_ABI_MAJOR;
  full.abi_minor = std::min<uint32_t>(rq->abi_minor, NXRT_EP_ABI_MINOR);
  full.message[0] = '\0';
  full.features = NXRT_FEATURE_STREAMS | NXRT_FEATURE_CONCURRENT_RUN | NXRT_FEATURE_RUN_HOOKS | NXRT_FEATURE_DEVICE_PROFILING;
#ifdef BROKEN_UNKNOWN_FEATURE
  full.features |= 1ull << 40;  // a bit no 2.0 minor defines
#endif
  full.api = table();
  full.plugin = reinterpret_cast<nxrt_plugin*>(inst);
  uint32_t n = uint32_t(NXRT_FILLED_SIZE(size_t(rp->struct_size), sizeof full));
#ifdef BROKEN_REPLY_SIZE
  uint32_t back = rp->struct_size;  // claims to have filled whatever the caller allocated
#else
  uint32_t back = n;
#endif
  std::memcpy(rp, &full, n);
  rp->struct_size = back;
  return NXRT_OK;
}
