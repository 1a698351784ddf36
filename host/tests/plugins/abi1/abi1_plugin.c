/* A plugin exactly as a 1.x author wrote it: plain C against the ABI 1.1 header
 * (nxrt_ep_v1.h, a verbatim copy), one CPU device, float32 Relu on host memory.
 * A 2.x host must refuse it at load, naming both majors (1 and its own).
 *
 * Built twice (host/tests/CMakeLists.txt):
 *   abi1          polite:   refuses any major but 1 with VERSION_MISMATCH and a
 *                           message naming both majors, as the 1.1 header asks.
 *   abi1_careless careless: ignores the offered major and answers abi_major = 1
 *                           (NXRT_ABI1_CARELESS); the host must still refuse it,
 *                           reading only the frozen prefix of the reply. */
#include "nxrt_ep_v1.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef NXRT_ABI1_CARELESS
#define ABI1_NAME "abi1_careless"
#else
#define ABI1_NAME "abi1"
#endif

static const nxrt_host_services* g_host;

static nxrt_status* err(nxrt_status_code code, const char* msg) { return g_host->status_create(code, 0, msg); }

static void shutdown_plugin(void) { g_host = NULL; }

static nxrt_status* device_count(uint32_t* count) {
  if (!count) return err(NXRT_INVALID_ARGUMENT, "count is NULL");
  *count = 1;
  return NULL;
}
static const char* no_device_reason(void) { return ""; }

static nxrt_status* device_info(uint32_t index, nxrt_device_info* info) {
  nxrt_device_info full;
  uint32_t size;
  if (!info) return err(NXRT_INVALID_ARGUMENT, "info is NULL");
  if (index != 0) return err(NXRT_NOT_FOUND, "abi1 has one device");
  memset(&full, 0, sizeof full);
  full.struct_size = sizeof full;
  full.kind = NXRT_DEVICE_CPU;
  full.name = "abi1 test CPU";
  full.vendor = "nxrt tests";
  full.dtypes = 1ull << NXRT_DTYPE_FLOAT32;
  full.host_addressable = 1;
  size = info->struct_size < sizeof full ? info->struct_size : (uint32_t)sizeof full;
  memcpy(info, &full, size);
  info->struct_size = size;
  return NULL;
}

struct nxrt_ep_session { int unused; };
struct nxrt_kernel { int unused; };

static nxrt_status* session_create(uint32_t device, const nxrt_option* options, size_t count, nxrt_ep_session** out) {
  (void)options;
  (void)count;
  if (!out) return err(NXRT_INVALID_ARGUMENT, "out is NULL");
  if (device != 0) return err(NXRT_NOT_FOUND, "abi1 has one device");
  *out = (nxrt_ep_session*)calloc(1, sizeof(nxrt_ep_session));
  return *out ? NULL : err(NXRT_OUT_OF_MEMORY, "session");
}
static void session_release(nxrt_ep_session* s) { free(s); }

static nxrt_status* get_capability(nxrt_ep_session* s, const nxrt_graph* g, nxrt_claim_sink* sink) {
  size_t i, n = g_host->graph_node_count(g);
  (void)s;
  for (i = 0; i < n; ++i) {
    const nxrt_node* node = g_host->graph_node(g, i);
    size_t index = g_host->node_index(node);
    nxrt_status* st;
    if (strcmp(g_host->node_op_type(node), "Relu") == 0 && g_host->node_domain(node)[0] == '\0' &&
        g_host->value_dtype(g_host->node_input(node, 0)) == NXRT_DTYPE_FLOAT32)
      st = g_host->claim_nodes(sink, &index, 1, 0.0);
    else
      st = g_host->refuse_node(sink, index, NXRT_REFUSE_OP, "abi1 runs float32 Relu only");
    if (st) return st;
  }
  return NULL;
}

static nxrt_status* kernel_create(nxrt_ep_session* s, const nxrt_graph* g, nxrt_kernel** out) {
  (void)s;
  (void)g;
  *out = (nxrt_kernel*)calloc(1, sizeof(nxrt_kernel));
  return *out ? NULL : err(NXRT_OUT_OF_MEMORY, "kernel");
}
static nxrt_status* kernel_compute(nxrt_kernel* k, nxrt_kernel_context* ctx) {
  nxrt_tensor x, y;
  nxrt_status* st;
  int64_t i, n = 1;
  uint32_t d;
  (void)k;
  memset(&x, 0, sizeof x);
  memset(&y, 0, sizeof y);
  x.struct_size = y.struct_size = sizeof x;
  if ((st = g_host->ctx_input(ctx, 0, &x))) return st;
  if ((st = g_host->ctx_output(ctx, 0, NXRT_DTYPE_FLOAT32, x.rank, x.dims, &y))) return st;
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
  (void)s;
  (void)kind;
  if (alignment < 64) alignment = 64;
  bytes = (bytes + alignment - 1) / alignment * alignment;
  *handle = aligned_alloc((size_t)alignment, (size_t)(bytes ? bytes : alignment));
  return *handle ? NULL : err(NXRT_OUT_OF_MEMORY, "memory_alloc");
}
static void memory_free(nxrt_ep_session* s, nxrt_memory_kind kind, void* handle) {
  (void)s;
  (void)kind;
  free(handle);
}
static nxrt_status* copy(nxrt_ep_session* s, const nxrt_copy_region* r, size_t count, nxrt_stream* stream) {
  size_t i;
  (void)s;
  (void)stream;
  for (i = 0; i < count; ++i)
    memmove((char*)r[i].dst + r[i].dst_offset, (const char*)r[i].src + r[i].src_offset, (size_t)r[i].bytes);
  return NULL;
}

static const nxrt_plugin_api kApi = {
    sizeof(nxrt_plugin_api), ABI1_NAME, "1.1.0", shutdown_plugin, device_count, no_device_reason, device_info,
    session_create, session_release, get_capability, kernel_create, kernel_compute, kernel_release, memory_alloc,
    memory_free, copy, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

NXRT_EP_EXPORT int32_t nxrt_ep_negotiate(const nxrt_negotiate_request* rq, nxrt_negotiate_reply* rp) {
  if (!rq || !rp) return NXRT_INVALID_ARGUMENT;
#ifndef NXRT_ABI1_CARELESS
  if (rq->abi_major != NXRT_EP_ABI_MAJOR) {
    snprintf(rp->message, sizeof rp->message, "this plugin is built for nxrt EP ABI %u.x; the host offers ABI %u.%u",
             NXRT_EP_ABI_MAJOR, rq->abi_major, rq->abi_minor);
    return NXRT_VERSION_MISMATCH;
  }
#endif
  /* The careless variant takes whatever it is offered for its own 1.x host. */
  g_host = rq->host;
  rp->struct_size = sizeof *rp;
  rp->abi_major = NXRT_EP_ABI_MAJOR;
  rp->abi_minor = rq->abi_minor < NXRT_EP_ABI_MINOR ? rq->abi_minor : NXRT_EP_ABI_MINOR;
  rp->message[0] = '\0';
  rp->features = 0;
  rp->api = &kApi;
  return NXRT_OK;
}
