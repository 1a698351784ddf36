/*
 * TEST FIXTURE, NOT THE ABI: a verbatim copy of the nxrt EP ABI 1.1 header
 * (git show main:abi/nxrt_ep.h, before the move to ABI 2.0), kept here so that
 * host/tests can build a plugin exactly as a 1.x plugin author did and check
 * that the 2.x host refuses it cleanly at load, naming both majors. Never
 * include it together with abi/nxrt_ep.h (both use the NXRT_EP_H guard) and
 * never edit it: it must stay what 1.x plugins were compiled against.
 */
/*
 * nxrt execution-provider plugin ABI, version 1.0.
 *
 * Pure C11. This header is the only thing a plugin and the nxrt host share.
 *
 * Versioning (independent of the product release number):
 *   major: incompatible change (a field removed, retyped or reordered).
 *   minor: append-only change (a field appended to a struct or table).
 *   Every struct that crosses the boundary starts with `uint32_t struct_size`,
 *   set by whoever fills the struct. A reader checks NXRT_HAS_FIELD before it
 *   touches a field, so an old plugin works on a new host and a new plugin on an
 *   old host within one major.
 *
 * Handshake: the library exports one symbol, `nxrt_ep_negotiate`. The host
 *   offers its ABI major and the newest minor it speaks plus its services table;
 *   the plugin answers with the agreed version (same major, min of the minors),
 *   a feature bitset and its function table, or refuses with a message. The
 *   layout of nxrt_negotiate_request / nxrt_negotiate_reply up to and including
 *   `message` is frozen across all majors, so a refusal is always readable.
 *
 * Ownership: whoever creates an object frees it through its own function.
 *   Statuses are created by the host (host->status_create) and freed by the
 *   host; a plugin returns them or releases them with host->status_release.
 *   Strings returned by getters live as long as the object they were read from.
 *
 * Errors: every fallible function returns `nxrt_status*`; NULL means success.
 *   No C++ exception, longjmp or abort may cross this boundary.
 *
 * Thread-safety classes, written on every entry point:
 *   [any-thread]  may be called concurrently from any thread.
 *   [per-object]  concurrent calls are allowed on different objects; calls on
 *                 the same object are serialised by the caller.
 *   [load-time]   called once, not concurrently with anything else of the plugin.
 */
#ifndef NXRT_EP_H
#define NXRT_EP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NXRT_EP_ABI_MAJOR 1u
#define NXRT_EP_ABI_MINOR 1u

/* The one exported symbol. */
#define NXRT_EP_ENTRY_SYMBOL "nxrt_ep_negotiate"

#if defined(_WIN32)
#define NXRT_EP_EXPORT __declspec(dllexport)
#else
#define NXRT_EP_EXPORT __attribute__((visibility("default")))
#endif

/* True when the struct `p` (of type `type`) was filled by someone who knew `field`. */
#define NXRT_HAS_FIELD(p, type, field) \
  ((p) != NULL && (size_t)(p)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* ------------------------------------------------------------------ errors */

typedef enum nxrt_status_code {
  NXRT_OK = 0,
  NXRT_INVALID_ARGUMENT = 1, /* caller passed something wrong: shape, dtype, option, pointer */
  NXRT_UNSUPPORTED = 2,      /* valid request this implementation does not do */
  NXRT_OUT_OF_MEMORY = 3,
  NXRT_DEVICE_LOST = 4,
  NXRT_NOT_FOUND = 5,
  NXRT_VERSION_MISMATCH = 6,
  NXRT_CANCELLED = 7,
  NXRT_TIMEOUT = 8,
  NXRT_INTERNAL = 9
} nxrt_status_code;

/* Opaque, created and freed by the host. NULL means OK. */
typedef struct nxrt_status nxrt_status;

/* ----------------------------------------------------------- tensor types */

/* Element types use the ONNX TensorProto.DataType numbering. */
typedef enum nxrt_dtype {
  NXRT_DTYPE_UNDEFINED = 0,
  NXRT_DTYPE_FLOAT32 = 1,
  NXRT_DTYPE_UINT8 = 2,
  NXRT_DTYPE_INT8 = 3,
  NXRT_DTYPE_UINT16 = 4,
  NXRT_DTYPE_INT16 = 5,
  NXRT_DTYPE_INT32 = 6,
  NXRT_DTYPE_INT64 = 7,
  NXRT_DTYPE_STRING = 8,
  NXRT_DTYPE_BOOL = 9,
  NXRT_DTYPE_FLOAT16 = 10,
  NXRT_DTYPE_FLOAT64 = 11,
  NXRT_DTYPE_UINT32 = 12,
  NXRT_DTYPE_UINT64 = 13,
  NXRT_DTYPE_BFLOAT16 = 16
} nxrt_dtype;

/* Where a buffer lives, from the point of view of one plugin session. */
typedef enum nxrt_memory_kind {
  NXRT_MEMORY_HOST = 0,   /* ordinary host memory owned by the host; handle is a pointer */
  NXRT_MEMORY_DEVICE = 1, /* the plugin's device memory; handle is opaque to the host */
  NXRT_MEMORY_HOST_PINNED = 2 /* plugin-allocated host memory fast to transfer; handle is a pointer */
} nxrt_memory_kind;

/* A tensor crossing the boundary. `data` is an allocation handle and
 * `byte_offset` an offset inside it. For host-addressable memory the element
 * address is (char*)data + byte_offset; for device memory only the plugin that
 * allocated `data` may interpret it. Elements are dense, row-major.
 * Tensors the host places inside a larger allocation have byte_offset a
 * multiple of NXRT_TENSOR_ALIGNMENT. */
#define NXRT_TENSOR_ALIGNMENT 256u
typedef struct nxrt_tensor {
  uint32_t struct_size;
  nxrt_dtype dtype;
  uint32_t rank;
  const int64_t* dims; /* rank entries, all >= 0; owned by the producer of the struct */
  void* data;
  uint64_t byte_offset;
  nxrt_memory_kind memory;
} nxrt_tensor;

/* ------------------------------------------------------------ graph view */

/* Read-only views the host hands to a plugin. Valid only during the call
 * that received them (get_capability, kernel_create). Never freed by plugins. */
typedef struct nxrt_graph nxrt_graph;
typedef struct nxrt_node nxrt_node;
typedef struct nxrt_value nxrt_value;
typedef struct nxrt_attribute nxrt_attribute;

typedef enum nxrt_attribute_type {
  NXRT_ATTR_UNDEFINED = 0,
  NXRT_ATTR_FLOAT = 1,
  NXRT_ATTR_INT = 2,
  NXRT_ATTR_STRING = 3,
  NXRT_ATTR_TENSOR = 4,
  NXRT_ATTR_GRAPH = 5,
  NXRT_ATTR_FLOATS = 6,
  NXRT_ATTR_INTS = 7,
  NXRT_ATTR_STRINGS = 8
} nxrt_attribute_type;

/* Why a node was refused. */
typedef enum nxrt_refusal {
  NXRT_REFUSE_OP = 1,        /* op type or domain not implemented */
  NXRT_REFUSE_OPSET = 2,     /* op known but not at this opset version */
  NXRT_REFUSE_DTYPE = 3,     /* an input or output element type */
  NXRT_REFUSE_SHAPE = 4,     /* rank, unknown dims, or sizes out of range */
  NXRT_REFUSE_ATTRIBUTE = 5, /* an attribute value not implemented */
  NXRT_REFUSE_OTHER = 6
} nxrt_refusal;

/* Opaque collector for claims during get_capability. */
typedef struct nxrt_claim_sink nxrt_claim_sink;

/* Opaque per-call context passed to kernel_compute. */
typedef struct nxrt_kernel_context nxrt_kernel_context;

/* ------------------------------------------------------ plugin objects */

typedef struct nxrt_ep_session nxrt_ep_session; /* plugin: one device + options */
typedef struct nxrt_kernel nxrt_kernel;         /* plugin: a bound node or compiled group */
typedef struct nxrt_stream nxrt_stream;         /* plugin: ordered work queue */
typedef struct nxrt_event nxrt_event;           /* plugin: a point in a stream */

typedef struct nxrt_option {
  const char* key;
  const char* value;
} nxrt_option;

typedef struct nxrt_property {
  const char* key;
  const char* value;
} nxrt_property;

typedef enum nxrt_device_kind {
  NXRT_DEVICE_CPU = 0,
  NXRT_DEVICE_GPU = 1,
  NXRT_DEVICE_NPU = 2,
  NXRT_DEVICE_OTHER = 3
} nxrt_device_kind;

/* Filled by the plugin; the host sets struct_size to what it knows first.
 * Strings and the property array live until the plugin is unloaded. */
typedef struct nxrt_device_info {
  uint32_t struct_size;
  nxrt_device_kind kind;
  const char* name;
  const char* vendor;
  uint32_t vendor_id; /* PCI vendor id, 0 if none */
  uint32_t device_id; /* PCI device id, 0 if none */
  uint8_t uuid[16];   /* all zero if unknown; the host deduplicates by it */
  uint64_t memory_bytes;
  uint64_t dtypes;    /* bit (1 << nxrt_dtype) for each element type kernels accept */
  /* Nonzero when NXRT_MEMORY_DEVICE handles are host pointers (CPU-like):
   * the host may then read and write them directly and skips transfers. */
  uint32_t host_addressable;
  uint32_t property_count;
  const nxrt_property* properties; /* free-form: limits, subgroup size, driver... */
} nxrt_device_info;

/* One contiguous copy. Host memory: handle is a pointer. Device memory: the
 * plugin's allocation handle. Offsets are in bytes. */
typedef struct nxrt_copy_region {
  uint32_t struct_size;
  nxrt_memory_kind src_memory;
  const void* src;
  uint64_t src_offset;
  nxrt_memory_kind dst_memory;
  void* dst;
  uint64_t dst_offset;
  uint64_t bytes;
} nxrt_copy_region;

/* ------------------------------------------------------- host services */

typedef enum nxrt_log_level {
  NXRT_LOG_DEBUG = 0,
  NXRT_LOG_INFO = 1,
  NXRT_LOG_WARNING = 2,
  NXRT_LOG_ERROR = 3
} nxrt_log_level;

/* Provided by the host; valid from negotiation until shutdown returns.
 * Every function is [any-thread]. Getters given an out-of-range index or a
 * NULL handle return 0 / NULL rather than failing. */
typedef struct nxrt_host_services {
  uint32_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;

  /* statuses */
  nxrt_status* (*status_create)(nxrt_status_code code, int retryable, const char* message);
  void (*status_release)(nxrt_status* status);
  nxrt_status_code (*status_code)(const nxrt_status* status);
  const char* (*status_message)(const nxrt_status* status);

  void (*log)(nxrt_log_level level, const char* plugin_name, const char* message);

  /* graph. A graph view is either the whole model (get_capability) or the
   * subgraph of one claim (kernel_create). Node indices are those of the whole
   * model, so claims name nodes the same way in both. */
  size_t (*graph_node_count)(const nxrt_graph* g);
  const nxrt_node* (*graph_node)(const nxrt_graph* g, size_t i);
  /* External inputs of the view, in kernel-input order. For a single-node
   * subgraph this is the node's input list, positional, repeats included,
   * NULL for an absent optional input. */
  size_t (*graph_input_count)(const nxrt_graph* g);
  const nxrt_value* (*graph_input)(const nxrt_graph* g, size_t i);
  /* Outputs of the view, in kernel-output order (single node: node outputs,
   * NULL for an absent optional output). */
  size_t (*graph_output_count)(const nxrt_graph* g);
  const nxrt_value* (*graph_output)(const nxrt_graph* g, size_t i);
  /* Opset imported for a domain ("" or "ai.onnx" for the default); -1 if none. */
  int64_t (*graph_opset)(const nxrt_graph* g, const char* domain);

  size_t (*node_index)(const nxrt_node* n);
  const char* (*node_name)(const nxrt_node* n);
  const char* (*node_op_type)(const nxrt_node* n);
  const char* (*node_domain)(const nxrt_node* n); /* "" for the default domain */
  size_t (*node_input_count)(const nxrt_node* n);
  const nxrt_value* (*node_input)(const nxrt_node* n, size_t i); /* NULL: absent optional */
  size_t (*node_output_count)(const nxrt_node* n);
  const nxrt_value* (*node_output)(const nxrt_node* n, size_t i);
  size_t (*node_attribute_count)(const nxrt_node* n);
  const nxrt_attribute* (*node_attribute_at)(const nxrt_node* n, size_t i);
  const nxrt_attribute* (*node_attribute)(const nxrt_node* n, const char* name); /* NULL: absent */

  const char* (*attribute_name)(const nxrt_attribute* a);
  nxrt_attribute_type (*attribute_type)(const nxrt_attribute* a);
  int64_t (*attribute_int)(const nxrt_attribute* a);
  float (*attribute_float)(const nxrt_attribute* a);
  const char* (*attribute_string)(const nxrt_attribute* a, size_t* length);
  const int64_t* (*attribute_ints)(const nxrt_attribute* a, size_t* count);
  const float* (*attribute_floats)(const nxrt_attribute* a, size_t* count);
  size_t (*attribute_string_count)(const nxrt_attribute* a);
  const char* (*attribute_string_at)(const nxrt_attribute* a, size_t i, size_t* length);
  /* A TENSOR attribute as a host-memory tensor; 0 on success. */
  int (*attribute_tensor)(const nxrt_attribute* a, nxrt_tensor* out);

  const char* (*value_name)(const nxrt_value* v);
  nxrt_dtype (*value_dtype)(const nxrt_value* v);
  /* -1 when the rank is unknown. */
  int64_t (*value_rank)(const nxrt_value* v);
  /* rank entries; -1 for a dimension not known before run time. */
  const int64_t* (*value_dims)(const nxrt_value* v);
  /* Nonzero for an initializer or a Constant's output: data known at load. */
  int (*value_is_constant)(const nxrt_value* v);
  /* The constant's data as a host tensor; 0 on success, nonzero if not constant. */
  int (*value_constant)(const nxrt_value* v, nxrt_tensor* out);

  /* claims (get_capability only). `cost` is the plugin's relative estimate,
   * 0 if unknown. A group of more than one node requires NXRT_FEATURE_FUSED_GROUPS;
   * its nodes must be distinct and exist in the view. The view hides nodes other EPs
   * took, so the host keeps a convex group whole and splits any other into runs that
   * are consecutive in the model's topological order; kernel_create then sees each part. */
  nxrt_status* (*claim_nodes)(nxrt_claim_sink* sink, const size_t* node_indices, size_t count,
                              double cost);
  nxrt_status* (*refuse_node)(nxrt_claim_sink* sink, size_t node_index, nxrt_refusal reason,
                              const char* message);

  /* kernel context (kernel_compute only). Inputs and outputs follow the order
   * of the kernel's subgraph view. An absent optional input gives
   * NXRT_NOT_FOUND. Outputs are bound with the shape the kernel computed; the
   * host hands back memory of the kernel's session (planned or allocated).
   * Each output may be bound once per call. */
  size_t (*ctx_input_count)(const nxrt_kernel_context* ctx);
  nxrt_status* (*ctx_input)(const nxrt_kernel_context* ctx, size_t i, nxrt_tensor* out);
  size_t (*ctx_output_count)(const nxrt_kernel_context* ctx);
  nxrt_status* (*ctx_output)(nxrt_kernel_context* ctx, size_t i, nxrt_dtype dtype, uint32_t rank,
                             const int64_t* dims, nxrt_tensor* out);
  /* The stream the work must be ordered on; NULL for plugins without
   * NXRT_FEATURE_STREAMS (then compute must be complete on return). */
  nxrt_stream* (*ctx_stream)(const nxrt_kernel_context* ctx);
  /* Nonzero once the caller asked to cancel this run; long kernels poll it. */
  int (*ctx_cancelled)(const nxrt_kernel_context* ctx);

  /* ---- ABI 1.1 (check with NXRT_HAS_FIELD and the agreed minor) ---- */

  /* kernel_create only, on the graph it received: the kernel keeps its own copy of
   * constant input `v` (prepacked weights, say) and will never read v's data again.
   * ctx_input then gives v's dtype and dims with data = NULL, and the host may free
   * its copy once nothing else needs it, so weights live once in memory. Fails with
   * NXRT_INVALID_ARGUMENT if v is not a constant input of g or g is not being created. */
  nxrt_status* (*graph_capture_constant)(const nxrt_graph* g, const nxrt_value* v);
} nxrt_host_services;

/* ------------------------------------------------------- plugin table */

/* Optional parts, declared rather than guessed from NULL pointers. A declared
 * feature guarantees its functions are non-NULL; conformance checks both ways. */
#define NXRT_FEATURE_FUSED_GROUPS (1ull << 0) /* may claim multi-node groups */
#define NXRT_FEATURE_STREAMS (1ull << 1)      /* stream_* and event_* are implemented */
#define NXRT_FEATURE_CONCURRENT_RUN (1ull << 2) /* kernel_compute may run concurrently on one kernel */

typedef struct nxrt_plugin_api {
  uint32_t struct_size;

  /* identity; static strings */
  const char* name;    /* short EP name used in --ep lists: "cpu", "vulkan" */
  const char* version; /* the plugin's own release, semver */

  /* [load-time] Called once before unload; frees everything global. */
  void (*shutdown)(void);

  /* devices. [any-thread] */
  nxrt_status* (*device_count)(uint32_t* count);
  /* When device_count reports 0: why (driver missing, no adapter...). Static string. */
  const char* (*no_device_reason)(void);
  /* `info->struct_size` is set by the host; the plugin fills fields that fit. */
  nxrt_status* (*device_info)(uint32_t index, nxrt_device_info* info);

  /* sessions: one device with options. [any-thread]
   * Options the plugin does not know are ignored unless prefixed "<name>."
   * (then unknown keys are an INVALID_ARGUMENT naming the key). The host passes
   * "threads" (intra-op thread count, "0" = plugin default). */
  nxrt_status* (*session_create)(uint32_t device_index, const nxrt_option* options,
                                 size_t option_count, nxrt_ep_session** out);
  void (*session_release)(nxrt_ep_session* session); /* [per-object], after all its objects */

  /* capability. [per-object] Must call claim_nodes or refuse_node for every
   * node of `graph` it sees; a node it neither claims nor refuses is reported
   * as refused without a reason. Deterministic for the same graph. */
  nxrt_status* (*get_capability)(nxrt_ep_session* session, const nxrt_graph* graph,
                                 nxrt_claim_sink* sink);

  /* kernels. create: [any-thread]. compute: [per-object], or [any-thread] with
   * NXRT_FEATURE_CONCURRENT_RUN. `subgraph` is the view of exactly one claim. */
  nxrt_status* (*kernel_create)(nxrt_ep_session* session, const nxrt_graph* subgraph,
                                nxrt_kernel** out);
  nxrt_status* (*kernel_compute)(nxrt_kernel* kernel, nxrt_kernel_context* ctx);
  void (*kernel_release)(nxrt_kernel* kernel);

  /* memory. [any-thread]. `alignment` is a power of two; the plugin guarantees
   * at least max(alignment, 64). A zero-byte request returns a unique non-NULL
   * handle that must still be freed. HOST_PINNED handles are host pointers. */
  nxrt_status* (*memory_alloc)(nxrt_ep_session* session, nxrt_memory_kind kind, uint64_t bytes,
                               uint64_t alignment, void** handle);
  void (*memory_free)(nxrt_ep_session* session, nxrt_memory_kind kind, void* handle);

  /* data transfer: a batch of copies between host memory and this session's
   * memory, or within it. [any-thread] With a stream the copies are ordered on
   * it and host buffers must stay alive until it is synchronized; with NULL the
   * copies are complete on return. */
  nxrt_status* (*copy)(nxrt_ep_session* session, const nxrt_copy_region* regions, size_t count,
                       nxrt_stream* stream);

  /* streams and events (NXRT_FEATURE_STREAMS). A stream: [per-object]. */
  nxrt_status* (*stream_create)(nxrt_ep_session* session, nxrt_stream** out);
  nxrt_status* (*stream_synchronize)(nxrt_stream* stream); /* waits for all work queued so far */
  void (*stream_release)(nxrt_stream* stream);
  nxrt_status* (*event_create)(nxrt_ep_session* session, nxrt_event** out);
  nxrt_status* (*event_record)(nxrt_event* event, nxrt_stream* stream);
  nxrt_status* (*stream_wait_event)(nxrt_stream* stream, nxrt_event* event); /* device-side wait */
  nxrt_status* (*event_synchronize)(nxrt_event* event); /* host-side wait */
  void (*event_release)(nxrt_event* event);
} nxrt_plugin_api;

/* ------------------------------------------------------------ handshake */

/* Frozen prefix: struct_size..host_services never move in any major. */
typedef struct nxrt_negotiate_request {
  uint32_t struct_size;
  uint32_t abi_major; /* the host's major */
  uint32_t abi_minor; /* the newest minor the host speaks */
  const nxrt_host_services* host;
} nxrt_negotiate_request;

/* Frozen prefix: struct_size..message never move in any major. */
typedef struct nxrt_negotiate_reply {
  uint32_t struct_size;
  uint32_t abi_major;  /* agreed: equal to the request's */
  uint32_t abi_minor;  /* agreed: min(host minor, plugin minor) */
  char message[256];   /* NUL-terminated refusal reason when the call fails */
  uint64_t features;   /* NXRT_FEATURE_* bits */
  const nxrt_plugin_api* api; /* static table, valid until shutdown returns */
} nxrt_negotiate_reply;

/* [load-time] Returns NXRT_OK and fills `reply`, or a nonzero nxrt_status_code
 * with `reply->message` set (NXRT_VERSION_MISMATCH for an unsupported major).
 * May be called again after shutdown (reload). */
typedef int32_t (*nxrt_ep_negotiate_fn)(const nxrt_negotiate_request* request,
                                       nxrt_negotiate_reply* reply);

NXRT_EP_EXPORT int32_t nxrt_ep_negotiate(const nxrt_negotiate_request* request,
                                         nxrt_negotiate_reply* reply);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NXRT_EP_H */
