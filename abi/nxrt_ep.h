/*
 * nxrt execution-provider plugin ABI, version 2.5.
 *
 * Pure C11. This header is the only thing a plugin and the nxrt host share.
 *
 * ---------------------------------------------------------------- versions
 * The ABI version is independent of the product release number.
 *   major: incompatible change (a field removed, retyped or reordered). A host
 *          and a plugin of different majors refuse each other at load, with a
 *          message naming both majors.
 *   minor: append-only change (a field appended to a struct or table, a new
 *          feature bit, a new named constant). Old plugin on new host and new
 *          plugin on old host both work within a major.
 *
 * What came with which version:
 *   2.0  plugin instances (nxrt_plugin*), struct_size on every struct, arrays of
 *        versioned structs as arrays of pointers, fixed-width integers for every
 *        enum-typed field, feature bits masked by minor, const kernel inputs,
 *        statuses never NULL on failure and a retryable getter, fallible host
 *        services returning statuses, typed option schema, run hooks, GRAPH
 *        attributes and value producer/consumers, PCI bus id and free memory,
 *        device-side profiling, the plugin's library path and host identity in
 *        the request. (1.1's graph_capture_constant is part of 2.0.)
 *   2.1  device interop: native handles (nxrt_native.h) of a session's device,
 *        queue, memory and streams; streams imported from the caller's native
 *        sync object; an external device-memory allocator per session; memory
 *        and transfer statistics per session; copies between two sessions of one
 *        plugin instance.
 *   2.2  memory import: a session wraps memory it did not allocate (the
 *        caller's, or another plugin's, given by its native handle) as its own
 *        DEVICE memory, without a copy.
 *   2.3  string tensors (nxrt_string elements in host memory).
 *   2.4  compiled-kernel cache: a session's fingerprint, a kernel exported to a
 *        blob and rebuilt from one with a four-state verdict, and sessions that
 *        compile for a described device without opening one.
 *   2.5  kernel descriptions: one line per kernel saying how it computes (the
 *        algorithm, tile or layout the plugin chose), which `nxrt inspect` shows.
 *
 * ------------------------------------------------------------ struct rule
 * Every struct that crosses the boundary starts with `uint32_t struct_size`.
 *   - A struct one side fills and the other reads (request, reply's tables,
 *     options, copy regions, run options, the two function tables): the writer
 *     sets struct_size to sizeof of its own definition; the reader checks
 *     NXRT_HAS_FIELD before it touches a field and treats a missing one as its
 *     documented default.
 *   - A struct the callee fills for the caller (device_info, tensors from
 *     ctx_input/ctx_output/value_constant/attribute_tensor, option_info, the
 *     negotiation reply): the caller sets struct_size to the size it allocated;
 *     the callee writes only fields that fit in it and writes back the size it
 *     filled (min(caller's size, callee's sizeof)).
 *   - Arrays of versioned structs travel as arrays of pointers, so a peer with
 *     a larger element never misreads an older one.
 *   - Fields that hold a named constant are uint32_t (never a C enum, whose size
 *     is the compiler's choice); the constants below keep their names.
 *
 * ---------------------------------------------------------------- handshake
 * The library exports one symbol, `nxrt_ep_negotiate`. The host offers its ABI
 * major, the newest minor it speaks and its services table; the plugin creates
 * a plugin instance and answers with the agreed version (same major, min of the
 * minors), a feature bitset, its function table and the instance, or refuses
 * with a message. The layout of nxrt_negotiate_request / nxrt_negotiate_reply
 * up to and including `message` is frozen across all majors, so a refusal is
 * always readable. The host masks off feature bits the agreed minor does not
 * define (NXRT_FEATURES_OF_MINOR).
 *
 * Instances: every negotiate creates an independent instance; every
 * plugin-level call takes it; shutdown releases that instance only. Several
 * instances of one library live side by side (two host environments, load,
 * unload and reload in any order, from several threads). The function table is
 * immutable once returned and valid while the library stays loaded.
 *
 * ---------------------------------------------------------------- ownership
 * Whoever creates an object frees it through its own function. Statuses are
 * created by the host (host->status_create) and freed by the host; a plugin
 * returns them (ownership passes to the caller) or releases them with
 * host->status_release. Strings returned by getters live as long as the object
 * they were read from.
 *
 * ------------------------------------------------------------------ errors
 * Every fallible function returns `nxrt_status*`; NULL means success, and a
 * failure is never NULL (status_create returns a preallocated out-of-memory
 * status when it cannot allocate). No C++ exception, longjmp or abort may cross
 * this boundary.
 *
 * ----------------------------------------------------------------- threads
 * Thread-safety classes, written on every entry point:
 *   [any-thread]  may be called concurrently from any thread.
 *   [per-object]  concurrent calls are allowed on different objects; calls on
 *                 the same object are serialised by the caller.
 *   [load-time]   not concurrent with any other call on the same instance.
 */
#ifndef NXRT_EP_H
#define NXRT_EP_H

#include <stddef.h>
#include <stdint.h>

#include "nxrt_native.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NXRT_EP_ABI_MAJOR 2u
#define NXRT_EP_ABI_MINOR 5u

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

/* The struct_size a callee writes back: what fits in both definitions. */
#define NXRT_FILLED_SIZE(caller_size, callee_sizeof) \
  ((caller_size) < (callee_sizeof) ? (caller_size) : (callee_sizeof))

/* Returned by index getters for a NULL or foreign handle. */
#define NXRT_NO_INDEX ((size_t)-1)

/* ------------------------------------------------------------------ errors */

typedef int32_t nxrt_status_code;
enum {
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
};

/* Opaque, created and freed by the host. NULL means OK. */
typedef struct nxrt_status nxrt_status;

/* ----------------------------------------------------------- tensor types */

/* Element types use the ONNX TensorProto.DataType numbering. */
typedef uint32_t nxrt_dtype;
enum {
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
};

/* Where a buffer lives, from the point of view of one plugin session. */
typedef uint32_t nxrt_memory_kind;
enum {
  NXRT_MEMORY_HOST = 0,       /* ordinary host memory owned by the host; handle is a pointer */
  NXRT_MEMORY_DEVICE = 1,     /* the plugin's device memory; handle is opaque to the host */
  NXRT_MEMORY_HOST_PINNED = 2 /* plugin-allocated host memory fast to transfer; handle is a pointer */
};

/* A tensor the kernel writes (outputs). `data` is an allocation handle and
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
  nxrt_memory_kind memory;
  const int64_t* dims; /* rank entries, all >= 0; owned by the producer of the struct */
  void* data;
  uint64_t byte_offset;
} nxrt_tensor;

/* The same layout, read-only: kernel inputs, constants and TENSOR attributes.
 * A plugin never writes through `data` (conformance checksums inputs around
 * every kernel call). */
typedef struct nxrt_const_tensor {
  uint32_t struct_size;
  nxrt_dtype dtype;
  uint32_t rank;
  nxrt_memory_kind memory;
  const int64_t* dims;
  const void* data;
  uint64_t byte_offset;
} nxrt_const_tensor;

/* STRING tensors: elements are nxrt_string (nxrt_native.h, 2.3). */

/* ------------------------------------------------------------ graph view */

/* Read-only views the host hands to a plugin. Valid only during the call
 * that received them (get_capability, kernel_create). Never freed by plugins. */
typedef struct nxrt_graph nxrt_graph;
typedef struct nxrt_node nxrt_node;
typedef struct nxrt_value nxrt_value;
typedef struct nxrt_attribute nxrt_attribute;

typedef uint32_t nxrt_attribute_type;
enum {
  NXRT_ATTR_UNDEFINED = 0,
  NXRT_ATTR_FLOAT = 1,
  NXRT_ATTR_INT = 2,
  NXRT_ATTR_STRING = 3,
  NXRT_ATTR_TENSOR = 4,
  NXRT_ATTR_GRAPH = 5,
  NXRT_ATTR_FLOATS = 6,
  NXRT_ATTR_INTS = 7,
  NXRT_ATTR_STRINGS = 8
};

/* Why a node was refused. */
typedef uint32_t nxrt_refusal;
enum {
  NXRT_REFUSE_OP = 1,        /* op type or domain not implemented */
  NXRT_REFUSE_OPSET = 2,     /* op known but not at this opset version */
  NXRT_REFUSE_DTYPE = 3,     /* an input or output element type */
  NXRT_REFUSE_SHAPE = 4,     /* rank, unknown dims, or sizes out of range */
  NXRT_REFUSE_ATTRIBUTE = 5, /* an attribute value not implemented */
  NXRT_REFUSE_OTHER = 6
};

/* Opaque collector for claims during get_capability. */
typedef struct nxrt_claim_sink nxrt_claim_sink;

/* Opaque per-call context passed to kernel_compute. */
typedef struct nxrt_kernel_context nxrt_kernel_context;

/* Opaque collector of device-side timings (on_run_end while profiling). */
typedef struct nxrt_profile_sink nxrt_profile_sink;

/* ------------------------------------------------------ plugin objects */

typedef struct nxrt_plugin nxrt_plugin;         /* plugin: one instance per negotiation */
typedef struct nxrt_ep_session nxrt_ep_session; /* plugin: one device + options */
typedef struct nxrt_kernel nxrt_kernel;         /* plugin: a bound node or compiled group */
typedef struct nxrt_stream nxrt_stream;         /* plugin: ordered work queue */
typedef struct nxrt_event nxrt_event;           /* plugin: a point in a stream */

/* A key/value pair: session options, run options, device properties. */
typedef struct nxrt_option {
  uint32_t struct_size;
  const char* key;
  const char* value;
} nxrt_option;
typedef nxrt_option nxrt_property;

/* Typed option schema: a plugin declares every option it reads. */
typedef uint32_t nxrt_option_type;
enum {
  NXRT_OPTION_STRING = 0,
  NXRT_OPTION_INT = 1,   /* decimal, optionally signed, fits int64 */
  NXRT_OPTION_FLOAT = 2, /* decimal or scientific */
  NXRT_OPTION_BOOL = 3,  /* "0", "1", "true", "false" */
  NXRT_OPTION_PATH = 4   /* a file-system path; may not exist yet */
};
typedef struct nxrt_option_info {
  uint32_t struct_size;
  nxrt_option_type type;
  const char* name;          /* full key, "<plugin name>.<key>", e.g. "vulkan.pipeline_cache" */
  const char* default_value; /* as text; "" when the option has no default */
  const char* help;          /* one line */
} nxrt_option_info;

typedef uint32_t nxrt_device_kind;
enum {
  NXRT_DEVICE_CPU = 0,
  NXRT_DEVICE_GPU = 1,
  NXRT_DEVICE_NPU = 2,
  NXRT_DEVICE_OTHER = 3
};

/* Filled by the plugin (callee-filled rule). Strings and the property array
 * live as long as the plugin instance. */
typedef struct nxrt_device_info {
  uint32_t struct_size;
  nxrt_device_kind kind;
  const char* name;
  const char* vendor;
  uint32_t vendor_id; /* PCI vendor id, 0 if none */
  uint32_t device_id; /* PCI device id, 0 if none */
  uint8_t uuid[16];   /* all zero if unknown; the host shows equal uuids as one device */
  uint64_t memory_bytes;      /* total device memory */
  uint64_t memory_free_bytes; /* free now, where the driver knows; 0 if unknown */
  uint64_t dtypes;            /* bit (1 << nxrt_dtype) for each element type kernels accept */
  /* Nonzero when NXRT_MEMORY_DEVICE handles are host pointers (CPU-like):
   * the host may then read and write them directly and skips transfers. */
  uint32_t host_addressable;
  uint32_t property_count;
  const nxrt_property* const* properties; /* free-form: limits, subgroup size, driver... */
  const char* pci_bus_id; /* "dddd:bb:dd.f", or NULL/"" if none */
} nxrt_device_info;

/* One contiguous copy. Host memory: handle is a pointer. Device memory: the
 * plugin's allocation handle. Offsets are in bytes. */
typedef struct nxrt_copy_region {
  uint32_t struct_size;
  nxrt_memory_kind src_memory;
  nxrt_memory_kind dst_memory;
  uint32_t reserved0; /* 0; keeps the 64-bit fields 8-aligned on ILP32 */
  const void* src;
  void* dst;
  uint64_t src_offset;
  uint64_t dst_offset;
  uint64_t bytes;
} nxrt_copy_region;

/* Per-run options handed to on_run_start. */
typedef struct nxrt_run_options {
  uint32_t struct_size;
  uint32_t profiling;    /* nonzero: report device timings to on_run_end's sink */
  uint64_t run_id;       /* unique per run of one host session; on_run_end gets the same id */
  size_t option_count;
  const nxrt_option* const* options; /* "<plugin name>.<key>" entries for this plugin */
} nxrt_run_options;

/* ------------------------------------------------------- host services */

typedef uint32_t nxrt_log_level;
enum {
  NXRT_LOG_DEBUG = 0,
  NXRT_LOG_INFO = 1,
  NXRT_LOG_WARNING = 2,
  NXRT_LOG_ERROR = 3
};

/* Provided by the host; valid from negotiation until the instance's shutdown
 * returns. Every function is [any-thread]. Getters given an out-of-range index
 * or a NULL handle return 0 / NULL (index getters: NXRT_NO_INDEX) rather than
 * failing. */
typedef struct nxrt_host_services {
  uint32_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;

  /* statuses. status_create never returns NULL: when it cannot allocate it
   * returns a static out-of-memory status (releasing it is a no-op). */
  nxrt_status* (*status_create)(nxrt_status_code code, int retryable, const char* message);
  void (*status_release)(nxrt_status* status);
  nxrt_status_code (*status_code)(const nxrt_status* status);
  const char* (*status_message)(const nxrt_status* status);
  int (*status_retryable)(const nxrt_status* status);

  void (*log)(nxrt_log_level level, const char* plugin_name, const char* message);

  /* graph. A graph view is the whole model, a control-flow body, or the
   * subgraph of one claim (kernel_create). Node indices are those of the whole
   * graph the view belongs to, so claims name nodes the same way in both. */
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

  size_t (*node_index)(const nxrt_node* n); /* NXRT_NO_INDEX for NULL */
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
  /* A TENSOR attribute as a host-memory tensor (callee-filled rule). */
  nxrt_status* (*attribute_tensor)(const nxrt_attribute* a, nxrt_const_tensor* out);
  /* A GRAPH attribute (an If branch, a Loop or Scan body) as a view: its nodes
   * (indexed within the body), its formal inputs and outputs. A body node may
   * read values of enclosing graphs: such an input has no producer in the body
   * and is not one of its graph inputs. Valid as long as the enclosing view. */
  nxrt_status* (*attribute_graph)(const nxrt_attribute* a, const nxrt_graph** out);

  const char* (*value_name)(const nxrt_value* v);
  nxrt_dtype (*value_dtype)(const nxrt_value* v);
  /* -1 when the rank is unknown. */
  int64_t (*value_rank)(const nxrt_value* v);
  /* rank entries; -1 for a dimension not known before run time. */
  const int64_t* (*value_dims)(const nxrt_value* v);
  /* Nonzero for an initializer or a Constant's output: data known at load. */
  int (*value_is_constant)(const nxrt_value* v);
  /* The constant's data as a host tensor (callee-filled rule); NXRT_NOT_FOUND
   * when v is not a constant. */
  nxrt_status* (*value_constant)(const nxrt_value* v, nxrt_const_tensor* out);
  /* The node of `g` that produces v; NULL for inputs, constants and values made
   * by nodes outside the view. */
  const nxrt_node* (*value_producer)(const nxrt_graph* g, const nxrt_value* v);
  /* The nodes of `g` that read v (a node once per use), and whether v is an
   * output of the whole graph (then something outside any view reads it). */
  size_t (*value_consumer_count)(const nxrt_graph* g, const nxrt_value* v);
  const nxrt_node* (*value_consumer)(const nxrt_graph* g, const nxrt_value* v, size_t i);
  int (*value_is_graph_output)(const nxrt_value* v);

  /* claims (get_capability only). `cost` is the plugin's relative estimate,
   * 0 if unknown. A group of more than one node requires NXRT_FEATURE_FUSED_GROUPS;
   * its nodes must be distinct and exist in the view. The view hides nodes other EPs
   * took, so the host keeps a convex group whole and splits any other into runs that
   * are consecutive in the model's topological order; kernel_create then sees each part. */
  nxrt_status* (*claim_nodes)(nxrt_claim_sink* sink, const size_t* node_indices, size_t count,
                              double cost);
  nxrt_status* (*refuse_node)(nxrt_claim_sink* sink, size_t node_index, nxrt_refusal reason,
                              const char* message);

  /* kernel_create (and kernel_import) only, on the graph it received: the kernel keeps its own copy of
   * constant input `v` (prepacked weights, say) and will never read v's data again.
   * ctx_input then gives v's dtype and dims with data = NULL, and the host may free
   * its copy once nothing else needs it, so weights live once in memory. Fails with
   * NXRT_INVALID_ARGUMENT if v is not a constant input of g or g is not being created. */
  nxrt_status* (*graph_capture_constant)(const nxrt_graph* g, const nxrt_value* v);

  /* kernel context (kernel_compute only). Inputs and outputs follow the order
   * of the kernel's subgraph view. An absent optional input gives
   * NXRT_NOT_FOUND. Inputs are read-only. Outputs are bound with the shape the
   * kernel computed; the host hands back memory of the kernel's session
   * (planned or allocated). Each output may be bound once per call. */
  size_t (*ctx_input_count)(const nxrt_kernel_context* ctx);
  nxrt_status* (*ctx_input)(const nxrt_kernel_context* ctx, size_t i, nxrt_const_tensor* out);
  size_t (*ctx_output_count)(const nxrt_kernel_context* ctx);
  nxrt_status* (*ctx_output)(nxrt_kernel_context* ctx, size_t i, nxrt_dtype dtype, uint32_t rank,
                             const int64_t* dims, nxrt_tensor* out);
  /* The stream the work must be ordered on; NULL for plugins without
   * NXRT_FEATURE_STREAMS (then compute must be complete on return). */
  nxrt_stream* (*ctx_stream)(const nxrt_kernel_context* ctx);
  /* Nonzero once the caller asked to cancel this run; long kernels poll it. */
  int (*ctx_cancelled)(const nxrt_kernel_context* ctx);
  /* The run this call belongs to (nxrt_run_options.run_id). */
  uint64_t (*ctx_run_id)(const nxrt_kernel_context* ctx);

  /* on_run_end only, when the run was profiled: one kernel's device-side time,
   * in nanoseconds on the device's own clock (the host aligns the clocks).
   * `node_index` names the kernel by its first node; `name` is free text. */
  nxrt_status* (*profile_device_event)(nxrt_profile_sink* sink, size_t node_index, const char* name,
                                       uint64_t device_start_ns, uint64_t device_end_ns);

  /* ---- 2.3 (present when struct_size reaches it) ---- */

  /* kernel_compute only, on an output already bound with dtype STRING (ctx_output
   * hands it back with every element empty): sets element `element` to a copy of
   * `size` bytes at `bytes` (NULL allowed when size is 0). The host owns the copy
   * until the run ends (graph outputs: as long as the caller keeps them).
   * NXRT_INVALID_ARGUMENT for an unbound or non-string output or an element out of
   * range. Writing nxrt_string elements directly is allowed only with strings the
   * kernel was handed in this run (see nxrt_string). */
  nxrt_status* (*ctx_output_string_set)(nxrt_kernel_context* ctx, size_t i, uint64_t element,
                                        const char* bytes, uint64_t size);
} nxrt_host_services;

/* ------------------------------------------------------- plugin table */

/* Optional parts, declared rather than guessed from NULL pointers. A declared
 * feature guarantees its functions are non-NULL, an undeclared one that they
 * are NULL; conformance checks both ways. Each bit belongs to the minor that
 * defined it; the host masks off bits the agreed minor does not define. */
#define NXRT_FEATURE_FUSED_GROUPS (1ull << 0)   /* 2.0: may claim multi-node groups */
#define NXRT_FEATURE_STREAMS (1ull << 1)        /* 2.0: stream_* and event_* are implemented */
#define NXRT_FEATURE_CONCURRENT_RUN (1ull << 2) /* 2.0: kernel_compute may run concurrently on one kernel */
#define NXRT_FEATURE_RUN_HOOKS (1ull << 3)      /* 2.0: on_run_start / on_run_end are implemented */
#define NXRT_FEATURE_DEVICE_PROFILING (1ull << 4) /* 2.0: on_run_end reports device timings (needs RUN_HOOKS) */

#define NXRT_FEATURES_2_0                                                                         \
  (NXRT_FEATURE_FUSED_GROUPS | NXRT_FEATURE_STREAMS | NXRT_FEATURE_CONCURRENT_RUN |              \
   NXRT_FEATURE_RUN_HOOKS | NXRT_FEATURE_DEVICE_PROFILING)
/* Every bit defined by major 2 up to `minor` (a constant expression). A new
 * minor N adds its bits here: ((minor) >= N ? NXRT_FEATURES_2_N : 0). */
/* 2.1: native_handle is implemented (at least DEVICE and MEMORY objects). */
#define NXRT_FEATURE_NATIVE_HANDLES (1ull << 5)
/* 2.1: stream_import is implemented (needs STREAMS and NATIVE_HANDLES; native_handle
 * then answers STREAM objects too). */
#define NXRT_FEATURE_STREAM_IMPORT (1ull << 6)
/* 2.1: session_set_allocator is implemented. */
#define NXRT_FEATURE_EXTERNAL_ALLOCATOR (1ull << 7)
/* 2.1: session_stats is implemented. */
#define NXRT_FEATURE_MEMORY_STATS (1ull << 8)
/* 2.1: copy_peer is implemented. */
#define NXRT_FEATURE_PEER_COPY (1ull << 9)
#define NXRT_FEATURES_2_1                                                                         \
  (NXRT_FEATURE_NATIVE_HANDLES | NXRT_FEATURE_STREAM_IMPORT | NXRT_FEATURE_EXTERNAL_ALLOCATOR |   \
   NXRT_FEATURE_MEMORY_STATS | NXRT_FEATURE_PEER_COPY)
/* 2.2: memory_import is implemented. The bit says the session may import; which
 * native types and which memories it can take, memory_import answers per call. */
#define NXRT_FEATURE_MEMORY_IMPORT (1ull << 10)
#define NXRT_FEATURES_2_2 (NXRT_FEATURE_MEMORY_IMPORT)
/* 2.3: the plugin's kernels take and make STRING tensors (nxrt_string elements in
 * host memory) and may claim nodes that read or write them; only sessions whose
 * memory is host-addressable may. Without it the host never places a node that
 * touches a string on the plugin. */
#define NXRT_FEATURE_STRING_TENSORS (1ull << 11)
#define NXRT_FEATURES_2_3 (NXRT_FEATURE_STRING_TENSORS)
/* 2.4: session_fingerprint, cache_check, kernel_export and kernel_import are
 * implemented: compiled kernels survive the process (docs/abi.md, "Compiled-model
 * cache"). */
#define NXRT_FEATURE_KERNEL_CACHE (1ull << 12)
/* 2.4: session_create_offline is implemented (needs KERNEL_CACHE): the plugin
 * compiles for a described device without opening one. */
#define NXRT_FEATURE_OFFLINE_COMPILE (1ull << 13)
#define NXRT_FEATURES_2_4 (NXRT_FEATURE_KERNEL_CACHE | NXRT_FEATURE_OFFLINE_COMPILE)
#define NXRT_FEATURES_OF_MINOR(minor)                                                             \
  (NXRT_FEATURES_2_0 | ((minor) >= 1u ? NXRT_FEATURES_2_1 : 0u) | ((minor) >= 2u ? NXRT_FEATURES_2_2 : 0u) | \
   ((minor) >= 3u ? NXRT_FEATURES_2_3 : 0u) | ((minor) >= 4u ? NXRT_FEATURES_2_4 : 0u))

/* ------------------------------------------------------- kernel cache (2.4) */

/* How usable something compiled elsewhere (another process, machine, plugin or
 * driver version) is in this session. */
typedef uint32_t nxrt_cache_verdict;
enum {
  NXRT_CACHE_OPTIMAL = 0,     /* as good as compiling it here */
  NXRT_CACHE_USABLE = 1,      /* runs correctly, but compiling here would be faster (reason says why) */
  NXRT_CACHE_RECOMPILE = 2,   /* must not be used here; compile instead (reason says why) */
  NXRT_CACHE_UNSUPPORTED = 3  /* not something this plugin can read (foreign format, corrupt) */
};

/* Callee-filled rule. `reason` is NUL-terminated, one line, "" for OPTIMAL. */
typedef struct nxrt_cache_judgement {
  uint32_t struct_size;
  nxrt_cache_verdict verdict;
  char reason[256];
} nxrt_cache_judgement;

/* Where kernel_export writes: `write` appends `size` bytes (the host copies them
 * before it returns). A failing write's status is returned by kernel_export as is. */
typedef struct nxrt_blob_writer {
  uint32_t struct_size;
  void* user;
  nxrt_status* (*write)(void* user, const void* bytes, uint64_t size);
} nxrt_blob_writer;

/* Blobs handed to kernel_import start at a multiple of this many bytes in the host's
 * memory (often a read-only file mapping), so aligned data inside a blob stays aligned. */
#define NXRT_CACHE_BLOB_ALIGNMENT 4096u


typedef struct nxrt_plugin_api {
  uint32_t struct_size;

  /* identity; static strings */
  const char* name;    /* short EP name used in --ep lists: "cpu", "vulkan" */
  const char* version; /* the plugin's own release, semver */

  /* [load-time] Releases this instance and everything it made (call it after
   * every session of the instance was released). Other instances live on. */
  void (*shutdown)(nxrt_plugin* plugin);

  /* devices. [any-thread] */
  nxrt_status* (*device_count)(nxrt_plugin* plugin, uint32_t* count);
  /* When device_count reports 0: why (driver missing, no adapter...). Lives as
   * long as the instance. */
  const char* (*no_device_reason)(nxrt_plugin* plugin);
  /* Callee-filled rule on `info`. */
  nxrt_status* (*device_info)(nxrt_plugin* plugin, uint32_t index, nxrt_device_info* info);

  /* option schema. [any-thread] Every option the plugin reads, by index in
   * [0, option_count); callee-filled rule. Strings are static. */
  uint32_t (*option_count)(nxrt_plugin* plugin);
  nxrt_status* (*option_info)(nxrt_plugin* plugin, uint32_t index, nxrt_option_info* info);

  /* sessions: one device with options. [any-thread]
   * The host validates options against the schema before the call, so a
   * plugin sees only keys it declared (with values of the declared type) plus
   * the host's own un-prefixed keys: "threads" (intra-op thread count, "0" =
   * plugin default). Un-prefixed keys the plugin does not know are ignored (a
   * newer host may pass keys of its own). A plugin still fails with
   * INVALID_ARGUMENT naming the key on an out-of-range value or an undeclared
   * "<name>." key. */
  nxrt_status* (*session_create)(nxrt_plugin* plugin, uint32_t device_index,
                                 const nxrt_option* const* options, size_t option_count,
                                 nxrt_ep_session** out);
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
  nxrt_status* (*copy)(nxrt_ep_session* session, const nxrt_copy_region* const* regions,
                       size_t count, nxrt_stream* stream);

  /* streams and events (NXRT_FEATURE_STREAMS). A stream: [per-object]. */
  nxrt_status* (*stream_create)(nxrt_ep_session* session, nxrt_stream** out);
  nxrt_status* (*stream_synchronize)(nxrt_stream* stream); /* waits for all work queued so far */
  void (*stream_release)(nxrt_stream* stream);
  nxrt_status* (*event_create)(nxrt_ep_session* session, nxrt_event** out);
  nxrt_status* (*event_record)(nxrt_event* event, nxrt_stream* stream);
  nxrt_status* (*stream_wait_event)(nxrt_stream* stream, nxrt_event* event); /* device-side wait */
  nxrt_status* (*event_synchronize)(nxrt_event* event); /* host-side wait */
  void (*event_release)(nxrt_event* event);

  /* run hooks (NXRT_FEATURE_RUN_HOOKS). [any-thread] Called once per run for
   * each EP session with kernels in the run, on the run's thread: start before
   * its first kernel or copy, end after its last one completed (streams
   * synchronized), with the run's status (NULL: success; read-only, owned by
   * the host). Runs on one session may overlap; run_id tells them apart.
   * `sink` is non-NULL when the run is profiled and the plugin declares
   * NXRT_FEATURE_DEVICE_PROFILING. A failing on_run_start fails the run;
   * on_run_end's failure is reported when the run itself succeeded. */
  nxrt_status* (*on_run_start)(nxrt_ep_session* session, const nxrt_run_options* options);
  nxrt_status* (*on_run_end)(nxrt_ep_session* session, uint64_t run_id, const nxrt_status* run_status,
                             nxrt_profile_sink* sink);

  /* ---- 2.1 ---- */

  /* native handles (NXRT_FEATURE_NATIVE_HANDLES). [any-thread] Callee-filled
   * rule on `out`. The handles belong to the plugin and stay valid as long as
   * the object they describe; the caller never destroys them. NXRT_UNSUPPORTED
   * for an object kind the plugin has no native handle for. */
  nxrt_status* (*native_handle)(nxrt_ep_session* session, nxrt_native_object what, const void* object,
                                nxrt_native_handle* out);
  /* A stream ordered after the caller's native work (NXRT_FEATURE_STREAM_IMPORT).
   * [any-thread] Vulkan: a VULKAN_TIMELINE on the session's VkDevice; the
   * stream's first work waits for `value`, and the stream then signals
   * value+1, value+2... on that semaphore, so native_handle(STREAM) gives the
   * point to wait for. The semaphore stays the caller's and must outlive the
   * stream. CUDA: a CUDA_STREAM, work is enqueued on it. Released with
   * stream_release, which does not destroy the native object. */
  nxrt_status* (*stream_import)(nxrt_ep_session* session, const nxrt_native_handle* native, nxrt_stream** out);
  /* [load-time for the session: right after session_create, before any other
   * call on it] (NXRT_FEATURE_EXTERNAL_ALLOCATOR). From then on every backing
   * allocation of device and pinned memory goes through `allocator`; the struct
   * is copied, the allocator itself must outlive the session. */
  nxrt_status* (*session_set_allocator)(nxrt_ep_session* session, const nxrt_device_allocator* allocator);
  /* [any-thread] (NXRT_FEATURE_MEMORY_STATS). Callee-filled rule on `out`. */
  nxrt_status* (*session_stats)(nxrt_ep_session* session, nxrt_memory_stats* out);
  /* [any-thread] (NXRT_FEATURE_PEER_COPY). Copies from DEVICE memory of `src_session`
   * to DEVICE memory of `dst_session`, two sessions of the same plugin instance (on the
   * same or different devices), without the host touching the bytes. The source must be
   * complete (its producer's stream synchronized). With a stream of dst_session the
   * copies are ordered on it, else complete on return. NXRT_UNSUPPORTED when this pair
   * of sessions cannot: the host then stages through host memory. */
  nxrt_status* (*copy_peer)(nxrt_ep_session* dst_session, nxrt_ep_session* src_session,
                            const nxrt_copy_region* const* regions, size_t count, nxrt_stream* stream);

  /* ---- 2.2 ---- */

  /* [any-thread] (NXRT_FEATURE_MEMORY_IMPORT). Wraps memory the session did not
   * allocate as a DEVICE handle of this session, without copying: `native` is
   * the caller's or another plugin's memory (HOST_POINTER with `size`; a
   * VULKAN_BUFFER with aux0 = its VkDevice, value 0 and `size`; a CUDA_POINTER),
   * as native_handle(MEMORY) describes it. The handle is used like one from
   * memory_alloc (kernels, copies, native_handle) and released with memory_free,
   * which drops the wrapping only: the memory stays its owner's, who keeps it
   * alive and unchanged-in-place until then. Imported bytes are not counted as
   * allocated in session_stats. NXRT_UNSUPPORTED (with the reason) for memory
   * this session cannot use: another type, another device, misaligned host
   * memory; the host then copies instead. */
  nxrt_status* (*memory_import)(nxrt_ep_session* session, const nxrt_native_handle* native, void** handle);

  /* ---- 2.4 ---- */

  /* Compiled-kernel cache (NXRT_FEATURE_KERNEL_CACHE). The host owns the container
   * (header, digests of the model and options, checksums; docs/abi.md); a plugin
   * only writes and judges its own blobs. */

  /* [any-thread] What this session's compiled kernels depend on, as one line of text
   * the plugin can judge later: device identity and limits, driver, ISA, options that
   * change code. Sessions for equal devices (opened or described) give equal text.
   * Lives as long as the session. */
  const char* (*session_fingerprint)(nxrt_ep_session* session);
  /* [any-thread] Judges kernels compiled by a session whose session_fingerprint was
   * `fingerprint` for use in this session (callee-filled `out`). A failure status is
   * for the call itself; an unusable fingerprint is a verdict, not a failure. */
  nxrt_status* (*cache_check)(nxrt_ep_session* session, const char* fingerprint, nxrt_cache_judgement* out);
  /* [per-object] Writes what rebuilds `kernel` without compiling it again (prepacked
   * weights, compiled code, tile choices) through `writer`. NXRT_UNSUPPORTED: this
   * kernel has nothing worth keeping (the host then compiles it again next time). */
  nxrt_status* (*kernel_export)(nxrt_kernel* kernel, const nxrt_blob_writer* writer);
  /* [any-thread] Rebuilds the kernel of `subgraph` (the claim it was exported from,
   * in a session whose fingerprint cache_check accepted) from `blob`. The blob starts
   * NXRT_CACHE_BLOB_ALIGNMENT-aligned and stays valid and unchanged until the kernel
   * is released, so the kernel may keep pointers into it instead of copies. The
   * verdict goes to `judgement` (callee-filled): with OPTIMAL or USABLE, *out is the
   * kernel; with RECOMPILE or UNSUPPORTED (a blob this plugin cannot trust: corrupt,
   * truncated, another claim, another version) *out stays NULL and the host calls
   * kernel_create instead. A blob never crashes the plugin, whatever its bytes. */
  nxrt_status* (*kernel_import)(nxrt_ep_session* session, const nxrt_graph* subgraph, const void* blob,
                                uint64_t size, nxrt_cache_judgement* judgement, nxrt_kernel** out);
  /* [any-thread] (NXRT_FEATURE_OFFLINE_COMPILE) A compile-only session for a device
   * that is described, not opened: `device` holds what `nxrt plugins --json` prints for
   * one of this plugin's devices, as key/value text ("name", "vendor_id", "device_id",
   * "uuid", "host_addressable", and every device property by its key). The session's
   * kernels are compiled as for that device and can be exported; the session answers
   * session_fingerprint, get_capability, kernel_create, kernel_export, kernel_release
   * and session_release only (every other call fails with NXRT_UNSUPPORTED, and
   * kernel_compute is never called). NXRT_INVALID_ARGUMENT names a missing or
   * malformed key; NXRT_UNSUPPORTED says why this plugin cannot target that device. */
  nxrt_status* (*session_create_offline)(nxrt_plugin* plugin, const nxrt_property* const* device, size_t device_count,
                                         const nxrt_option* const* options, size_t option_count,
                                         nxrt_ep_session** out);

  /* ---- 2.5 ---- */

  /* [any-thread] How `kernel` computes, as one line for people and tools (`nxrt
   * inspect`): the algorithm, tile, layout or ISA the plugin chose for its node or
   * group, e.g. "winograd F(4x4,3x3), avx512f" or "im2col + gemm 8x48". Valid UTF-8
   * without control characters, at most NXRT_KERNEL_DESCRIPTION_MAX bytes (the host
   * cuts longer text). NULL or "": nothing to say. The string is the plugin's and lives
   * as long as the kernel. Optional: the pointer may be NULL (no feature bit). */
  const char* (*kernel_describe)(nxrt_kernel* kernel);
} nxrt_plugin_api;

#define NXRT_KERNEL_DESCRIPTION_MAX 200u

/* ------------------------------------------------------------ handshake */

/* Frozen prefix: struct_size..host never move in any major. */
typedef struct nxrt_negotiate_request {
  uint32_t struct_size;
  uint32_t abi_major; /* the host's major */
  uint32_t abi_minor; /* the newest minor the host speaks */
  const nxrt_host_services* host;
  /* 2.0 */
  const char* library_path; /* the plugin's own file as loaded (find data files beside it) */
  const char* host_name;    /* "nxrt", "nxrt-conformance", ... */
  const char* host_version; /* the host's release, semver */
} nxrt_negotiate_request;

/* Frozen prefix: struct_size..message never move in any major. Callee-filled. */
typedef struct nxrt_negotiate_reply {
  uint32_t struct_size;
  uint32_t abi_major;  /* agreed: equal to the request's */
  uint32_t abi_minor;  /* agreed: min(host minor, plugin minor) */
  char message[256];   /* NUL-terminated refusal reason when the call fails */
  uint32_t reserved0;  /* 0; pins `features` at offset 272 on every data model */
  uint64_t features;   /* NXRT_FEATURE_* bits */
  const nxrt_plugin_api* api; /* immutable table, valid while the library is loaded */
  nxrt_plugin* plugin;        /* the new instance; released by api->shutdown */
} nxrt_negotiate_reply;

/* [any-thread] Returns NXRT_OK and fills `reply` with a new instance, or a
 * nonzero nxrt_status_code with `reply->message` set (NXRT_VERSION_MISMATCH for
 * an unsupported major, naming both majors). */
typedef int32_t (*nxrt_ep_negotiate_fn)(const nxrt_negotiate_request* request,
                                       nxrt_negotiate_reply* reply);

NXRT_EP_EXPORT int32_t nxrt_ep_negotiate(const nxrt_negotiate_request* request,
                                         nxrt_negotiate_reply* reply);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NXRT_EP_H */
