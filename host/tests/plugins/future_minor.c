/* Test plugin from another minor of the same major, plain C. Built twice:
 *
 * future_minor: against the current header, written as a 2.9 plugin would
 * be. On a 2.5 host it must load and run with everything newer than 2.3 off:
 *   - it answers abi_minor = min(host's minor, 3);
 *   - it declares a feature bit 2.3 does not define (FUTURE_FEATURE_BIT), which
 *     the host must mask off;
 *   - its function table is larger than nxrt_plugin_api (2.3's table first, with
 *     none of 2.1's or 2.2's optional entries, then two entries "added in 2.9"),
 *     struct_size = the larger size;
 *   - it fills the negotiation reply and device_info by the callee-filled rule
 *     from its own, larger definitions (extra trailing fields), writing only
 *     what fits in the caller's struct;
 *   - float32 Relu on host memory, with one CPU-like device.
 *
 * v2_0 (NXRT_AS_2_0): the same source against the verbatim 2.0 header
 * (abi2_0/nxrt_ep_v2_0.h): a plugin built before 2.1 existed. It answers minor 0,
 * its table and reply are 2.0's sizes; a 2.3 host must run it with no 2.1/2.2 feature
 * and never read past its table.
 * Only nxrt_ep_negotiate is exported. */
#ifdef NXRT_AS_2_0
#include "abi2_0/nxrt_ep_v2_0.h"
#else
#include <nxrt_ep.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef NXRT_AS_2_0
#define FUTURE_MINOR 0u
#define FUTURE_FEATURE_BIT 0ull
#define FUTURE_NAME "v2_0"
#define TABLE_SIZE sizeof(nxrt_plugin_api)
#define REPLY_SIZE sizeof(nxrt_negotiate_reply)
#define INFO_SIZE sizeof(nxrt_device_info)
#else
#define TABLE_SIZE sizeof(future_plugin_api)
#define REPLY_SIZE sizeof(future_negotiate_reply)
#define INFO_SIZE sizeof(future_device_info)
#define FUTURE_MINOR 9u
#define FUTURE_FEATURE_BIT (1ull << 40) /* "defined by 2.9": unknown to a 2.3 host */
#define FUTURE_NAME "future_minor"
#endif

/* The 2.9 reply: 2.0's, then fields 2.9 appended. */
typedef struct future_negotiate_reply {
  nxrt_negotiate_reply v2_0;
  uint64_t features2; /* 2.9: a second feature word */
  const char* build_id;
} future_negotiate_reply;

/* The 2.9 device description: 2.0's, then appended fields. */
typedef struct future_device_info {
  nxrt_device_info v2_0;
  uint32_t compute_units; /* 2.1 */
  uint32_t reserved;
  uint64_t l2_cache_bytes; /* 2.9 */
  const char* driver;      /* 2.9 */
} future_device_info;

struct nxrt_plugin {
  const nxrt_host_services* host;
  char extension_log[64]; /* used by the 2.9-only entries, never by a 2.0 host */
};
struct nxrt_ep_session {
  struct nxrt_plugin* plugin;
};
struct nxrt_kernel {
  const nxrt_host_services* host;
};

static nxrt_status* err(const nxrt_host_services* h, nxrt_status_code c, const char* m) { return h->status_create(c, 0, m); }

static void shutdown_instance(nxrt_plugin* p) { free(p); }

static nxrt_status* device_count(nxrt_plugin* p, uint32_t* count) {
  if (!count) return err(p->host, NXRT_INVALID_ARGUMENT, "device_count: count is NULL");
  *count = 1;
  return NULL;
}
static const char* no_device_reason(nxrt_plugin* p) {
  (void)p;
  return "";
}

static nxrt_status* device_info(nxrt_plugin* p, uint32_t index, nxrt_device_info* info) {
  future_device_info full;
  size_t size;
  if (!info) return err(p->host, NXRT_INVALID_ARGUMENT, "device_info: info is NULL");
  if (index != 0) return err(p->host, NXRT_NOT_FOUND, "future_minor has one device");
  memset(&full, 0, sizeof full);
  full.v2_0.struct_size = INFO_SIZE;
  full.v2_0.kind = NXRT_DEVICE_CPU;
  full.v2_0.name = "future minor test CPU";
  full.v2_0.vendor = "nxrt tests";
  full.v2_0.memory_bytes = 1ull << 30;
  full.v2_0.dtypes = 1ull << NXRT_DTYPE_FLOAT32;
  full.v2_0.host_addressable = 1;
  full.v2_0.pci_bus_id = "";
  full.compute_units = 4;
  full.l2_cache_bytes = 1u << 20;
  full.driver = "future 2.9";
  /* Callee-filled rule: only what fits in the caller's struct, and say how much. */
  size = NXRT_FILLED_SIZE((size_t)info->struct_size, INFO_SIZE);
  memcpy(info, &full, size);
  info->struct_size = (uint32_t)size;
  return NULL;
}

static uint32_t option_count(nxrt_plugin* p) {
  (void)p;
  return 0;
}
static nxrt_status* option_info(nxrt_plugin* p, uint32_t index, nxrt_option_info* info) {
  (void)index;
  (void)info;
  return err(p->host, NXRT_NOT_FOUND, "future_minor has no options");
}

static nxrt_status* session_create(nxrt_plugin* p, uint32_t device, const nxrt_option* const* options, size_t count,
                                   nxrt_ep_session** out) {
  (void)options;
  (void)count;
  if (!out) return err(p->host, NXRT_INVALID_ARGUMENT, "session_create: out is NULL");
  *out = NULL;
  if (device != 0) return err(p->host, NXRT_NOT_FOUND, "future_minor has one device");
  *out = (nxrt_ep_session*)calloc(1, sizeof(nxrt_ep_session));
  if (!*out) return err(p->host, NXRT_OUT_OF_MEMORY, "session_create");
  (*out)->plugin = p;
  return NULL;
}
static void session_release(nxrt_ep_session* s) { free(s); }

static nxrt_status* get_capability(nxrt_ep_session* s, const nxrt_graph* g, nxrt_claim_sink* sink) {
  const nxrt_host_services* h = s->plugin->host;
  size_t i, n = h->graph_node_count(g);
  for (i = 0; i < n; ++i) {
    const nxrt_node* node = h->graph_node(g, i);
    size_t index = h->node_index(node);
    nxrt_status* st;
    if (strcmp(h->node_op_type(node), "Relu") == 0 && h->node_domain(node)[0] == '\0' &&
        h->value_dtype(h->node_input(node, 0)) == NXRT_DTYPE_FLOAT32)
      st = h->claim_nodes(sink, &index, 1, 0.0);
    else
      st = h->refuse_node(sink, index, NXRT_REFUSE_OP, "future_minor runs float32 Relu only");
    if (st) return st;
  }
  return NULL;
}

static nxrt_status* kernel_create(nxrt_ep_session* s, const nxrt_graph* g, nxrt_kernel** out) {
  (void)g;
  *out = (nxrt_kernel*)calloc(1, sizeof(nxrt_kernel));
  if (!*out) return err(s->plugin->host, NXRT_OUT_OF_MEMORY, "kernel_create");
  (*out)->host = s->plugin->host;
  return NULL;
}
static nxrt_status* kernel_compute(nxrt_kernel* k, nxrt_kernel_context* ctx) {
  const nxrt_host_services* h = k->host;
  nxrt_const_tensor x;
  nxrt_tensor y;
  nxrt_status* st;
  int64_t i, n = 1;
  uint32_t d;
  memset(&x, 0, sizeof x);
  memset(&y, 0, sizeof y);
  x.struct_size = sizeof x;
  y.struct_size = sizeof y;
  if ((st = h->ctx_input(ctx, 0, &x))) return st;
  if (x.dtype != NXRT_DTYPE_FLOAT32 || x.memory != NXRT_MEMORY_HOST)
    return err(h, NXRT_INVALID_ARGUMENT, "future_minor Relu needs a float32 host tensor");
  if ((st = h->ctx_output(ctx, 0, NXRT_DTYPE_FLOAT32, x.rank, x.dims, &y))) return st;
  for (d = 0; d < x.rank; ++d) n *= x.dims[d];
  {
    const float* in = (const float*)((const char*)x.data + x.byte_offset);
    float* o = (float*)((char*)y.data + y.byte_offset);
    for (i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
  }
  return NULL;
}
static void kernel_release(nxrt_kernel* k) { free(k); }

static nxrt_status* memory_alloc(nxrt_ep_session* s, nxrt_memory_kind kind, uint64_t bytes, uint64_t alignment,
                                 void** handle) {
  (void)kind;
  if (alignment < 64) alignment = 64;
  bytes = (bytes + alignment - 1) / alignment * alignment;
  *handle = aligned_alloc((size_t)alignment, (size_t)(bytes ? bytes : alignment));
  return *handle ? NULL : err(s->plugin->host, NXRT_OUT_OF_MEMORY, "memory_alloc");
}
static void memory_free(nxrt_ep_session* s, nxrt_memory_kind kind, void* handle) {
  (void)s;
  (void)kind;
  free(handle);
}
static nxrt_status* copy(nxrt_ep_session* s, const nxrt_copy_region* const* r, size_t count, nxrt_stream* stream) {
  size_t i;
  (void)stream;
  for (i = 0; i < count; ++i) {
    if (!NXRT_HAS_FIELD(r[i], nxrt_copy_region, bytes)) return err(s->plugin->host, NXRT_INVALID_ARGUMENT, "copy region too small");
    memmove((char*)r[i]->dst + r[i]->dst_offset, (const char*)r[i]->src + r[i]->src_offset, (size_t)r[i]->bytes);
  }
  return NULL;
}

/* "2.9" entries: only a host that agreed on those minors may call them. */
static nxrt_status* session_trim_2_2(nxrt_ep_session* s) {
  snprintf(s->plugin->extension_log, sizeof s->plugin->extension_log, "trim");
  return NULL;
}
static uint64_t plugin_build_number_2_3(nxrt_plugin* p) {
  (void)p;
  return 23;
}

#ifndef NXRT_AS_2_0
/* 2.5 kernel_describe, written carelessly: a tab, a newline, bytes that are not UTF-8 and far
 * more than NXRT_KERNEL_DESCRIPTION_MAX. The host must store it printable and cut. */
#define AZ "abcdefghijklmnopqrstuvwxyz"
static const char* kernel_describe(nxrt_kernel* k) {
  (void)k;
  return "relu\tv2.9\n\xff\xfe" AZ AZ AZ AZ AZ AZ AZ AZ AZ AZ AZ AZ; /* 12 + 312 bytes */
}
#undef AZ
#endif

/* The 2.9 table: the current one first, then the appended entries. */
typedef struct future_plugin_api {
  nxrt_plugin_api v2_0;
  nxrt_status* (*session_trim)(nxrt_ep_session* s);  /* 2.9 */
  uint64_t (*plugin_build_number)(nxrt_plugin* p);   /* 2.9 */
} future_plugin_api;

static const future_plugin_api kApi = {
    {
        TABLE_SIZE, /* struct_size: the whole, larger table (2.0's alone for v2_0) */
        FUTURE_NAME, "2.9.0", shutdown_instance, device_count, no_device_reason, device_info, option_count,
        option_info, session_create, session_release, get_capability, kernel_create, kernel_compute, kernel_release,
        memory_alloc, memory_free, copy,
        NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, /* no streams */
        NULL, NULL,                                     /* no run hooks */
#ifndef NXRT_AS_2_0
        .kernel_describe = kernel_describe,
#endif
    },
    session_trim_2_2,
    plugin_build_number_2_3,
};


NXRT_EP_EXPORT int32_t nxrt_ep_negotiate(const nxrt_negotiate_request* rq, nxrt_negotiate_reply* rp) {
  future_negotiate_reply full;
  struct nxrt_plugin* inst;
  size_t size;
  const size_t prefix = offsetof(nxrt_negotiate_reply, message) + sizeof rp->message;
  if (!rp || rp->struct_size < prefix) return NXRT_INVALID_ARGUMENT;
  if (!rq || rq->abi_major != NXRT_EP_ABI_MAJOR) {
    snprintf(rp->message, sizeof rp->message, "this plugin is built for nxrt EP ABI %u.x; the host offers ABI %u.%u",
             NXRT_EP_ABI_MAJOR, rq ? rq->abi_major : 0u, rq ? rq->abi_minor : 0u);
    return NXRT_VERSION_MISMATCH;
  }
  if (!rq->host || !NXRT_HAS_FIELD(rq->host, nxrt_host_services, profile_device_event)) {
    snprintf(rp->message, sizeof rp->message, "host services table too small for ABI 2.0");
    return NXRT_VERSION_MISMATCH;
  }
  if (rp->struct_size < offsetof(nxrt_negotiate_reply, plugin) + sizeof rp->plugin) {
    snprintf(rp->message, sizeof rp->message, "negotiation reply too small for ABI 2.0");
    return NXRT_VERSION_MISMATCH;
  }
  inst = (struct nxrt_plugin*)calloc(1, sizeof *inst);
  if (!inst) {
    snprintf(rp->message, sizeof rp->message, "out of memory");
    return NXRT_OUT_OF_MEMORY;
  }
  inst->host = rq->host;
  memset(&full, 0, sizeof full);
  full.v2_0.struct_size = REPLY_SIZE;
  full.v2_0.abi_major = NXRT_EP_ABI_MAJOR;
  full.v2_0.abi_minor = rq->abi_minor < FUTURE_MINOR ? rq->abi_minor : FUTURE_MINOR;
  full.v2_0.features = NXRT_FEATURE_CONCURRENT_RUN | FUTURE_FEATURE_BIT; /* the host masks what it lacks */
  full.v2_0.api = &kApi.v2_0;
  full.v2_0.plugin = inst;
  full.features2 = 1;
  full.build_id = "future-minor-test";
  size = NXRT_FILLED_SIZE((size_t)rp->struct_size, REPLY_SIZE);
  memcpy(rp, &full, size);
  rp->struct_size = (uint32_t)size;
  return NXRT_OK;
}
