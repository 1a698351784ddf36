// The interop suite: the ABI 2.1 and 2.2 entry points (native handles, stream import,
// external allocator, memory stats, peer copies, memory import). The abi and stress suites certify a plugin
// against a 2.0 host; these checks negotiate as the newest host (kInteropMinor, 2.2) to
// reach what 2.1 appended, and each is skipped, with the reason, when the plugin
// agrees on 2.0 or does not declare the feature it needs. Declared <=> implemented
// for the 2.1 bits is abi/api.feature_functions.
//
// Vulkan plugins get native checks too: the tool dlopens libvulkan.so.1 itself
// (never links it) and calls the device the plugin reports, to create a timeline
// semaphore to import and to serve VULKAN_MEMORY allocation requests.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "checks.hpp"

namespace conf {
namespace {

std::string ok_or(const Result& r, const std::string& what) {
  if (r.ok) return "";
  return what + " failed: " + r.str() + (r.problem.empty() ? "" : " [" + r.problem + "]");
}

// Error-path expectation: a well-formed failing status with one of `codes`.
std::string expect_error(const Result& r, const std::string& what, std::initializer_list<nxrt_status_code> codes) {
  if (r.ok) return what + " succeeded; it must fail";
  if (!r.problem.empty()) return what + ": " + r.problem;
  for (auto c : codes)
    if (r.code == c) return "";
  std::string names;
  for (auto c : codes) names += (names.empty() ? "" : " or ") + std::string(status_code_name(c));
  return what + " failed with " + status_code_name(r.code) + ", expected " + names + " ('" + r.message + "')";
}

std::string u64(uint64_t v) { return std::to_string(v); }
std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)v);
  return buf;
}

const char* native_type_name(uint32_t t) {
  switch (t) {
    case NXRT_NATIVE_NONE: return "NONE";
    case NXRT_NATIVE_HOST_POINTER: return "HOST_POINTER";
    case NXRT_NATIVE_VULKAN_DEVICE: return "VULKAN_DEVICE";
    case NXRT_NATIVE_VULKAN_QUEUE: return "VULKAN_QUEUE";
    case NXRT_NATIVE_VULKAN_BUFFER: return "VULKAN_BUFFER";
    case NXRT_NATIVE_VULKAN_TIMELINE: return "VULKAN_TIMELINE";
    case NXRT_NATIVE_VULKAN_MEMORY: return "VULKAN_MEMORY";
    case NXRT_NATIVE_CUDA_DEVICE: return "CUDA_DEVICE";
    case NXRT_NATIVE_CUDA_STREAM: return "CUDA_STREAM";
    case NXRT_NATIVE_CUDA_POINTER: return "CUDA_POINTER";
    case NXRT_NATIVE_CUDA_EVENT: return "CUDA_EVENT";
    default: return "unknown";
  }
}
std::string type_str(uint32_t t) { return std::string(native_type_name(t)) + " (" + std::to_string(t) + ")"; }

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 7;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = uint8_t(x >> 24);
  }
  return v;
}

// ----------------------------------------------------------------- gates

// Loads the plugin as a 2.1 host; a skip when it agrees on 2.0 or lacks one of
// the `need` features (or declares it with a NULL function: api.feature_functions
// fails then).
std::optional<Record> load_21(Env& env, uint64_t need) {
  env.minor = kInteropMinor;
  if (auto r = env.load()) return r;
  const Plugin& p = *env.p;
  if (p.agreed_minor() < 1)
    return skip("the plugin agreed on ABI 2.0 when offered 2.1: it has no 2.1 entry points");
  struct Bit {
    uint64_t bit;
    const char* name;
    const void* fn;
    const char* fn_name;
  };
  auto& a = p.api();
  // The feature a check is about first (STREAM_IMPORT needs the other two), STREAMS last.
  const Bit bits[] = {
      {NXRT_FEATURE_STREAM_IMPORT, "NXRT_FEATURE_STREAM_IMPORT", reinterpret_cast<const void*>(a.stream_import), "stream_import"},
      {NXRT_FEATURE_NATIVE_HANDLES, "NXRT_FEATURE_NATIVE_HANDLES", reinterpret_cast<const void*>(a.native_handle), "native_handle"},
      {NXRT_FEATURE_EXTERNAL_ALLOCATOR, "NXRT_FEATURE_EXTERNAL_ALLOCATOR",
       reinterpret_cast<const void*>(a.session_set_allocator), "session_set_allocator"},
      {NXRT_FEATURE_MEMORY_STATS, "NXRT_FEATURE_MEMORY_STATS", reinterpret_cast<const void*>(a.session_stats), "session_stats"},
      {NXRT_FEATURE_PEER_COPY, "NXRT_FEATURE_PEER_COPY", reinterpret_cast<const void*>(a.copy_peer), "copy_peer"},
      {NXRT_FEATURE_MEMORY_IMPORT, "NXRT_FEATURE_MEMORY_IMPORT", p.agreed_minor() >= 2 && p.api_struct_size() >=
       offsetof(nxrt_plugin_api, memory_import) + sizeof(void*) ? reinterpret_cast<const void*>(a.memory_import) : nullptr,
       "memory_import"},
      {NXRT_FEATURE_STREAMS, "NXRT_FEATURE_STREAMS", reinterpret_cast<const void*>(a.stream_create), "stream_create"}};
  if ((need & NXRT_FEATURES_2_2) && p.agreed_minor() < 2)
    return skip("the plugin agreed on ABI 2." + std::to_string(p.agreed_minor()) + " when offered 2.2: it has no 2.2 entry points");
  for (auto& b : bits) {
    if (!(need & b.bit)) continue;
    if (!(p.features() & b.bit)) return skip(std::string("the plugin does not declare ") + b.name);
    if (!b.fn)
      return skip(std::string("not run: ") + b.name + " is declared but " + b.fn_name +
                  " is NULL or beyond the table's struct_size (see abi/api.feature_functions)");
  }
  return std::nullopt;
}

// load_21 + a device session.
std::optional<Record> session_21(Env& env, uint64_t need) {
  if (auto r = load_21(env, need)) return r;
  return env.session();
}

// ------------------------------------------------- callee-filled structs

constexpr uint8_t kCanary = 0xC5;
constexpr size_t kCanaryBytes = 64;

// A callee-filled struct in a buffer larger than the caller's struct_size: every
// byte the caller did not set holds kCanary.
template <typename T>
struct Filled {
  Result r;
  T v{};                 // the caller's view: min(size, sizeof T) bytes of the buffer
  uint32_t size = 0;     // the caller's struct_size
  uint32_t written = 0;  // struct_size after the call
  long past = -1;        // the first byte written past min(written, size) (or past size on failure), -1: none
  // The callee-filled rule: nothing written past what it says it filled, written
  // back min(caller's size, the callee's sizeof) (>= this header's for a 2.1 callee).
  std::string problem(const std::string& what) const {
    if (!r.ok) return "";
    if (past >= 0)
      return what + " wrote byte " + std::to_string(past) + " past the " + (written < size ? "size it wrote back (" : "caller's struct_size (") +
             std::to_string(std::min(written, size)) + ")";
    if (written > size)
      return what + " wrote back struct_size " + std::to_string(written) + ", larger than the caller's " + std::to_string(size);
    if (size <= sizeof(T) && written != size)
      return what + " wrote back struct_size " + std::to_string(written) + " for a caller's " + std::to_string(size) +
             " (the callee-filled rule: min(caller's, callee's sizeof) = " + std::to_string(size) + ")";
    if (size > sizeof(T) && written < sizeof(T))
      return what + " wrote back struct_size " + std::to_string(written) + " for a caller's " + std::to_string(size) +
             "; a 2.1 callee's sizeof is at least " + std::to_string(sizeof(T));
    return "";
  }
};

template <typename T, typename Call>
Filled<T> call_filled(uint32_t size, Call call) {
  Filled<T> f;
  f.size = size;
  size_t total = std::max<size_t>(size, sizeof(T)) + kCanaryBytes;
  std::vector<uint8_t> buf(total + 16, kCanary);
  uint8_t* base = buf.data() + (16 - reinterpret_cast<uintptr_t>(buf.data()) % 16) % 16;
  std::memset(base, kCanary, total);
  std::memcpy(base, &size, sizeof size);  // struct_size is the first field of every struct
  f.r = take(call(reinterpret_cast<T*>(base)));
  std::memcpy(&f.written, base, sizeof f.written);
  // Success: nothing past what it says it filled. Failure: nothing past the caller's struct.
  size_t from = f.r.ok ? std::min<size_t>(f.written, size) : size;
  for (size_t i = from; i < total; ++i)
    if (base[i] != kCanary) {
      f.past = long(i);
      break;
    }
  std::memset(&f.v, 0, sizeof f.v);
  std::memcpy(&f.v, base, std::min<size_t>(std::min<size_t>(size, f.written), sizeof(T)));
  return f;
}

Filled<nxrt_native_handle> native(Env& env, nxrt_native_object what, const void* object,
                                  uint32_t size = sizeof(nxrt_native_handle)) {
  Phase ph("native_handle");
  auto& api = env.p->api();
  nxrt_ep_session* s = env.s->raw();
  return call_filled<nxrt_native_handle>(size, [&](nxrt_native_handle* out) { return api.native_handle(s, what, object, out); });
}

Filled<nxrt_memory_stats> stats(Env& env, uint32_t size = sizeof(nxrt_memory_stats)) {
  Phase ph("session_stats");
  auto& api = env.p->api();
  nxrt_ep_session* s = env.s->raw();
  return call_filled<nxrt_memory_stats>(size, [&](nxrt_memory_stats* out) { return api.session_stats(s, out); });
}

// Full stats or a message.
std::string get_stats(Env& env, nxrt_memory_stats& out, const std::string& when) {
  auto f = stats(env);
  if (!f.r.ok) return ok_or(f.r, "session_stats (" + when + ")");
  if (auto e = f.problem("session_stats"); !e.empty()) return e;
  out = f.v;
  return "";
}

// One copy region, the copy done synchronously (or on `stream`).
Result copy1(Env& env, nxrt_memory_kind sk, const void* src, uint64_t so, nxrt_memory_kind dk, void* dst, uint64_t doff,
             uint64_t bytes, nxrt_stream* stream = nullptr) {
  nxrt_copy_region c{};
  c.struct_size = sizeof c;
  c.src_memory = sk;
  c.src = src;
  c.src_offset = so;
  c.dst_memory = dk;
  c.dst = dst;
  c.dst_offset = doff;
  c.bytes = bytes;
  Phase ph("copy");
  return take(copy_n(env.p->api(), env.s->raw(), &c, 1, stream));
}

Result alloc_device(Env& env, uint64_t bytes, void** h, nxrt_memory_kind kind = NXRT_MEMORY_DEVICE) {
  Phase ph("memory_alloc");
  *h = nullptr;
  Result r = take(env.p->api().memory_alloc(env.s->raw(), kind, bytes, NXRT_TENSOR_ALIGNMENT, h));
  if (r.ok && !*h) {
    r.ok = false;
    r.code = NXRT_INTERNAL;
    r.problem = "memory_alloc returned success and a NULL handle";
  }
  return r;
}

// ------------------------------------------------------------- Vulkan

// The few Vulkan types and entry points the checks use, declared here so the tool
// builds without Vulkan headers and runs without a loader.
using VkResult = int32_t;
using VkDevice = void*;
using VkSemaphore = uint64_t;
using VkDeviceMemory = uint64_t;
using PFN_void = void (*)();
using PFN_vkGetDeviceProcAddr = PFN_void (*)(VkDevice, const char*);
constexpr int32_t VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO = 5;
constexpr int32_t VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO = 9;
constexpr int32_t VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO = 1000207002;
constexpr int32_t VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO = 1000207005;
constexpr int32_t VK_SEMAPHORE_TYPE_TIMELINE = 1;
struct VkMemoryAllocateInfo {
  int32_t sType;
  const void* pNext;
  uint64_t allocationSize;
  uint32_t memoryTypeIndex;
};
struct VkSemaphoreTypeCreateInfo {
  int32_t sType;
  const void* pNext;
  int32_t semaphoreType;
  uint64_t initialValue;
};
struct VkSemaphoreCreateInfo {
  int32_t sType;
  const void* pNext;
  uint32_t flags;
};
struct VkSemaphoreSignalInfo {
  int32_t sType;
  const void* pNext;
  VkSemaphore semaphore;
  uint64_t value;
};
using PFN_vkAllocateMemory = VkResult (*)(VkDevice, const VkMemoryAllocateInfo*, const void*, VkDeviceMemory*);
using PFN_vkFreeMemory = void (*)(VkDevice, VkDeviceMemory, const void*);
using PFN_vkCreateSemaphore = VkResult (*)(VkDevice, const VkSemaphoreCreateInfo*, const void*, VkSemaphore*);
using PFN_vkDestroySemaphore = void (*)(VkDevice, VkSemaphore, const void*);
using PFN_vkSignalSemaphore = VkResult (*)(VkDevice, const VkSemaphoreSignalInfo*);
using PFN_vkGetSemaphoreCounterValue = VkResult (*)(VkDevice, VkSemaphore, uint64_t*);

// libvulkan.so.1, opened once per (child) process.
struct VkLib {
  void* dl = nullptr;
  PFN_vkGetDeviceProcAddr gdpa = nullptr;
  std::string error;
  static VkLib& get() {
    static VkLib* lib = [] {
      auto* l = new VkLib;
      dlerror();
      l->dl = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
      if (!l->dl) {
        const char* e = dlerror();
        l->error = std::string("libvulkan.so.1 cannot be loaded (") + (e ? e : "dlopen failed") + ")";
        return l;
      }
      l->gdpa = reinterpret_cast<PFN_vkGetDeviceProcAddr>(dlsym(l->dl, "vkGetDeviceProcAddr"));
      if (!l->gdpa) l->error = "libvulkan.so.1 has no vkGetDeviceProcAddr";
      return l;
    }();
    return *lib;
  }
  bool ok() const { return gdpa != nullptr; }
  // A device-level function, core name first, then its KHR alias (Vulkan 1.1 devices).
  template <typename F>
  F fn(VkDevice d, const char* name) const {
    if (!gdpa || !d) return nullptr;
    PFN_void f = gdpa(d, name);
    if (!f) f = gdpa(d, (std::string(name) + "KHR").c_str());
    return reinterpret_cast<F>(f);
  }
};

// ------------------------------------------------- counting allocator

// The conformance tool's external allocator: serves HOST_POINTER requests with
// aligned_alloc and VULKAN_MEMORY requests with vkAllocateMemory on the request's
// device, counts live bytes, and records every request that is not sensible.
struct CountingAllocator {
  std::mutex mu;
  bool refuse = false;  // answer every request with nonzero
  bool closed = false;  // the session is released: any further call is a violation
  uint64_t granule = 0;  // nonzero: every allocation is rounded up to a multiple of it (size > bytes is allowed)
  uint64_t expect_device = 0;  // the session's VkDevice, when known
  uint64_t live = 0, peak = 0;
  size_t allocs = 0, frees = 0, refusals = 0;
  std::set<uint32_t> types;
  std::map<uint64_t, nxrt_native_handle> held;
  std::vector<std::string> violations;
  std::string unserved;  // a request the tool cannot serve (CUDA, no libvulkan): the check is skipped

  nxrt_device_allocator table() {
    nxrt_device_allocator a{};
    a.struct_size = sizeof a;
    a.user = this;
    a.alloc = &alloc_cb;
    a.free = &free_cb;
    return a;
  }
  void violation(const std::string& v) {
    if (violations.size() < 16) violations.push_back(v);
  }
  size_t live_count() {
    std::lock_guard lock(mu);
    return held.size();
  }
  uint64_t live_bytes() {
    std::lock_guard lock(mu);
    return live;
  }
  size_t alloc_count() {
    std::lock_guard lock(mu);
    return allocs;
  }
  size_t refusal_count() {
    std::lock_guard lock(mu);
    return refusals;
  }
  std::string unserved_reason() {
    std::lock_guard lock(mu);
    return unserved;
  }

  static int32_t alloc_cb(void* user, const nxrt_allocation_request* rq, nxrt_native_handle* out) {
    auto* self = static_cast<CountingAllocator*>(user);
    std::lock_guard lock(self->mu);
    return self->alloc(rq, out);
  }
  static void free_cb(void* user, const nxrt_native_handle* h) {
    auto* self = static_cast<CountingAllocator*>(user);
    std::lock_guard lock(self->mu);
    self->free(h);
  }

  int32_t alloc(const nxrt_allocation_request* rq, nxrt_native_handle* out) {
    if (closed) violation("the plugin called the allocator's alloc after session_release returned");
    if (!rq || !out) {
      violation("alloc called with a NULL request or a NULL out");
      return 1;
    }
    if (!NXRT_HAS_FIELD(rq, nxrt_allocation_request, memory_type_index)) {
      violation("an allocation request with struct_size " + std::to_string(rq->struct_size) + " (< 2.1's " +
                std::to_string(sizeof(nxrt_allocation_request)) + ")");
      return 1;
    }
    if (!NXRT_HAS_FIELD(out, nxrt_native_handle, size)) {
      violation("alloc's out has struct_size " + std::to_string(out->struct_size) + ": too small for `size`");
      return 1;
    }
    const std::string what = "request (" + type_str(rq->type) + ", " + u64(rq->bytes) + " bytes, alignment " +
                             u64(rq->alignment) + ")";
    if (rq->bytes == 0) violation(what + ": zero bytes");
    if (rq->bytes > (1ull << 40)) violation(what + ": an implausible size");
    if (rq->alignment == 0 || (rq->alignment & (rq->alignment - 1)) || rq->alignment > (1ull << 30))
      violation(what + ": the alignment is not a power of two");
    if (rq->reserved0 != 0) violation(what + ": reserved0 is " + std::to_string(rq->reserved0) + ", must be 0");
    types.insert(rq->type);
    switch (rq->type) {
      case NXRT_NATIVE_HOST_POINTER:
        if (rq->device != 0) violation(what + ": device is " + hex(rq->device) + " (must be 0 for HOST_POINTER)");
        break;
      case NXRT_NATIVE_VULKAN_MEMORY:
        if (rq->device == 0) violation(what + ": device is 0 (must be the VkDevice to allocate on)");
        else if (expect_device && rq->device != expect_device)
          violation(what + ": device " + hex(rq->device) + " is not the session's VkDevice " + hex(expect_device));
        if (rq->memory_type_index >= 32) violation(what + ": memory_type_index " + std::to_string(rq->memory_type_index) + " >= 32");
        break;
      case NXRT_NATIVE_CUDA_POINTER:
        if (unserved.empty()) unserved = "the plugin asks the external allocator for CUDA_POINTER memory, which this tool does not serve";
        return 1;
      default:
        violation(what + ": a type an allocator cannot return (HOST_POINTER, VULKAN_MEMORY or CUDA_POINTER)");
        return 1;
    }
    if (refuse) {
      ++refusals;
      return 1;
    }
    nxrt_native_handle h{};
    h.struct_size = sizeof h;
    h.type = rq->type;
    if (rq->type == NXRT_NATIVE_HOST_POINTER) {
      uint64_t align = std::max<uint64_t>(rq->alignment && !(rq->alignment & (rq->alignment - 1)) ? rq->alignment : 64, 64);
      uint64_t g = std::max<uint64_t>(align, granule);
      uint64_t size = std::max<uint64_t>((rq->bytes + g - 1) / g * g, g);
      void* p = std::aligned_alloc(size_t(align), size_t(size));
      if (!p) return 1;
      h.handle = uint64_t(uintptr_t(p));
      h.size = size;
    } else {
      VkLib& vk = VkLib::get();
      if (!vk.ok()) {
        if (unserved.empty()) unserved = "the plugin asks for VULKAN_MEMORY and " + vk.error;
        return 1;
      }
      auto* allocate = vk.fn<PFN_vkAllocateMemory>(reinterpret_cast<VkDevice>(uintptr_t(rq->device)), "vkAllocateMemory");
      if (!allocate) {
        if (unserved.empty()) unserved = "vkGetDeviceProcAddr gives no vkAllocateMemory for the request's device";
        return 1;
      }
      const uint64_t size = granule ? (rq->bytes + granule - 1) / granule * granule : rq->bytes;
      VkMemoryAllocateInfo info{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, nullptr, size, rq->memory_type_index};
      VkDeviceMemory mem = 0;
      VkResult vr = allocate(reinterpret_cast<VkDevice>(uintptr_t(rq->device)), &info, nullptr, &mem);
      if (vr != 0 || !mem) {
        violation(what + ": vkAllocateMemory failed with VkResult " + std::to_string(vr) + " for memory type " +
                  std::to_string(rq->memory_type_index));
        return 1;
      }
      h.handle = mem;
      h.value = rq->memory_type_index;
      h.size = size;
      h.aux0 = rq->device;  // kept to free it (the plugin hands the struct back)
    }
    ++allocs;
    live += h.size;
    peak = std::max(peak, live);
    held[h.handle] = h;
    // Callee-filled rule on `out`.
    uint32_t n = uint32_t(NXRT_FILLED_SIZE(size_t(out->struct_size), sizeof h));
    h.struct_size = n;
    std::memcpy(static_cast<void*>(out), &h, n);
    return 0;
  }

  void free(const nxrt_native_handle* h) {
    if (closed) violation("the plugin called the allocator's free after session_release returned");
    if (!h) {
      violation("free called with NULL");
      return;
    }
    auto it = held.find(h->handle);
    if (it == held.end()) {
      violation("free of handle " + hex(h->handle) + ", which the allocator did not return (or freed twice)");
      return;
    }
    const nxrt_native_handle mine = it->second;
    if (NXRT_HAS_FIELD(h, nxrt_native_handle, size) && (h->type != mine.type || h->size != mine.size))
      violation("free of handle " + hex(h->handle) + " as " + type_str(h->type) + " of " + u64(h->size) +
                " bytes; alloc returned " + type_str(mine.type) + " of " + u64(mine.size) + " bytes");
    held.erase(it);
    ++frees;
    live -= mine.size;
    if (mine.type == NXRT_NATIVE_HOST_POINTER) {
      std::free(reinterpret_cast<void*>(uintptr_t(mine.handle)));
    } else {
      auto* release = VkLib::get().fn<PFN_vkFreeMemory>(reinterpret_cast<VkDevice>(uintptr_t(mine.aux0)), "vkFreeMemory");
      if (release) release(reinterpret_cast<VkDevice>(uintptr_t(mine.aux0)), mine.handle, nullptr);
    }
  }

  std::string type_list() {
    std::lock_guard lock(mu);
    std::string s;
    for (auto t : types) s += (s.empty() ? "" : ", ") + std::string(native_type_name(t));
    return s.empty() ? "none" : s;
  }
};

// The session's native DEVICE handle when the plugin has NATIVE_HANDLES and answers it.
std::optional<nxrt_native_handle> native_device(Env& env) {
  if (!(env.p->features() & NXRT_FEATURE_NATIVE_HANDLES) || !env.p->api().native_handle) return std::nullopt;
  auto f = native(env, NXRT_NATIVE_OBJECT_DEVICE, nullptr);
  if (!f.r.ok || !f.problem("").empty()) return std::nullopt;
  return f.v;
}

// ------------------------------------------------------------ negotiate

Record negotiate_21(const Config& c) {
  Env env(c);
  env.minor = kInteropMinor;
  if (auto r = env.load()) {
    if (r->message.find("negotiation failed") != std::string::npos) return fail(r->message);
    return *r;
  }
  const Plugin& p = *env.p;
  if (p.agreed_minor() < 1) return skip("the plugin agreed on ABI 2.0 when offered 2.1: it has no 2.1 entry points");
  uint64_t f = p.features();
  std::string d;
  if (f & NXRT_FEATURE_NATIVE_HANDLES) d += " native_handles";
  if (f & NXRT_FEATURE_STREAM_IMPORT) d += " stream_import";
  if (f & NXRT_FEATURE_EXTERNAL_ALLOCATOR) d += " external_allocator";
  if (f & NXRT_FEATURE_MEMORY_STATS) d += " memory_stats";
  if (f & NXRT_FEATURE_PEER_COPY) d += " peer_copy";
  if (f & NXRT_FEATURE_MEMORY_IMPORT) d += " memory_import";
  return pass("agreed 2." + std::to_string(p.agreed_minor()) + "; interop features:" + (d.empty() ? " none" : d));
}

// -------------------------------------------------------- native handles

// The handle of one native object is well-formed for its type.
std::string handle_problem(const nxrt_native_handle& h, const std::string& what) {
  if (h.type == NXRT_NATIVE_NONE) return what + " succeeded with type NXRT_NATIVE_NONE";
  // A CUDA device is its ordinal (value); every other type names an object in `handle`.
  if (h.type != NXRT_NATIVE_CUDA_DEVICE && h.handle == 0) return what + " succeeded with type " + type_str(h.type) + " and handle 0";
  return "";
}

Record native_device_queue(const Config& c) {
  Env env(c);
  if (auto r = session_21(env, NXRT_FEATURE_NATIVE_HANDLES)) return *r;
  std::string notes;
  std::optional<nxrt_native_handle> dev;
  bool any = false;
  for (nxrt_native_object what : {NXRT_NATIVE_OBJECT_DEVICE, NXRT_NATIVE_OBJECT_QUEUE}) {
    const std::string name = what == NXRT_NATIVE_OBJECT_DEVICE ? "native_handle(DEVICE)" : "native_handle(QUEUE)";
    auto f = native(env, what, nullptr);
    if (!f.r.ok) {
      if (f.r.code == NXRT_UNSUPPORTED && f.r.problem.empty()) {
        notes += " " + name + ": UNSUPPORTED;";
        continue;
      }
      return fail(ok_or(f.r, name) + " (it must succeed or answer NXRT_UNSUPPORTED)");
    }
    if (auto e = f.problem(name); !e.empty()) return fail(e);
    if (auto e = handle_problem(f.v, name); !e.empty()) return fail(e);
    auto again = native(env, what, nullptr);
    if (!again.r.ok || std::memcmp(&again.v, &f.v, sizeof f.v) != 0)
      return fail(name + " answered differently the second time");
    const nxrt_native_handle& h = f.v;
    any = true;
    if (what == NXRT_NATIVE_OBJECT_DEVICE) {
      dev = h;
      if (h.type != NXRT_NATIVE_VULKAN_DEVICE && h.type != NXRT_NATIVE_CUDA_DEVICE)
        return fail(name + " has type " + type_str(h.type) + "; a device is VULKAN_DEVICE or CUDA_DEVICE");
      if (h.type == NXRT_NATIVE_VULKAN_DEVICE && (!h.aux0 || !h.aux1))
        return fail(name + ": VULKAN_DEVICE needs aux0 (its VkPhysicalDevice) and aux1 (its VkInstance), got " + hex(h.aux0) +
                    " and " + hex(h.aux1));
    } else {
      if (dev && dev->type == NXRT_NATIVE_VULKAN_DEVICE) {
        if (h.type != NXRT_NATIVE_VULKAN_QUEUE)
          return fail(name + " has type " + type_str(h.type) + " on a VULKAN_DEVICE session (expected VULKAN_QUEUE)");
        if (h.value != dev->value)
          return fail(name + ": queue family " + u64(h.value) + " differs from the device handle's " + u64(dev->value) +
                      " (the family the plugin submits to)");
      }
    }
    notes += " " + name + ": " + native_type_name(h.type) + ";";
  }
  if (!any) {
    // A host-memory device: no device or queue object, but its memory must have handles.
    void* m = nullptr;
    Result r = alloc_device(env, 4096, &m);
    if (!r.ok) return fail(ok_or(r, "memory_alloc"));
    auto f = native(env, NXRT_NATIVE_OBJECT_MEMORY, m);
    env.s->free(m);
    if (!f.r.ok)
      return fail("DEVICE and QUEUE are UNSUPPORTED, so MEMORY must work: " + ok_or(f.r, "native_handle(MEMORY)"));
    if (auto e = handle_problem(f.v, "native_handle(MEMORY)"); !e.empty()) return fail(e);
    notes += " MEMORY: " + std::string(native_type_name(f.v.type)) + ";";
  }
  notes.pop_back();
  return pass(notes.substr(1));
}

Record native_memory(const Config& c) {
  Env env(c);
  if (auto r = session_21(env, NXRT_FEATURE_NATIVE_HANDLES)) return *r;
  const uint64_t sizes[] = {1000, (1u << 20) + 12};
  void* h[2] = {};
  nxrt_native_handle nh[2] = {};
  std::string e;
  for (int i = 0; i < 2 && e.empty(); ++i) {
    Result r = alloc_device(env, sizes[i], &h[i]);
    if (!r.ok) {
      e = ok_or(r, "memory_alloc(" + u64(sizes[i]) + ")");
      break;
    }
    const std::string name = "native_handle(MEMORY) of a " + u64(sizes[i]) + "-byte DEVICE allocation";
    auto f = native(env, NXRT_NATIVE_OBJECT_MEMORY, h[i]);
    if (!f.r.ok) e = ok_or(f.r, name);
    else if (auto p = f.problem(name); !p.empty()) e = p;
    else if (auto p = handle_problem(f.v, name); !p.empty()) e = p;
    else if (f.v.type != NXRT_NATIVE_HOST_POINTER && f.v.type != NXRT_NATIVE_VULKAN_BUFFER && f.v.type != NXRT_NATIVE_CUDA_POINTER)
      e = name + " has type " + type_str(f.v.type) + "; memory is HOST_POINTER, VULKAN_BUFFER or CUDA_POINTER";
    else if (f.v.size < sizes[i])
      e = name + " reports size " + u64(f.v.size) + ", less than the " + u64(sizes[i]) + " bytes allocated";
    else if (f.v.type == NXRT_NATIVE_HOST_POINTER && env.info.host_addressable && f.v.handle != uint64_t(uintptr_t(h[i])))
      e = name + " is HOST_POINTER " + hex(f.v.handle) + " on a host-addressable device whose handle is the pointer " +
          hex(uint64_t(uintptr_t(h[i])));
    nh[i] = f.v;
    if (!e.empty()) break;
    // A host pointer must address the memory: data copied in reads back through it.
    if (f.v.type == NXRT_NATIVE_HOST_POINTER) {
      auto data = pattern(size_t(sizes[i]), uint32_t(i + 3));
      Result cr = copy1(env, NXRT_MEMORY_HOST, data.data(), 0, NXRT_MEMORY_DEVICE, h[i], 0, sizes[i]);
      if (!cr.ok) e = ok_or(cr, "copy to the allocation");
      else if (std::memcmp(reinterpret_cast<const void*>(uintptr_t(f.v.handle)), data.data(), data.size()) != 0)
        e = name + ": the HOST_POINTER does not address the allocation (copied bytes do not read back through it)";
    }
  }
  if (e.empty() && nh[0].handle == nh[1].handle && nh[0].value == nh[1].value)
    e = "two live allocations have the same native handle " + hex(nh[0].handle) + " (and value " + u64(nh[0].value) + ")";
  for (auto* x : h) env.s->free(x);
  if (!e.empty()) return fail(e);
  return pass(std::string(native_type_name(nh[0].type)) + ", sizes " + u64(nh[0].size) + " and " + u64(nh[1].size));
}

Record native_bad_object(const Config& c) {
  Env env(c);
  if (auto r = session_21(env, NXRT_FEATURE_NATIVE_HANDLES)) return *r;
  auto f = native(env, NXRT_NATIVE_OBJECT_MEMORY, nullptr);
  if (auto e = expect_error(f.r, "native_handle(MEMORY, NULL object)", {NXRT_INVALID_ARGUMENT}); !e.empty()) return fail(e);
  if (f.past >= 0) return fail("the failing native_handle(MEMORY, NULL) wrote into the caller's struct (byte " + std::to_string(f.past) + ")");
  std::string notes = "MEMORY/NULL: " + std::string(status_code_name(f.r.code));
  if (env.p->features() & NXRT_FEATURE_STREAMS) {
    auto s = native(env, NXRT_NATIVE_OBJECT_STREAM, nullptr);
    if (auto e = expect_error(s.r, "native_handle(STREAM, NULL object)", {NXRT_INVALID_ARGUMENT, NXRT_UNSUPPORTED}); !e.empty())
      return fail(e);
    notes += ", STREAM/NULL: " + std::string(status_code_name(s.r.code));
  }
  auto u = native(env, nxrt_native_object(99), nullptr);
  if (auto e = expect_error(u.r, "native_handle(object kind 99)", {NXRT_INVALID_ARGUMENT, NXRT_UNSUPPORTED}); !e.empty())
    return fail(e + " (an object kind this ABI does not define)");
  notes += ", kind 99: " + std::string(status_code_name(u.r.code));
  return pass(notes);
}

// The callee-filled rule on nxrt_native_handle: a 2.1 caller's struct cut short
// (up to `handle`, and just struct_size + type) and one from a future minor.
Record native_struct_size(const Config& c) {
  Env env(c);
  if (auto r = session_21(env, NXRT_FEATURE_NATIVE_HANDLES)) return *r;
  void* m = nullptr;
  Result r = alloc_device(env, 4096, &m);
  if (!r.ok) return fail(ok_or(r, "memory_alloc"));
  std::string e, notes;
  auto full = native(env, NXRT_NATIVE_OBJECT_MEMORY, m);
  if (!full.r.ok) e = ok_or(full.r, "native_handle(MEMORY)");
  else e = full.problem("native_handle(MEMORY) with struct_size " + std::to_string(sizeof(nxrt_native_handle)));
  const uint32_t up_to_handle = uint32_t(offsetof(nxrt_native_handle, handle) + sizeof(uint64_t));
  if (e.empty()) {
    auto s = native(env, NXRT_NATIVE_OBJECT_MEMORY, m, up_to_handle);
    const std::string name = "native_handle(MEMORY) with struct_size " + std::to_string(up_to_handle) + " (up to `handle`)";
    if (!s.r.ok) e = ok_or(s.r, name) + " (the callee-filled rule: fill what fits)";
    else if (auto p = s.problem(name); !p.empty()) e = p;
    else if (s.v.handle != full.v.handle || s.v.type != full.v.type)
      e = name + " gave type/handle " + type_str(s.v.type) + "/" + hex(s.v.handle) + ", the full struct " +
          type_str(full.v.type) + "/" + hex(full.v.handle);
  }
  if (e.empty()) {
    // struct_size + type only: filling it (8 bytes) or refusing it are both fine; writing past it is not.
    const uint32_t tiny = uint32_t(offsetof(nxrt_native_handle, handle));
    auto s = native(env, NXRT_NATIVE_OBJECT_MEMORY, m, tiny);
    const std::string name = "native_handle(MEMORY) with struct_size " + std::to_string(tiny);
    if (s.past >= 0) e = name + " wrote byte " + std::to_string(s.past) + " past the caller's struct_size " + std::to_string(tiny);
    else if (s.r.ok) e = s.problem(name);
    else if (!s.r.problem.empty()) e = name + ": " + s.r.problem;
    notes = std::to_string(tiny) + " bytes: " + (s.r.ok ? "filled" : std::string("refused (") + status_code_name(s.r.code) + ")");
  }
  uint32_t future_written = 0;
  if (e.empty()) {
    const uint32_t future = uint32_t(sizeof(nxrt_native_handle) + 32);
    auto s = native(env, NXRT_NATIVE_OBJECT_MEMORY, m, future);
    const std::string name = "native_handle(MEMORY) with a future struct_size " + std::to_string(future);
    if (!s.r.ok) e = ok_or(s.r, name);
    else e = s.problem(name);
    future_written = s.written;
  }
  if (e.empty()) {  // DEVICE may be UNSUPPORTED (host-memory devices); it must not overrun either way
    auto d = native(env, NXRT_NATIVE_OBJECT_DEVICE, nullptr, up_to_handle);
    const std::string name = "native_handle(DEVICE) with struct_size " + std::to_string(up_to_handle);
    if (d.past >= 0) e = name + " wrote byte " + std::to_string(d.past) + " past the caller's struct_size";
    else if (d.r.ok) e = d.problem(name);
  }
  env.s->free(m);
  if (!e.empty()) return fail(e);
  return pass(std::to_string(up_to_handle) + " bytes: filled; " + notes + "; " + std::to_string(sizeof(nxrt_native_handle) + 32) +
              " bytes: written back " + std::to_string(future_written));
}

// With STREAM_IMPORT, native_handle answers STREAM objects: a created stream's completion point.
Record native_stream(const Config& c) {
  Env env(c);
  if (auto r = session_21(env, NXRT_FEATURE_NATIVE_HANDLES | NXRT_FEATURE_STREAM_IMPORT | NXRT_FEATURE_STREAMS)) return *r;
  auto& api = env.p->api();
  nxrt_stream* st = nullptr;
  Result r = take(api.stream_create(env.s->raw(), &st));
  if (!r.ok) return fail(ok_or(r, "stream_create"));
  std::string e;
  auto f = native(env, NXRT_NATIVE_OBJECT_STREAM, st);
  const std::string name = "native_handle(STREAM) of a stream_create'd stream";
  if (!f.r.ok) e = ok_or(f.r, name) + " (STREAM_IMPORT is declared: STREAM objects must be answered)";
  else if (auto p = f.problem(name); !p.empty()) e = p;
  else if (auto p = handle_problem(f.v, name); !p.empty()) e = p;
  else if (f.v.type != NXRT_NATIVE_VULKAN_TIMELINE && f.v.type != NXRT_NATIVE_CUDA_STREAM)
    e = name + " has type " + type_str(f.v.type) + "; a stream is VULKAN_TIMELINE or CUDA_STREAM";
  std::string notes = f.r.ok ? native_type_name(f.v.type) : "";
  if (e.empty()) {
    // Work queued on it, then synchronized: its completion point has been reached.
    void* m = nullptr;
    auto data = pattern(4096, 11);
    Result ar = alloc_device(env, data.size(), &m);
    if (!ar.ok) e = ok_or(ar, "memory_alloc");
    else {
      Result cr = copy1(env, NXRT_MEMORY_HOST, data.data(), 0, NXRT_MEMORY_DEVICE, m, 0, data.size(), st);
      auto after = native(env, NXRT_NATIVE_OBJECT_STREAM, st);
      Result sr = take(api.stream_synchronize(st));
      if (!cr.ok) e = ok_or(cr, "a copy on the stream");
      else if (!sr.ok) e = ok_or(sr, "stream_synchronize");
      else if (!after.r.ok) e = ok_or(after.r, name + " after a copy");
      else if (f.v.type == NXRT_NATIVE_VULKAN_TIMELINE) {
        if (after.v.handle != f.v.handle) e = name + ": the timeline semaphore changed after a copy";
        else if (after.v.value < f.v.value) e = name + ": the completion point went back from " + u64(f.v.value) + " to " + u64(after.v.value);
        VkLib& vk = VkLib::get();
        auto dev = native_device(env);
        if (e.empty() && vk.ok() && dev && dev->type == NXRT_NATIVE_VULKAN_DEVICE) {
          auto get = vk.fn<PFN_vkGetSemaphoreCounterValue>(reinterpret_cast<VkDevice>(uintptr_t(dev->handle)),
                                                             "vkGetSemaphoreCounterValue");
          uint64_t v = 0;
          if (get && get(reinterpret_cast<VkDevice>(uintptr_t(dev->handle)), after.v.handle, &v) == 0) {
            if (v < after.v.value)
              e = "after stream_synchronize the stream's timeline is at " + u64(v) + ", before its completion point " +
                  u64(after.v.value) + " from native_handle(STREAM)";
            else
              notes += ", semaphore at " + u64(v) + " >= completion point " + u64(after.v.value);
          }
        }
      }
      env.s->free(m);
    }
  }
  api.stream_release(st);
  if (!e.empty()) return fail(e);
  return pass(notes);
}

// ---------------------------------------------------------- memory stats

Record stats_struct_size(const Config& c) {
  Env env(c);
  if (auto r = session_21(env, NXRT_FEATURE_MEMORY_STATS)) return *r;
  auto full = stats(env);
  if (!full.r.ok) return fail(ok_or(full.r, "session_stats"));
  if (auto e = full.problem("session_stats with struct_size " + std::to_string(sizeof(nxrt_memory_stats))); !e.empty()) return fail(e);
  if (full.v.reserved0 != 0) return fail("session_stats: reserved0 is " + u64(full.v.reserved0) + ", must be 0");
  if (full.v.peak_bytes_in_use < full.v.bytes_in_use)
    return fail("session_stats: peak_bytes_in_use " + u64(full.v.peak_bytes_in_use) + " < bytes_in_use " + u64(full.v.bytes_in_use));
  const uint32_t up_to_in_use = uint32_t(offsetof(nxrt_memory_stats, bytes_in_use) + sizeof(uint64_t));
  auto s = stats(env, up_to_in_use);
  const std::string name = "session_stats with struct_size " + std::to_string(up_to_in_use) + " (up to bytes_in_use)";
  if (!s.r.ok) return fail(ok_or(s.r, name) + " (the callee-filled rule: fill what fits)");
  if (auto e = s.problem(name); !e.empty()) return fail(e);
  const uint32_t mid = uint32_t(offsetof(nxrt_memory_stats, host_to_device_copies));
  s = stats(env, mid);
  if (!s.r.ok) return fail(ok_or(s.r, "session_stats with struct_size " + std::to_string(mid)));
  if (auto e = s.problem("session_stats with struct_size " + std::to_string(mid)); !e.empty()) return fail(e);
  const uint32_t future = uint32_t(sizeof(nxrt_memory_stats) + 32);
  s = stats(env, future);
  if (!s.r.ok) return fail(ok_or(s.r, "session_stats with a future struct_size " + std::to_string(future)));
  if (auto e = s.problem("session_stats with a future struct_size " + std::to_string(future)); !e.empty()) return fail(e);
  return pass("sizes " + std::to_string(up_to_in_use) + ", " + std::to_string(mid) + ", " + std::to_string(sizeof(nxrt_memory_stats)) +
              " and " + std::to_string(future) + " filled by the callee-filled rule");
}

Record stats_alloc_free(const Config& c) {
  Env env(c);
  if (auto r = session_21(env, NXRT_FEATURE_MEMORY_STATS)) return *r;
  const uint64_t n = (1u << 20) + 12;
  nxrt_memory_stats s0{}, s1{}, s2{};
  if (auto e = get_stats(env, s0, "before"); !e.empty()) return fail(e);
  void* m = nullptr;
  Result r = alloc_device(env, n, &m);
  if (!r.ok) return fail(ok_or(r, "memory_alloc(" + u64(n) + ")"));
  std::string e = get_stats(env, s1, "while holding " + u64(n) + " bytes");
  env.s->free(m);
  if (!e.empty()) return fail(e);
  if (auto f = get_stats(env, s2, "after memory_free"); !f.empty()) return fail(f);
  const std::string a = "after memory_alloc(" + u64(n) + "): ";
  if (s1.bytes_in_use < s0.bytes_in_use + n)
    return fail(a + "bytes_in_use " + u64(s0.bytes_in_use) + " -> " + u64(s1.bytes_in_use) + " (expected +" + u64(n) + " or more)");
  if (s1.allocation_count < s0.allocation_count + 1)
    return fail(a + "allocation_count " + u64(s0.allocation_count) + " -> " + u64(s1.allocation_count) + " (expected +1 or more)");
  if (s1.peak_bytes_in_use < s1.bytes_in_use)
    return fail(a + "peak_bytes_in_use " + u64(s1.peak_bytes_in_use) + " < bytes_in_use " + u64(s1.bytes_in_use));
  if (s1.reserved_bytes == 0) return fail(a + "reserved_bytes is 0 while the session holds device memory");
  const std::string b = "after memory_free: ";
  if (s2.bytes_in_use + n > s1.bytes_in_use)
    return fail(b + "bytes_in_use " + u64(s1.bytes_in_use) + " -> " + u64(s2.bytes_in_use) + " (expected -" + u64(n) + " or more)");
  if (s2.allocation_count < s1.allocation_count)
    return fail(b + "allocation_count went back from " + u64(s1.allocation_count) + " to " + u64(s2.allocation_count) + " (it is cumulative)");
  if (s2.peak_bytes_in_use < s1.peak_bytes_in_use)
    return fail(b + "peak_bytes_in_use went back from " + u64(s1.peak_bytes_in_use) + " to " + u64(s2.peak_bytes_in_use));
  return pass("bytes_in_use " + u64(s0.bytes_in_use) + " -> " + u64(s1.bytes_in_use) + " -> " + u64(s2.bytes_in_use) +
              ", allocations " + u64(s0.allocation_count) + " -> " + u64(s1.allocation_count) + ", reserved " +
              u64(s1.reserved_bytes));
}

Record stats_copies(const Config& c) {
  Env env(c);
  if (auto r = session_21(env, NXRT_FEATURE_MEMORY_STATS)) return *r;
  const size_t n = 8192;
  void *a = nullptr, *b = nullptr;
  Result r = alloc_device(env, n, &a);
  if (r.ok) r = alloc_device(env, n, &b);
  if (!r.ok) {
    env.s->free(a);
    return fail(ok_or(r, "memory_alloc"));
  }
  auto host = pattern(n, 5);
  std::vector<uint8_t> back(n);
  struct Step {
    const char* what;
    int dir;  // 0 h2d, 1 d2h, 2 d2d
    uint64_t regions, bytes;
  };
  std::string e;
  nxrt_memory_stats prev{};
  e = get_stats(env, prev, "before the copies");
  auto counters = [](const nxrt_memory_stats& s, int dir) {
    switch (dir) {
      case 0: return std::make_pair(s.host_to_device_copies, s.host_to_device_bytes);
      case 1: return std::make_pair(s.device_to_host_copies, s.device_to_host_bytes);
      default: return std::make_pair(s.device_to_device_copies, s.device_to_device_bytes);
    }
  };
  const char* names[] = {"host_to_device", "device_to_host", "device_to_device"};
  auto expect = [&](const std::string& what, int dir, uint64_t regions, uint64_t bytes) {
    if (!e.empty()) return;
    nxrt_memory_stats now{};
    e = get_stats(env, now, "after " + what);
    if (!e.empty()) return;
    for (int d = 0; d < 3 && e.empty(); ++d) {
      auto [c0, b0] = counters(prev, d);
      auto [c1, b1] = counters(now, d);
      uint64_t wc = d == dir ? regions : 0, wb = d == dir ? bytes : 0;
      if (c1 - c0 != wc || b1 - b0 != wb)
        e = "after " + what + ": " + names[d] + "_copies " + u64(c0) + " -> " + u64(c1) + " and " + names[d] + "_bytes " +
            u64(b0) + " -> " + u64(b1) + " (expected +" + u64(wc) + " and +" + u64(wb) + ")";
    }
    prev = now;
  };
  auto run = [&](const std::string& what, Result cr) {
    if (e.empty() && !cr.ok) e = ok_or(cr, what);
  };
  const uint64_t k1 = 4099, k2 = 1000, k3 = 512;
  if (e.empty()) run("a host->device copy", copy1(env, NXRT_MEMORY_HOST, host.data(), 0, NXRT_MEMORY_DEVICE, a, 0, k1));
  expect("a host->device copy of " + u64(k1) + " bytes", 0, 1, k1);
  if (e.empty()) run("a device->host copy", copy1(env, NXRT_MEMORY_DEVICE, a, 8, NXRT_MEMORY_HOST, back.data(), 0, k2));
  expect("a device->host copy of " + u64(k2) + " bytes", 1, 1, k2);
  if (e.empty() && std::memcmp(back.data(), host.data() + 8, k2) != 0) e = "the device->host copy returned wrong bytes";
  if (e.empty()) run("a device->device copy", copy1(env, NXRT_MEMORY_DEVICE, a, 0, NXRT_MEMORY_DEVICE, b, 16, k3));
  expect("a device->device copy of " + u64(k3) + " bytes", 2, 1, k3);
  if (e.empty()) {
    nxrt_copy_region rs[2]{};
    for (int i = 0; i < 2; ++i) {
      rs[i].struct_size = sizeof rs[i];
      rs[i].src_memory = NXRT_MEMORY_HOST;
      rs[i].src = host.data();
      rs[i].dst_memory = NXRT_MEMORY_DEVICE;
      rs[i].dst = b;
      rs[i].dst_offset = uint64_t(i) * 4096;
      rs[i].bytes = i ? 200 : 100;
    }
    Phase ph("copy");
    run("a batch of 2 host->device regions", take(copy_n(env.p->api(), env.s->raw(), rs, 2, nullptr)));
  }
  expect("a batch of 2 host->device regions (100 + 200 bytes)", 0, 2, 300);
  env.s->free(a);
  env.s->free(b);
  if (!e.empty()) return fail(e);
  return pass("every copy region counted once, by direction, with its bytes");
}

// ------------------------------------------------------ external allocator

// Prepares the counting allocator for a session: the VkDevice a Vulkan session's
// requests must name, or a skip when its VULKAN_MEMORY requests cannot be served.
std::optional<Record> allocator_device(Env& env, CountingAllocator& A) {
  auto dev = native_device(env);
  if (dev && dev->type == NXRT_NATIVE_VULKAN_DEVICE) {
    if (!VkLib::get().ok()) return skip("a Vulkan session's allocations are VULKAN_MEMORY and " + VkLib::get().error);
    std::lock_guard lock(A.mu);
    A.expect_device = dev->handle;
  }
  return std::nullopt;
}

Result set_allocator(Env& env, CountingAllocator& A) {
  nxrt_device_allocator t = A.table();
  Phase ph("session_set_allocator");
  return take(env.p->api().session_set_allocator(env.s->raw(), &t));
}

Record allocator_lifecycle(const Config& c) {
  CountingAllocator A;  // outlives the session (declared before the Env that owns it)
  Env env(c);
  if (auto r = session_21(env, NXRT_FEATURE_EXTERNAL_ALLOCATOR)) return *r;
  // Right after session_create: nothing else may be called on the session before it.
  Result r = set_allocator(env, A);
  if (!r.ok) return fail(ok_or(r, "session_set_allocator right after session_create"));
  if (auto s = allocator_device(env, A)) return *s;
  const bool has_stats = (env.p->features() & NXRT_FEATURE_MEMORY_STATS) && env.p->api().session_stats;
  nxrt_memory_stats base{};
  std::string e;
  if (has_stats) e = get_stats(env, base, "after session_set_allocator");
  // reserved_bytes counts what the allocator returned, plus whatever the session held
  // from the driver before the allocator was set (base.reserved_bytes).
  auto reserved_matches = [&](const std::string& when) {
    if (!e.empty() || !has_stats) return;
    nxrt_memory_stats s{};
    e = get_stats(env, s, when);
    if (!e.empty()) return;
    uint64_t live = A.live_bytes();
    if (s.reserved_bytes != base.reserved_bytes + live)
      e = when + ": the external allocator holds " + u64(live) + " bytes but reserved_bytes is " + u64(s.reserved_bytes) +
          (base.reserved_bytes ? " (" + u64(base.reserved_bytes) + " of them reserved before the allocator was set)" : "") +
          "; reserved_bytes counts the backing memory held from the allocator";
  };
  const uint64_t n = (1u << 20) + 12;
  void* m = nullptr;
  if (e.empty()) {
    r = alloc_device(env, n, &m);
    if (!r.ok) e = ok_or(r, "memory_alloc(" + u64(n) + ") with the external allocator");
  }
  if (e.empty() && A.alloc_count() == 0 && A.unserved_reason().empty())
    e = "memory_alloc(" + u64(n) + ") succeeded without asking the external allocator: every backing allocation must go through it";
  if (e.empty() && A.live_bytes() == 0 && A.unserved_reason().empty())
    e = "the external allocator holds 0 bytes while the session holds a " + u64(n) + "-byte allocation";
  if (e.empty()) {
    auto data = pattern(size_t(n), 21);
    std::vector<uint8_t> back(data.size());
    Result cr = copy1(env, NXRT_MEMORY_HOST, data.data(), 0, NXRT_MEMORY_DEVICE, m, 0, n);
    if (cr.ok) cr = copy1(env, NXRT_MEMORY_DEVICE, m, 0, NXRT_MEMORY_HOST, back.data(), 0, n);
    if (!cr.ok) e = ok_or(cr, "a round trip through memory from the external allocator");
    else if (back != data) e = "memory from the external allocator did not round-trip";
  }
  reserved_matches("while holding " + u64(n) + " bytes");
  if (m) env.s->free(m);
  void* pin = nullptr;
  if (e.empty()) {
    Result pr = alloc_device(env, 4096, &pin, NXRT_MEMORY_HOST_PINNED);
    if (!pr.ok && !(pr.code == NXRT_UNSUPPORTED && pr.problem.empty())) e = ok_or(pr, "HOST_PINNED memory_alloc with the external allocator");
  }
  if (e.empty()) {
    AddRelu g({64, 33});
    size_t claimed = 0;
    std::string k = run_add_relu_once(*env.s, g, &claimed);
    if (!k.empty()) e = "Add/Relu with the external allocator: " + k;
  }
  reserved_matches("after an Add/Relu run");
  if (pin) env.s->free(pin, NXRT_MEMORY_HOST_PINNED);
  if (auto u = A.unserved_reason(); !u.empty()) return skip(u);
  uint64_t peak;
  size_t allocs;
  {
    std::lock_guard lock(A.mu);
    peak = A.peak;
    allocs = A.allocs;
  }
  env.s.reset();  // session_release: everything goes back to the allocator
  {
    std::lock_guard lock(A.mu);
    A.closed = true;
    if (e.empty() && !A.held.empty())
      e = "after session_release " + u64(A.live) + " bytes in " + std::to_string(A.held.size()) +
          " allocations of the external allocator were never freed";
    if (e.empty() && !A.violations.empty()) e = A.violations.front();
  }
  env.p->shutdown();
  {
    std::lock_guard lock(A.mu);
    if (e.empty() && !A.violations.empty()) e = A.violations.front();
  }
  if (!e.empty()) return fail(e);
  return pass(std::to_string(allocs) + " allocations (" + A.type_list() + "), peak " + u64(peak) + " bytes, all returned at session_release" +
              (has_stats ? "; reserved_bytes matched the allocator" : ""));
}

Record allocator_refusal(const Config& c) {
  CountingAllocator A;
  Env env(c);
  if (auto r = session_21(env, NXRT_FEATURE_EXTERNAL_ALLOCATOR)) return *r;
  A.refuse = true;
  Result r = set_allocator(env, A);
  if (!r.ok) {
    // A plugin may take a first block at set_allocator: a refusal is then an OUT_OF_MEMORY there.
    if (auto e = expect_error(r, "session_set_allocator with a refusing allocator", {NXRT_OUT_OF_MEMORY}); !e.empty())
      return fail(e);
    return pass("session_set_allocator failed with NXRT_OUT_OF_MEMORY when the allocator refused");
  }
  if (auto s = allocator_device(env, A)) return *s;
  const uint64_t n = (1u << 20) + 12;
  void* m = nullptr;
  r = alloc_device(env, n, &m);
  if (auto u = A.unserved_reason(); !u.empty()) {
    if (r.ok) env.s->free(m);
    return skip(u);
  }
  if (r.ok) {
    env.s->free(m);
    return fail("memory_alloc(" + u64(n) + ") succeeded though the external allocator refused every request (" +
                std::to_string(A.refusal_count()) + " refused): the memory did not come from it");
  }
  if (auto e = expect_error(r, "memory_alloc with a refusing external allocator", {NXRT_OUT_OF_MEMORY}); !e.empty()) return fail(e);
  if (A.refusal_count() == 0) return fail("memory_alloc failed with NXRT_OUT_OF_MEMORY without asking the external allocator");
  const std::string msg = r.message;
  // The session recovers once the allocator serves again.
  {
    std::lock_guard lock(A.mu);
    A.refuse = false;
  }
  r = alloc_device(env, n, &m);
  if (!r.ok) return fail(ok_or(r, "memory_alloc after the allocator serves again"));
  env.s->free(m);
  env.s.reset();
  std::string e;
  {
    std::lock_guard lock(A.mu);
    A.closed = true;
    if (!A.held.empty())
      e = "after session_release " + u64(A.live) + " bytes in " + std::to_string(A.held.size()) +
          " allocations of the external allocator were never freed";
    else if (!A.violations.empty()) e = A.violations.front();
  }
  if (!e.empty()) return fail(e);
  return pass("NXRT_OUT_OF_MEMORY: '" + msg + "'; memory_alloc works again once the allocator serves");
}

// An allocator may return more than it was asked (size >= bytes). bytes_in_use
// counts what memory_alloc handed out, reserved_bytes what the allocator returned;
// the two must not be mixed up when memory is freed.
Record stats_external_sizes(const Config& c) {
  CountingAllocator A;
  A.granule = 64 << 10;  // a 64 KiB-granular allocator
  Env env(c);
  if (auto r = session_21(env, NXRT_FEATURE_EXTERNAL_ALLOCATOR | NXRT_FEATURE_MEMORY_STATS)) return *r;
  Result r = set_allocator(env, A);
  if (!r.ok) return fail(ok_or(r, "session_set_allocator right after session_create"));
  if (auto s = allocator_device(env, A)) return *s;
  nxrt_memory_stats base{}, both{}, one{}, none{};
  if (auto e = get_stats(env, base, "after session_set_allocator"); !e.empty()) return fail(e);
  const uint64_t n1 = 100000, n2 = 300000;
  void *a = nullptr, *b = nullptr;
  r = alloc_device(env, n1, &a);
  if (r.ok) r = alloc_device(env, n2, &b);
  if (auto u = A.unserved_reason(); !u.empty()) {
    env.s->free(a);
    env.s->free(b);
    return skip(u);
  }
  if (!r.ok) {
    env.s->free(a);
    return fail(ok_or(r, "memory_alloc with a 64 KiB-granular external allocator"));
  }
  std::string e = get_stats(env, both, "holding two allocations");
  const uint64_t live = A.live_bytes();
  env.s->free(b);
  if (e.empty()) e = get_stats(env, one, "after freeing the second");
  env.s->free(a);
  if (e.empty()) e = get_stats(env, none, "after freeing both");
  if (!e.empty()) return fail(e);
  const std::string sizes = " (the allocator returns sizes rounded up to 64 KiB, which it may: size >= bytes)";
  if (both.bytes_in_use < base.bytes_in_use + n1 + n2)
    return fail("holding " + u64(n1) + " + " + u64(n2) + " bytes: bytes_in_use " + u64(base.bytes_in_use) + " -> " +
                u64(both.bytes_in_use) + sizes);
  if (both.reserved_bytes != base.reserved_bytes + live)
    return fail("holding two allocations: reserved_bytes is " + u64(both.reserved_bytes) + " but the external allocator holds " +
                u64(live) + " bytes" + (base.reserved_bytes ? " (+" + u64(base.reserved_bytes) + " reserved before)" : "") + sizes);
  if (one.bytes_in_use < base.bytes_in_use + n1)
    return fail("after freeing the " + u64(n2) + "-byte allocation, bytes_in_use fell from " + u64(both.bytes_in_use) + " to " +
                u64(one.bytes_in_use) + " while the " + u64(n1) + "-byte one is still held: memory_free subtracted more than "
                "memory_alloc added (the allocator's size instead of the allocation's?)" + sizes);
  if (none.bytes_in_use != base.bytes_in_use)
    return fail("after freeing both allocations bytes_in_use is " + u64(none.bytes_in_use) + ", was " + u64(base.bytes_in_use) +
                " before them" + sizes);
  return pass("bytes_in_use " + u64(base.bytes_in_use) + " -> " + u64(both.bytes_in_use) + " -> " + u64(one.bytes_in_use) + " -> " +
              u64(none.bytes_in_use) + ", reserved " + u64(both.reserved_bytes) + " = the allocator's " + u64(live));
}

// ------------------------------------------------------------ stream import

Record import_foreign(const Config& c) {
  Env env(c);
  if (auto r = session_21(env, NXRT_FEATURE_STREAM_IMPORT | NXRT_FEATURE_STREAMS | NXRT_FEATURE_NATIVE_HANDLES)) return *r;
  auto dev = native_device(env);
  const uint32_t dev_type = dev ? dev->type : uint32_t(NXRT_NATIVE_NONE);
  struct Case {
    const char* what;
    nxrt_native_handle h;
  };
  std::vector<Case> cases;
  auto mk = [](uint32_t type, uint64_t handle, uint64_t value) {
    nxrt_native_handle h{};
    h.struct_size = sizeof h;
    h.type = type;
    h.handle = handle;
    h.value = value;
    return h;
  };
  // A type of another API (never touched: the plugin must refuse it by its type).
  if (dev_type == NXRT_NATIVE_CUDA_DEVICE)
    cases.push_back({"a VULKAN_TIMELINE handle on a CUDA session", mk(NXRT_NATIVE_VULKAN_TIMELINE, 0x1000, 5)});
  else
    cases.push_back({"a CUDA_STREAM handle", mk(NXRT_NATIVE_CUDA_STREAM, 0x1000, 0)});
  cases.push_back({"type NXRT_NATIVE_NONE", mk(NXRT_NATIVE_NONE, 0, 0)});
  cases.push_back({"a HOST_POINTER handle", mk(NXRT_NATIVE_HOST_POINTER, 0x1000, 0)});
  if (dev_type != NXRT_NATIVE_CUDA_DEVICE)  // CUDA stream 0 is the legacy default stream, a valid one
    cases.push_back({"a VULKAN_TIMELINE with handle 0", mk(NXRT_NATIVE_VULKAN_TIMELINE, 0, 5)});
  std::string notes;
  for (auto& k : cases) {
    nxrt_stream* st = nullptr;
    Result r;
    {
      Phase ph("stream_import");
      r = take(env.p->api().stream_import(env.s->raw(), &k.h, &st));
    }
    if (r.ok) {
      if (st) env.p->api().stream_release(st);
      return fail(std::string("stream_import of ") + k.what + " succeeded; it must fail with a status");
    }
    if (auto e = expect_error(r, std::string("stream_import of ") + k.what, {NXRT_INVALID_ARGUMENT, NXRT_UNSUPPORTED}); !e.empty())
      return fail(e);
    notes += std::string(notes.empty() ? "" : "; ") + k.what + ": " + status_code_name(r.code);
  }
  return pass(notes);
}

Record import_vulkan_timeline(const Config& c) {
  Env env(c);
  if (auto r = session_21(env, NXRT_FEATURE_STREAM_IMPORT | NXRT_FEATURE_STREAMS | NXRT_FEATURE_NATIVE_HANDLES)) return *r;
  auto dev = native_device(env);
  if (!dev || dev->type != NXRT_NATIVE_VULKAN_DEVICE)
    return skip("not a Vulkan session (native_handle(DEVICE) is " + std::string(dev ? type_str(dev->type) : "not answered") + ")");
  VkLib& vk = VkLib::get();
  if (!vk.ok()) return skip(vk.error);
  VkDevice vd = reinterpret_cast<VkDevice>(uintptr_t(dev->handle));
  auto create = vk.fn<PFN_vkCreateSemaphore>(vd, "vkCreateSemaphore");
  auto destroy = vk.fn<PFN_vkDestroySemaphore>(vd, "vkDestroySemaphore");
  auto signal = vk.fn<PFN_vkSignalSemaphore>(vd, "vkSignalSemaphore");
  auto counter = vk.fn<PFN_vkGetSemaphoreCounterValue>(vd, "vkGetSemaphoreCounterValue");
  if (!create || !destroy || !signal || !counter)
    return fail("the session's VkDevice has no timeline semaphore entry points (vkSignalSemaphore, vkGetSemaphoreCounterValue): "
                "a plugin that imports VULKAN_TIMELINE must enable timeline semaphores");
  VkSemaphoreTypeCreateInfo tci{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO, nullptr, VK_SEMAPHORE_TYPE_TIMELINE, 0};
  VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, &tci, 0};
  VkSemaphore sem = 0;
  VkResult vr = create(vd, &sci, nullptr, &sem);
  if (vr != 0 || !sem)
    return fail("vkCreateSemaphore (timeline) on the session's VkDevice failed with VkResult " + std::to_string(vr) +
                ": a plugin that imports VULKAN_TIMELINE must enable timelineSemaphore");
  constexpr uint64_t kWait = 5;
  auto& api = env.p->api();
  nxrt_native_handle h{};
  h.struct_size = sizeof h;
  h.type = NXRT_NATIVE_VULKAN_TIMELINE;
  h.handle = sem;
  h.value = kWait;
  nxrt_stream* st = nullptr;
  Result r;
  {
    Phase ph("stream_import");
    r = take(api.stream_import(env.s->raw(), &h, &st));
  }
  if (!r.ok || !st) {
    destroy(vd, sem, nullptr);
    return fail(r.ok ? "stream_import returned success and a NULL stream" : ok_or(r, "stream_import of a timeline semaphore at 5"));
  }
  std::string e;
  auto f = native(env, NXRT_NATIVE_OBJECT_STREAM, st);
  if (!f.r.ok) e = ok_or(f.r, "native_handle(STREAM) of the imported stream");
  else if (auto p = f.problem("native_handle(STREAM)"); !p.empty()) e = p;
  else if (f.v.type != NXRT_NATIVE_VULKAN_TIMELINE || f.v.handle != sem)
    e = "native_handle(STREAM) of the imported stream is " + type_str(f.v.type) + " " + hex(f.v.handle) +
        ", not the imported timeline semaphore " + hex(sem);
  else if (f.v.value < kWait)
    e = "native_handle(STREAM) of the imported stream reports point " + u64(f.v.value) + ", before the imported value " + u64(kWait);
  // A copy on the stream: it may run only once the caller signals 5. The signal comes
  // from another thread, so a plugin that waits on the host inside copy does not deadlock.
  void* m = nullptr;
  auto data = pattern(65536, 17);
  std::vector<uint8_t> back(data.size());
  uint64_t before_signal = 0, end_point = 0, final_value = 0;
  VkResult signal_rc = 0;
  if (e.empty()) {
    Result ar = alloc_device(env, data.size(), &m);
    if (!ar.ok) e = ok_or(ar, "memory_alloc");
  }
  if (e.empty()) {
    std::thread signaller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      counter(vd, sem, &before_signal);
      VkSemaphoreSignalInfo si{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO, nullptr, sem, kWait};
      signal_rc = signal(vd, &si);
    });
    Result cr = copy1(env, NXRT_MEMORY_HOST, data.data(), 0, NXRT_MEMORY_DEVICE, m, 0, data.size(), st);
    auto after = native(env, NXRT_NATIVE_OBJECT_STREAM, st);
    Result sr;
    if (cr.ok) {
      Phase ph("stream_synchronize");
      sr = take(api.stream_synchronize(st));
    }
    signaller.join();
    if (!cr.ok) e = ok_or(cr, "a copy on the imported stream");
    else if (signal_rc != 0) e = "vkSignalSemaphore(5) failed with VkResult " + std::to_string(signal_rc) + " (did the plugin signal past it?)";
    else if (!sr.ok) e = ok_or(sr, "stream_synchronize on the imported stream");
    else if (before_signal >= kWait)
      e = "the semaphore was at " + u64(before_signal) + " before the caller signaled " + u64(kWait) +
          ": the imported stream's work did not wait for the imported value";
    else if (!after.r.ok) e = ok_or(after.r, "native_handle(STREAM) after a copy");
    else if (after.v.handle != sem || after.v.value < kWait)
      e = "native_handle(STREAM) after a copy: " + hex(after.v.handle) + " at " + u64(after.v.value) +
          " (expected the imported semaphore at a point >= " + u64(kWait) + ")";
    if (e.empty()) {
      end_point = after.v.value;
      VkResult gr = counter(vd, sem, &final_value);
      if (gr != 0) e = "vkGetSemaphoreCounterValue failed with VkResult " + std::to_string(gr);
      else if (final_value < end_point)
        e = "after stream_synchronize the semaphore is at " + u64(final_value) + ", before the stream's completion point " + u64(end_point);
    }
    if (e.empty()) {
      Result dr = copy1(env, NXRT_MEMORY_DEVICE, m, 0, NXRT_MEMORY_HOST, back.data(), 0, back.size());
      if (!dr.ok) e = ok_or(dr, "downloading what the imported stream copied");
      else if (back != data) e = "the copy on the imported stream did not land";
    }
  }
  {
    Phase ph("stream_release");
    api.stream_release(st);
  }
  if (m) env.s->free(m);
  // The semaphore is the caller's: still alive after stream_release.
  uint64_t after_release = 0;
  VkResult gr = counter(vd, sem, &after_release);
  if (e.empty() && gr != 0)
    e = "vkGetSemaphoreCounterValue after stream_release failed with VkResult " + std::to_string(gr) +
        ": the plugin must not destroy the caller's semaphore";
  destroy(vd, sem, nullptr);
  if (!e.empty()) return fail(e);
  return pass("imported at " + u64(kWait) + ", the copy waited for it; completion point " + u64(end_point) + ", semaphore at " +
              u64(final_value) + "; the semaphore outlived stream_release");
}

}  // namespace

// ------------------------------------------------------------ peer copy

// Two sessions of one instance: bytes uploaded to the first arrive in the second through
// copy_peer alone (or it says UNSUPPORTED for the pair); a region that is not device to
// device is refused with a status.
Record peer_copy(const Config& c) {
  Env env(c);
  if (auto r = session_21(env, NXRT_FEATURE_PEER_COPY)) return *r;
  Session second(*env.p, c.device);
  second.set_host_addressable(env.info.host_addressable != 0);
  if (Result st = second.create(); !st.ok) return fail(ok_or(st, "a second session_create"));
  const size_t n = 65536 + 12;
  auto data = pattern(n, 31);
  void *a = nullptr, *b = nullptr;
  Result r = env.s->upload(data.data(), n, &a);
  if (!r.ok) return fail(ok_or(r, "uploading to the first session"));
  std::vector<uint8_t> zeros(n, 0);
  r = second.upload(zeros.data(), n, &b);
  if (!r.ok) {
    env.s->free(a);
    return fail(ok_or(r, "uploading to the second session"));
  }
  auto region = [&](nxrt_memory_kind sk, nxrt_memory_kind dk, uint64_t so, uint64_t doff, uint64_t bytes) {
    nxrt_copy_region x{};
    x.struct_size = sizeof x;
    x.src_memory = sk;
    x.src = a;
    x.src_offset = so;
    x.dst_memory = dk;
    x.dst = b;
    x.dst_offset = doff;
    x.bytes = bytes;
    return x;
  };
  std::string e;
  const nxrt_copy_region whole = region(NXRT_MEMORY_DEVICE, NXRT_MEMORY_DEVICE, 0, 0, n);
  const nxrt_copy_region* wp = &whole;
  Result cr;
  {
    Phase ph("copy_peer");
    cr = take(env.p->api().copy_peer(second.raw(), env.s->raw(), &wp, 1, nullptr));
  }
  bool unsupported = !cr.ok && cr.code == NXRT_UNSUPPORTED;
  if (!cr.ok && !unsupported) e = ok_or(cr, "copy_peer of " + u64(n) + " bytes");
  std::vector<uint8_t> back(n);
  if (e.empty() && !unsupported) {
    Result dr = second.download(b, 0, back.data(), n);
    if (!dr.ok) e = ok_or(dr, "downloading from the second session");
    else if (back != data) e = "copy_peer: the second session's buffer does not hold the first one's bytes";
  }
  if (e.empty()) {  // a host region is not a peer copy: a status, never a crash
    const nxrt_copy_region bad = region(NXRT_MEMORY_HOST, NXRT_MEMORY_DEVICE, 0, 0, 16);
    const nxrt_copy_region* bp = &bad;
    Phase ph("copy_peer");
    Result br = take(env.p->api().copy_peer(second.raw(), env.s->raw(), &bp, 1, nullptr));
    if (br.ok) e = "copy_peer accepted a region whose source is HOST memory (it copies DEVICE to DEVICE only)";
  }
  env.s->free(a);
  second.free(b);
  if (!e.empty()) return fail(e);
  return pass(unsupported ? "UNSUPPORTED for two sessions on one device (the host stages)"
                          : u64(n) + " bytes between two sessions, bytes equal; a HOST region refused");
}

// ------------------------------------------------------------ memory import (2.2)

// Page-aligned host memory imported as DEVICE memory aliases it both ways (no copy), is
// usable by the plugin's copy, and outlives memory_free of the import; types a plugin
// cannot take are refused with a status, never a crash.
Record import_host_memory(const Config& c) {
  Env env(c);
  if (auto r = session_21(env, NXRT_FEATURE_MEMORY_IMPORT)) return *r;
  const auto& api = env.p->api();
  auto import = [&](const nxrt_native_handle* n, void** h) {
    Phase ph("memory_import");
    return take(api.memory_import(env.s->raw(), n, h));
  };
  // Refusals first: nothing valid to import.
  std::string e;
  void* h = nullptr;
  if (import(nullptr, &h).ok) e = "memory_import accepted a NULL native handle";
  nxrt_native_handle none{};
  none.struct_size = sizeof none;
  none.type = NXRT_NATIVE_NONE;
  none.size = 4096;
  if (e.empty() && import(&none, &h).ok) e = "memory_import accepted type NXRT_NATIVE_NONE";
  if (!e.empty()) return fail(e);

  constexpr size_t kBytes = 65536;
  std::unique_ptr<uint8_t, decltype(&std::free)> mem(static_cast<uint8_t*>(std::aligned_alloc(kBytes, kBytes)), &std::free);
  const auto first = pattern(kBytes, 41), second = pattern(kBytes, 42);
  std::memcpy(mem.get(), first.data(), kBytes);
  nxrt_native_handle n{};
  n.struct_size = sizeof n;
  n.type = NXRT_NATIVE_HOST_POINTER;
  n.handle = uint64_t(uintptr_t(mem.get()));
  n.size = kBytes;
  nxrt_memory_stats before{};
  const bool stats = env.p->features() & NXRT_FEATURE_MEMORY_STATS;
  if (stats) {
    before.struct_size = sizeof before;
    if (Result r = take(api.session_stats(env.s->raw(), &before)); !r.ok) return fail(ok_or(r, "session_stats"));
  }
  Result r = import(&n, &h);
  if (!r.ok) {
    if (r.code == NXRT_UNSUPPORTED) return pass("UNSUPPORTED for 64 KiB of page-aligned host memory: " + r.message);
    return fail(ok_or(r, "memory_import of 64 KiB of page-aligned host memory") + " (want OK or NXRT_UNSUPPORTED)");
  }
  if (!h) return fail("memory_import succeeded with a NULL handle");
  std::vector<uint8_t> back(kBytes);
  // The import reads the caller's bytes...
  if (Result d = env.s->download(h, 0, back.data(), kBytes); !d.ok) e = ok_or(d, "copying from the imported memory");
  else if (back != first) e = "the imported memory does not hold the caller's bytes";
  // ...without a copy: what the caller writes now is what the plugin sees next.
  if (e.empty()) {
    std::memcpy(mem.get(), second.data(), kBytes);
    if (Result d = env.s->download(h, 0, back.data(), kBytes); !d.ok) e = ok_or(d, "copying from the imported memory");
    else if (back != second) e = "the import is a copy: the caller's later writes are not seen through it";
  }
  if (e.empty() && stats) {
    nxrt_memory_stats after{};
    after.struct_size = sizeof after;
    if (Result sr = take(api.session_stats(env.s->raw(), &after)); !sr.ok) e = ok_or(sr, "session_stats");
    else if (after.bytes_in_use != before.bytes_in_use)
      e = "session_stats counts the import as allocated: bytes_in_use " + u64(before.bytes_in_use) + " -> " + u64(after.bytes_in_use);
  }
  env.s->free(h);
  // The memory is still the caller's: writable and intact after the import is gone.
  if (e.empty() && std::memcmp(mem.get(), second.data(), kBytes) != 0) e = "memory_free of the import changed the caller's memory";
  mem.get()[0] ^= 0xff;
  if (!e.empty()) return fail(e);
  return pass("64 KiB of host memory imported, read in place both before and after the caller rewrote it"
              + std::string(stats ? ", not counted as allocated" : ""));
}

std::vector<Item> interop_items(const Config& cfg) {
  std::vector<Item> items;
  auto add = [&](std::string name, std::function<Record(const Config&)> f) {
    items.push_back(Item{std::move(name), [f, cfg] { return std::vector<Record>{f(cfg)}; }, "", ""});
  };
  add("negotiate.as_2_1_host", negotiate_21);
  add("native_handle.device_queue", native_device_queue);
  add("native_handle.memory", native_memory);
  add("native_handle.bad_object", native_bad_object);
  add("native_handle.struct_size", native_struct_size);
  add("native_handle.stream", native_stream);
  add("memory_stats.struct_size", stats_struct_size);
  add("memory_stats.alloc_free", stats_alloc_free);
  add("memory_stats.copies", stats_copies);
  add("external_allocator.lifecycle", allocator_lifecycle);
  add("external_allocator.refusal", allocator_refusal);
  add("external_allocator.rounded_sizes", stats_external_sizes);
  add("stream_import.foreign_handle", import_foreign);
  add("stream_import.vulkan_timeline", import_vulkan_timeline);
  add("peer_copy.two_sessions", peer_copy);
  add("memory_import.host_memory", import_host_memory);
  return items;
}

}  // namespace conf
