/*
 * nxrt embedding API (C). Load EP plugins, load an ONNX model, run it.
 *
 * Errors: functions returning nxrt_error* return NULL on success; the caller
 * frees a non-NULL error with nxrt_error_release. Strings returned by getters
 * live as long as the object they came from.
 * Threads: nxrt_session_run may be called from many threads at once on one
 * session; every other function on one object must not race with itself.
 */
#ifndef NXRT_H
#define NXRT_H

#include <stddef.h>
#include <stdint.h>

#include <nxrt_native.h> /* native handles, external allocators, memory stats (shared with the EP ABI) */

#ifdef __cplusplus
extern "C" {
#endif

#define NXRT_API __attribute__((visibility("default")))

typedef struct nxrt_error nxrt_error;
typedef struct nxrt_env nxrt_env;
typedef struct nxrt_model nxrt_model;
typedef struct nxrt_session nxrt_session;
typedef struct nxrt_outputs nxrt_outputs;

typedef enum nxrt_error_code {
  NXRT_ERR_INVALID_ARGUMENT = 1, /* bad input: shape, dtype, name, option */
  NXRT_ERR_NOT_FOUND = 2,        /* file, plugin, EP or device missing */
  NXRT_ERR_UNSUPPORTED = 3,      /* nodes no requested EP claims, or a tensor type the host lacks */
  NXRT_ERR_MODEL = 4,            /* corrupt or invalid model */
  NXRT_ERR_PLUGIN = 5,           /* plugin failed to load, negotiate, create a claimed kernel or run */
  NXRT_ERR_BUSY = 6,             /* e.g. unregistering a plugin still in use */
  NXRT_ERR_RUNTIME = 7,          /* anything else during execution */
  NXRT_ERR_RESOURCE_EXHAUSTED = 8 /* over the session's device memory limit, or the device is out of memory */
} nxrt_error_code;

/* The product version, e.g. "0.1.0" (also sent to plugins as the host's release). */
NXRT_API const char* nxrt_version(void);
/* The EP plugin ABI this library speaks (nxrt_ep.h): 2 and 0 for ABI 2.0. */
NXRT_API uint32_t nxrt_ep_abi_major(void);
NXRT_API uint32_t nxrt_ep_abi_minor(void);

/* A key/value pair: EP options of a session, options of a run. */
typedef struct nxrt_key_value {
  const char* key;
  const char* value;
} nxrt_key_value;

NXRT_API nxrt_error_code nxrt_error_code_of(const nxrt_error* e);
NXRT_API const char* nxrt_error_message(const nxrt_error* e);
NXRT_API void nxrt_error_release(nxrt_error* e);

/* ------------------------------------------------------------ plugins */

/* Creates an environment and discovers plugins: libnxrt_ep_*.so next to the
 * running executable and next to libnxrt, then each folder of
 * NXRT_PLUGIN_PATH (colon-separated). A plugin that fails to load is listed
 * with its error, not fatal. */
NXRT_API nxrt_error* nxrt_env_create(nxrt_env** out);
/* Same without any discovery: only explicitly registered plugins. */
NXRT_API nxrt_error* nxrt_env_create_empty(nxrt_env** out);
NXRT_API void nxrt_env_release(nxrt_env* env);

/* Loads and negotiates a plugin library; on success *name_out (may be NULL)
 * points at its EP name, valid until unregistered. Registering a name that is
 * already registered replaces nothing and fails with NXRT_ERR_BUSY. */
NXRT_API nxrt_error* nxrt_env_register_plugin(nxrt_env* env, const char* path, const char** name_out);
/* Unloads a plugin. Fails with NXRT_ERR_BUSY while a session uses it. */
NXRT_API nxrt_error* nxrt_env_unregister_plugin(nxrt_env* env, const char* name);

typedef struct nxrt_plugin_info {
  const char* path;
  const char* name;      /* EP name, or the file stem if loading failed */
  const char* version;   /* plugin release, "" if not loaded */
  uint32_t abi_major, abi_minor; /* negotiated */
  uint64_t features;     /* NXRT_FEATURE_* bits of nxrt_ep.h, masked to the negotiated minor */
  int loaded;            /* 0: see error */
  const char* error;     /* why it could not load, "" if loaded. A plugin of another ABI major:
                            "plugin 'F' is built for nxrt EP ABI 1.x; this host speaks 2.0
                            (rebuild it against the 2.x header)[: its own message]" */
  uint32_t device_count;
  const char* no_device_reason; /* "" when devices exist */
} nxrt_plugin_info;

/* The name of one feature bit of nxrt_plugin_info.features: "fused-groups", "streams",
 * "concurrent-run", "run-hooks", "device-profiling" (2.0), "native-handles", "stream-import",
 * "external-allocator", "memory-stats", "peer-copy" (2.1), "memory-import" (2.2), "string-tensors"
 * (2.3); "" for a bit this host does not know. */
NXRT_API const char* nxrt_feature_name(uint64_t feature_bit);

NXRT_API size_t nxrt_env_plugin_count(const nxrt_env* env);
NXRT_API nxrt_error* nxrt_env_plugin_info(const nxrt_env* env, size_t index, nxrt_plugin_info* out);
/* Device description as "key: value" lines (kind, name, vendor, pci, pci_bus_id, uuid,
 * memory, memory_free, host_addressable, dtypes, properties), and a last line
 * "same device as EP:N" when an earlier-listed plugin offers the same physical
 * device (equal non-zero uuid). */
NXRT_API nxrt_error* nxrt_env_device_description(const nxrt_env* env, size_t plugin_index, uint32_t device,
                                                 const char** text);
/* The same physical device offered earlier in the list: *plugin_index_out and *device_out
 * name it and the call returns 1; 0 when this device is the first (or its uuid unknown). */
/* A device's description as key/value text, property i of count: "kind", "name", "vendor",
 * "vendor_id", "device_id" (decimal), "uuid", "memory_bytes", "host_addressable" ("1"/"0"),
 * "pci_bus_id", "dtypes", then each property the plugin reports under its own key. It is what
 * `nxrt plugins --json` prints per device and what nxrt_model_compile takes as a target. */
NXRT_API size_t nxrt_env_device_property_count(const nxrt_env* env, size_t plugin_index, uint32_t device);
NXRT_API nxrt_error* nxrt_env_device_property(const nxrt_env* env, size_t plugin_index, uint32_t device, size_t i,
                                              nxrt_key_value* out);
NXRT_API int nxrt_env_device_same_as(const nxrt_env* env, size_t plugin_index, uint32_t device,
                                     size_t* plugin_index_out, uint32_t* device_out);

/* A plugin's option schema: every session option it reads. */
typedef struct nxrt_option_schema_entry {
  const char* name;          /* full key, "<ep>.<key>", e.g. "vulkan.pipeline_cache" */
  const char* type;          /* "string", "int", "float", "bool" or "path" */
  const char* default_value; /* "" when none */
  const char* help;          /* one line */
} nxrt_option_schema_entry;

NXRT_API size_t nxrt_env_plugin_option_count(const nxrt_env* env, size_t plugin_index);
NXRT_API nxrt_error* nxrt_env_plugin_option(const nxrt_env* env, size_t plugin_index, size_t option_index,
                                            nxrt_option_schema_entry* out);

/* -------------------------------------------------------------- models */

/* Loads, checks (onnx checker) and shape-infers a model. External data must
 * stay inside the model's folder. `path` may also name a compiled model (`nxrt compile`,
 * docs/abi.md "Compiled-model cache"): its graph is loaded without the checker or shape
 * inference (both ran when it was compiled), and sessions import its kernels when their
 * settings match the ones it was compiled with. */
NXRT_API nxrt_error* nxrt_model_load(const char* path, nxrt_model** out);
/* The same with a compiled-model cache folder: an entry there made from this file's bytes
 * gives the graph without parsing it, and sessions made from the model use the folder as
 * their "cache_dir" (see nxrt_session_options.ep_options) unless they name another. A
 * missing, stale, foreign or corrupt entry is never trusted: the model is parsed. */
NXRT_API nxrt_error* nxrt_model_load_cached(const char* path, const char* cache_dir, nxrt_model** out);
NXRT_API nxrt_error* nxrt_model_load_bytes(const void* data, size_t size, nxrt_model** out);
NXRT_API void nxrt_model_release(nxrt_model* model);

/* Graph optimization levels (docs/architecture.md lists every pass with its level).
 * Level N of `nxrt --opt N` is NXRT_OPT_LEVEL_0 + N; zero is the default, so options
 * written before this field existed keep their meaning. */
typedef enum nxrt_opt_level {
  NXRT_OPT_DEFAULT = 0, /* the highest exact level: 2 */
  NXRT_OPT_LEVEL_0 = 1, /* none */
  NXRT_OPT_LEVEL_1 = 2, /* bit-exact: no-op removal, shape and constant folding, CSE, dead nodes */
  NXRT_OPT_LEVEL_2 = 3, /* + MatMul+Add -> Gemm, BatchNormalization into Conv (same math, rounding may differ) */
  NXRT_OPT_LEVEL_3 = 4  /* + LayerNorm / GELU / attention offered to plugins as claimable groups */
} nxrt_opt_level;

/* Optimizes the model in place at `level` (an nxrt_opt_level), folding constants on the
 * env's CPU plugin (skipped, and said so in the log, without one). Sessions made from the
 * model before keep the graph they were made from. */
NXRT_API nxrt_error* nxrt_model_optimize(nxrt_env* env, nxrt_model* model, int level);
/* Writes the model's current graph as an ONNX file (initializers inline). */
NXRT_API nxrt_error* nxrt_model_save(const nxrt_model* model, const char* path);
/* What the optimizer did to the model, one line per pass; "" if it never ran. */
NXRT_API const char* nxrt_model_optimization_log(const nxrt_model* model);

/* ------------------------------------------------------------ sessions */

typedef struct nxrt_session_options {
  const char* eps;        /* ordered EP names, comma-separated: "vulkan,cpu"; "auto": plugins
                             whose first device is an accelerator, then cpu, with fallback */
  int fallback;           /* nonzero: nodes no listed EP claims go to any loaded EP that claims them */
  int threads;            /* intra-op threads, 0 = plugin default */
  uint32_t device;        /* device index for every EP */
  /* EP options, "<ep>.<key>" = value (e.g. "vulkan.pipeline_cache" = "/tmp/pc.bin"), and the
   * host's own un-prefixed "threads" (overrides `threads`) and "cache_dir" (a compiled-model
   * cache folder: kernels are imported from its entry for this model and these settings,
   * and the entry is written when missing or stale; nxrt_session_load_report says which). Checked against each plugin's
   * option schema before any EP session is opened: an unknown key, a value of the wrong
   * type (int, float, bool) or an EP that is not in the list (nor, with fallback, loaded)
   * fails with NXRT_ERR_INVALID_ARGUMENT naming the key, the EP and its known keys.
   * May be NULL when ep_option_count is 0. */
  const nxrt_key_value* ep_options;
  size_t ep_option_count;
  /* Device memory cap: bytes the session may ask its EPs for (activation arenas, values
   * of dynamic shape, uploaded constants, device tensors), over all its EPs; 0: no cap.
   * Going over it fails that run (or allocation) with NXRT_ERR_RESOURCE_EXHAUSTED before
   * the plugin is asked; the session stays usable. Memory a plugin keeps for itself
   * (prepacked weights, pipelines) is not capped; nxrt_session_memory_usage reports it. */
  uint64_t device_memory_limit;
  /* The caller's allocator (NULL: the plugins' own): every backing allocation of device
   * and pinned memory of every EP session of this session goes through it (request type
   * VULKAN_MEMORY for Vulkan, HOST_POINTER for CPU-like EPs). An EP without the
   * external-allocator feature fails session creation with NXRT_ERR_UNSUPPORTED. The
   * allocator must outlive the session and every device tensor made from it. */
  const nxrt_device_allocator* device_allocator;
  /* Graph optimization level of the session's copy of the model (nxrt_opt_level; 0: the
   * default). Anything else fails with NXRT_ERR_INVALID_ARGUMENT. */
  int optimization_level;
} nxrt_session_options;

/* Partitions the model over the EPs and prepares kernels and memory. */
NXRT_API nxrt_error* nxrt_session_create(nxrt_env* env, const nxrt_model* model,
                                         const nxrt_session_options* options, nxrt_session** out);
/* The same, but the session takes the model: the handle is released in every case
 * (also on error) and must not be used again. Weights the kernels keep their own
 * copies of (prepacked) or that live on a device are then freed from host memory,
 * so a model's weights are held about once. Use it when one session per model is
 * all you need. */
NXRT_API nxrt_error* nxrt_session_create_take_model(nxrt_env* env, nxrt_model* model,
                                                    const nxrt_session_options* options, nxrt_session** out);
NXRT_API void nxrt_session_release(nxrt_session* session);

/* Profiling: every run from start_profiling on records each step (kernel or copy) and the
 * run itself with host wall-clock times, from any thread. end_profiling writes them to
 * trace_path as a Chrome trace (open in chrome://tracing or ui.perfetto.dev; each event's
 * args name the EP and the op types) and stops; *event_count (may be NULL) gets the number
 * of events. For an EP with streams a kernel's time is the time to enqueue its work; the
 * run's event includes the final synchronization. Plugins declaring device profiling
 * (NXRT_FEATURE_DEVICE_PROFILING) are told each profiled run is profiled and report their
 * kernels' device-side times; those appear as events of cat "device" on a track of their
 * own named "<ep> device", aligned so that a run's first device event starts when the host
 * started that kernel's step. Ending without a start, or a file that cannot be written, is
 * an error (the profile is kept, so the call can be retried). */
NXRT_API nxrt_error* nxrt_session_start_profiling(nxrt_session* session);
NXRT_API nxrt_error* nxrt_session_end_profiling(nxrt_session* session, const char* trace_path, size_t* event_count);

/* Element types use ONNX TensorProto numbering (float = 1, int64 = 7...). */
typedef struct nxrt_io_info {
  const char* name;
  int32_t dtype;
  int64_t rank;        /* -1 unknown */
  const int64_t* dims; /* -1 for a symbolic dimension */
} nxrt_io_info;

NXRT_API size_t nxrt_session_input_count(const nxrt_session* s);
NXRT_API nxrt_io_info nxrt_session_input(const nxrt_session* s, size_t i);
NXRT_API size_t nxrt_session_output_count(const nxrt_session* s);
NXRT_API nxrt_io_info nxrt_session_output(const nxrt_session* s, size_t i);

/* Where each node runs, in topological order. */
typedef struct nxrt_node_assignment {
  const char* node_name;
  const char* op_type;
  const char* ep;          /* "host" if the host runs it (control flow), "" for a host-side no-op */
  int fell_back;           /* placed by --fallback, not by the requested list */
  const char* reason;      /* why earlier EPs refused it, "" if none did */
} nxrt_node_assignment;

NXRT_API size_t nxrt_session_node_count(const nxrt_session* s);
NXRT_API nxrt_node_assignment nxrt_session_node(const nxrt_session* s, size_t i);
NXRT_API size_t nxrt_session_copy_count(const nxrt_session* s); /* cross-device copies inserted */
/* For node i the host runs with bodies (If, Loop, Scan, SequenceMap): where each body's
 * nodes run, as lines "<attribute>:" then "  <node> (<op>): <ep>" (nested bodies indented
 * further, "*" = by fallback); "" for other nodes. Valid while the session lives. */
NXRT_API const char* nxrt_session_node_bodies(const nxrt_session* s, size_t i);
/* How the kernel that runs node i computes, as its plugin describes it (EP ABI 2.5
 * kernel_describe: algorithm, tile, layout, ISA): the plugin's line for a node it runs alone;
 * "<ops>: <line>" on the first node of a fused group and "in the group of '<first>'" on the
 * others; "" when the plugin says nothing or the host runs the node. Valid while the session lives. */
NXRT_API const char* nxrt_session_node_kernel(const nxrt_session* s, size_t i);
/* What the optimizer did to the session's graph, one line per pass (nxrt_model_optimization_log). */
NXRT_API const char* nxrt_session_optimization_log(const nxrt_session* s);
/* How the session was prepared, as one JSON object: "stages" (milliseconds of optimize,
 * partition, compile, plan, upload, export) and "cache" (mode off|hit|miss|compiled-model,
 * the container read and its verdict, per EP the plugin's verdict with its reason and the
 * kernels imported, compiled and refused, the container written). Valid while the session lives. */
NXRT_API const char* nxrt_session_load_report(const nxrt_session* s);
/* The same report as lines for people (the cache part; `nxrt inspect --cache` prints it). */
NXRT_API const char* nxrt_session_cache_text(const nxrt_session* s);

/* Compiles the model for the session `options` describe and writes the compiled model
 * (graph, weights, every kernel the plugins export) to `path`, atomically; it never writes
 * into the ONNX model. With target_count > 0 the first EP of options->eps compiles for the
 * device `target` describes (key/value text as `nxrt plugins --json` prints a device) without
 * opening one; the plugin needs the offline-compile feature (NXRT_ERR_UNSUPPORTED otherwise). */
NXRT_API nxrt_error* nxrt_model_compile(nxrt_env* env, const nxrt_model* model, const nxrt_session_options* options,
                                        const nxrt_key_value* target, size_t target_count, const char* path);
/* What a compiled model holds (header, digests, settings, plugins and their fingerprints,
 * kernel counts) or why it cannot be used, as lines; valid until the next call on this thread. */
NXRT_API const char* nxrt_compiled_model_describe(const char* path);

/* A host-memory tensor given to or taken from a run. */
typedef struct nxrt_host_tensor {
  const char* name;
  int32_t dtype;
  uint32_t rank;
  const int64_t* dims;
  const void* data; /* dense row-major; STRING (8): nxrt_string elements (nxrt_native.h) whose
                     * text the caller keeps during the call (inputs) or the outputs object owns */
} nxrt_host_tensor;

/* Runs once. Every graph input must be given exactly once. Outputs are
 * returned in graph-output order. */
NXRT_API nxrt_error* nxrt_session_run(nxrt_session* s, const nxrt_host_tensor* inputs, size_t input_count,
                                      nxrt_outputs** outputs);

/* Options of one run: "<ep>.<key>" = value, forwarded to that EP's run hooks
 * (plugins declaring NXRT_FEATURE_RUN_HOOKS). The prefix must name an EP of the
 * session, else NXRT_ERR_INVALID_ARGUMENT. */
typedef struct nxrt_session_run_options {
  const nxrt_key_value* options; /* may be NULL when option_count is 0 */
  size_t option_count;
} nxrt_session_run_options;

/* nxrt_session_run with run options (NULL: none). */
NXRT_API nxrt_error* nxrt_session_run_with_options(nxrt_session* s, const nxrt_host_tensor* inputs, size_t input_count,
                                                   const nxrt_session_run_options* run_options, nxrt_outputs** outputs);
/* The run's id: unique per session, counting from 1; plugins see it as run_id. */
NXRT_API uint64_t nxrt_outputs_run_id(const nxrt_outputs* o);
NXRT_API size_t nxrt_outputs_count(const nxrt_outputs* o);
NXRT_API nxrt_host_tensor nxrt_outputs_get(const nxrt_outputs* o, size_t i);
NXRT_API void nxrt_outputs_release(nxrt_outputs* o);

/* ------------------------------------------------- sequences and optionals */

/* What an input or output holds: ONNX tensor, sequence(tensor) or optional(tensor or sequence). */
typedef enum nxrt_value_kind { NXRT_VALUE_TENSOR = 0, NXRT_VALUE_SEQUENCE = 1, NXRT_VALUE_OPTIONAL = 2 } nxrt_value_kind;

NXRT_API int32_t nxrt_session_input_kind(const nxrt_session* s, size_t i);  /* nxrt_value_kind */
NXRT_API int32_t nxrt_session_output_kind(const nxrt_session* s, size_t i);

/* One input or output of any kind. TENSOR: tensors[0] (count 1). SEQUENCE: `count`
 * tensors of elem_dtype. OPTIONAL: has_value 0 (none) or 1; with a value, inner_kind is
 * TENSOR (tensors[0]) or SEQUENCE (`count` tensors of elem_dtype). */
typedef struct nxrt_host_value {
  const char* name;
  int32_t kind;       /* nxrt_value_kind */
  int32_t has_value;  /* OPTIONAL */
  int32_t inner_kind; /* OPTIONAL with a value */
  int32_t elem_dtype; /* SEQUENCE, or OPTIONAL holding one */
  size_t count;
  const nxrt_host_tensor* tensors;
} nxrt_host_value;

/* A run whose inputs may be sequences or optionals (their data is copied). The outputs
 * are read with nxrt_outputs_get_value (nxrt_outputs_get gives a sequence or optional
 * output as a tensor without dtype or data). */
NXRT_API nxrt_error* nxrt_session_run_values(nxrt_session* s, const nxrt_host_value* inputs, size_t input_count,
                                             nxrt_outputs** outputs);
/* Output i as a value of its kind; the tensors stay valid until nxrt_outputs_release. */
NXRT_API nxrt_host_value nxrt_outputs_get_value(const nxrt_outputs* o, size_t i);
/* Value files as the ONNX backend tests store them: a TensorProto, SequenceProto or
 * OptionalProto (.pb), read as `kind` into a one-element nxrt_outputs. */
NXRT_API nxrt_error* nxrt_value_file_read(const char* path, int32_t kind, nxrt_outputs** out);
NXRT_API nxrt_error* nxrt_value_file_write(const char* path, const nxrt_host_value* v);

/* ------------------------------------------------- device interop (2.1) */

/* The EPs of a session (requested ones first, then any added by fallback). */
NXRT_API size_t nxrt_session_ep_count(const nxrt_session* s);
NXRT_API const char* nxrt_session_ep_name(const nxrt_session* s, size_t ep_index);

/* Memory of one EP session of a session. The host's figures count what the host asked
 * the EP for; `plugin` is the EP's own account, including what it keeps for itself
 * (has_plugin_stats: the EP has the memory-stats feature). */
typedef struct nxrt_memory_usage {
  const char* ep;
  uint64_t bytes_in_use;     /* held now by the host: arenas, dynamic values, constants, device tensors */
  uint64_t peak_bytes;
  uint64_t arena_bytes;      /* of bytes_in_use: activation arenas (one per concurrent run) */
  uint64_t allocation_count; /* allocations the host made so far */
  uint64_t limit_bytes;      /* the session's device_memory_limit (0: none) */
  int has_plugin_stats;
  nxrt_memory_stats plugin;
} nxrt_memory_usage;
NXRT_API nxrt_error* nxrt_session_memory_usage(const nxrt_session* s, size_t ep_index, nxrt_memory_usage* out);

/* Native handles of an EP session: what = NXRT_NATIVE_OBJECT_DEVICE or NXRT_NATIVE_OBJECT_QUEUE.
 * Fails with NXRT_ERR_UNSUPPORTED when the EP has no native handles.
 * The handles stay the plugin's; never destroy them. */
NXRT_API nxrt_error* nxrt_session_native_handle(const nxrt_session* s, const char* ep, nxrt_native_object what,
                                               nxrt_native_handle* out);

/* Device tensors: dense tensors in the memory of one EP session of a session. They keep
 * that EP session alive, so they may outlive the nxrt_session (not the env). */
typedef struct nxrt_device_tensor nxrt_device_tensor;
NXRT_API nxrt_error* nxrt_device_tensor_alloc(nxrt_session* s, const char* ep, int32_t dtype, const int64_t* dims, size_t rank,
                                              nxrt_device_tensor** out);
/* Synchronous copies of the whole tensor; `bytes` must equal its size. */
NXRT_API nxrt_error* nxrt_device_tensor_upload(nxrt_device_tensor* t, const void* data, size_t bytes);
NXRT_API nxrt_error* nxrt_device_tensor_download(const nxrt_device_tensor* t, void* data, size_t bytes);
NXRT_API void nxrt_device_tensor_release(nxrt_device_tensor* t);
/* Copies src into dst (same element type and shape), synchronously, without the host
 * touching the bytes when both live in one EP session or in two sessions of one plugin
 * that has the peer-copy feature (say, the outputs of one model's session into the
 * inputs of another's); directly from or into a host-addressable side; by one plugin
 * importing the other's memory (memory-import feature); else staged through host memory
 * (the source plugin's pinned memory when it offers it). */
NXRT_API nxrt_error* nxrt_device_tensor_copy(nxrt_device_tensor* dst, const nxrt_device_tensor* src);
typedef struct nxrt_device_tensor_info {
  const char* ep;
  int32_t dtype;
  uint32_t rank;
  const int64_t* dims;
  uint32_t memory;      /* NXRT_MEMORY_DEVICE (1) */
  void* handle;         /* the EP's allocation handle (a host pointer for host-addressable EPs) */
  uint64_t byte_offset; /* of the tensor inside the allocation */
  uint64_t bytes;
} nxrt_device_tensor_info;
NXRT_API nxrt_device_tensor_info nxrt_device_tensor_get_info(const nxrt_device_tensor* t);
/* The native memory behind it (VULKAN_BUFFER: VkBuffer + offset; HOST_POINTER...). */
NXRT_API nxrt_error* nxrt_device_tensor_native(const nxrt_device_tensor* t, nxrt_native_handle* out);
/* Memory the caller (or another plugin) owns as a device tensor of EP `ep`, without a copy:
 * `native` says where the tensor starts, as nxrt_device_tensor_native would (a
 * VULKAN_BUFFER on the session's VkDevice, with value = the tensor's byte offset in it; a
 * HOST_POINTER, which Vulkan takes when it is aligned as the device requires, see the
 * vulkan.host_import_alignment property), and size >= the tensor's bytes. Bind it as an
 * input or output like any device tensor. Releasing it leaves the memory to its owner, who
 * keeps it alive until then. NXRT_ERR_UNSUPPORTED, with the plugin's reason, when the EP
 * lacks the memory-import feature or cannot use this memory. */
NXRT_API nxrt_error* nxrt_device_tensor_import(nxrt_session* s, const char* ep, const nxrt_native_handle* native,
                                               int32_t dtype, const int64_t* dims, size_t rank, nxrt_device_tensor** out);

/* Streams of an EP session: create one, or import the caller's native one (Vulkan: a
 * timeline semaphore on the session's VkDevice, and the point the stream's first work
 * waits for; CUDA: a cudaStream_t). Streams keep their EP session alive. Releasing a stream
 * waits for the runs that returned without waiting for it (so release it once its work can
 * complete); after that nothing of nxrt refers to it or to the caller's native object. */
typedef struct nxrt_device_stream nxrt_device_stream;
NXRT_API nxrt_error* nxrt_session_stream_create(nxrt_session* s, const char* ep, nxrt_device_stream** out);
NXRT_API nxrt_error* nxrt_session_stream_import(nxrt_session* s, const char* ep, const nxrt_native_handle* native,
                                                nxrt_device_stream** out);
/* Where the stream's queued work completes (Vulkan: timeline semaphore + value to wait for). */
NXRT_API nxrt_error* nxrt_device_stream_native(const nxrt_device_stream* st, nxrt_native_handle* out);
NXRT_API nxrt_error* nxrt_device_stream_synchronize(nxrt_device_stream* st);
NXRT_API void nxrt_device_stream_release(nxrt_device_stream* st);

/* I/O binding: where each input comes from and each output goes for the runs that use it.
 * Unbound outputs are returned in host memory; every input must be bound. */
typedef struct nxrt_binding nxrt_binding;
NXRT_API nxrt_error* nxrt_binding_create(nxrt_session* s, nxrt_binding** out);
NXRT_API void nxrt_binding_release(nxrt_binding* b);
/* Host input: the struct and its data are read at run time, so they must stay valid. */
NXRT_API nxrt_error* nxrt_binding_bind_host_input(nxrt_binding* b, const nxrt_host_tensor* t);
/* Device input (the binding holds a reference): read in place by the EP it belongs to. */
NXRT_API nxrt_error* nxrt_binding_bind_input(nxrt_binding* b, const char* name, const nxrt_device_tensor* t);
/* Output written into the caller's device tensor (dtype and shape must match the result). */
NXRT_API nxrt_error* nxrt_binding_bind_output(nxrt_binding* b, const char* name, nxrt_device_tensor* t);
/* Output left in EP `ep`'s memory: each run makes a new device tensor, read it with
 * nxrt_binding_output. */
NXRT_API nxrt_error* nxrt_binding_bind_output_to_device(nxrt_binding* b, const char* name, const char* ep);
/* Back to a host output. */
NXRT_API nxrt_error* nxrt_binding_bind_output_to_host(nxrt_binding* b, const char* name);
/* Runs with the binding. `stream` (may be NULL): that EP's work is queued on it, and when
 * no transfer through the host and no allocation was needed for that EP the call returns
 * without waiting for the device (wait through nxrt_device_stream_native or
 * nxrt_device_stream_synchronize). *outputs (may be NULL) gets every graph output in
 * order; device-bound ones with their shape and data NULL. */
NXRT_API nxrt_error* nxrt_session_run_binding(nxrt_session* s, nxrt_binding* b, const nxrt_session_run_options* run_options,
                                              nxrt_device_stream* stream, nxrt_outputs** outputs);
/* The device tensor of a device-bound output after a run: a new reference the caller
 * releases (nxrt_device_tensor_release); NXRT_ERR_NOT_FOUND for a host output. */
NXRT_API nxrt_error* nxrt_binding_output(const nxrt_binding* b, const char* name, nxrt_device_tensor** out);

/* ------------------------------------------------------ tensors, files */

/* Element types (ONNX numbering): name ("float32"; "undefined" if unknown) and size in
 * bytes (0 for types without a fixed size). */
NXRT_API const char* nxrt_element_type_name(int32_t dtype);
NXRT_API size_t nxrt_element_type_size(int32_t dtype);
/* "[2,?,3]" for messages (-1 dimensions as "?"); the string lives until the next call
 * on the same thread. */
NXRT_API const char* nxrt_shape_string(const int64_t* dims, size_t rank);

/* Tensor files: one ONNX TensorProto (.pb). read gives a one-element nxrt_outputs
 * (release with nxrt_outputs_release); write stores t with its name. */
NXRT_API nxrt_error* nxrt_tensor_file_read(const char* path, nxrt_outputs** out);
NXRT_API nxrt_error* nxrt_tensor_file_write(const char* path, const nxrt_host_tensor* t);

#ifdef __cplusplus
}
#endif

#endif /* NXRT_H */
