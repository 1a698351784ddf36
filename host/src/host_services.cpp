// The services table every plugin receives at negotiation: statuses, logging,
// the read-only graph view, claims and the kernel context.
#include "claims.hpp"
#include "ir.hpp"
#include "executor.hpp"
#include "profile_sink.hpp"
#include "session.hpp"
#include "status.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <cstdio>
#include <cstdlib>

namespace nxrt {

const char* status_code_name(nxrt_status_code code) {
  switch (code) {
    case NXRT_OK: return "ok";
    case NXRT_INVALID_ARGUMENT: return "invalid argument";
    case NXRT_UNSUPPORTED: return "unsupported";
    case NXRT_OUT_OF_MEMORY: return "out of memory";
    case NXRT_DEVICE_LOST: return "device lost";
    case NXRT_NOT_FOUND: return "not found";
    case NXRT_VERSION_MISMATCH: return "version mismatch";
    case NXRT_CANCELLED: return "cancelled";
    case NXRT_TIMEOUT: return "timeout";
    case NXRT_INTERNAL: return "internal error";
  }
  return "unknown status code";
}

namespace {
// Returned when a status cannot be allocated; releasing it is a no-op.
nxrt_status kOutOfMemory = [] {
  nxrt_status s;
  s.code = NXRT_OUT_OF_MEMORY;
  s.is_static = true;
  s.message = "out of memory (allocating a status)";
  return s;
}();
}  // namespace

nxrt_status* new_status(nxrt_status_code code, std::string_view message, bool retryable) noexcept {
  auto* s = new (std::nothrow) nxrt_status;
  if (!s) return &kOutOfMemory;
  try {
    s->message.assign(message);
  } catch (...) {
    delete s;
    return &kOutOfMemory;
  }
  s->code = code == NXRT_OK ? NXRT_INTERNAL : code;
  s->retryable = retryable;
  return s;
}

void release_status(nxrt_status* s) noexcept {
  if (s && !s->is_static) delete s;
}

namespace {

nxrt_status* status_create(nxrt_status_code code, int retryable, const char* message) {
  return new_status(code, message ? std::string_view(message) : std::string_view(), retryable != 0);
}
void status_release(nxrt_status* s) { release_status(s); }
nxrt_status_code status_code(const nxrt_status* s) { return s ? s->code : NXRT_OK; }
const char* status_message(const nxrt_status* s) { return s ? s->message.c_str() : ""; }
int status_retryable(const nxrt_status* s) { return s && s->retryable ? 1 : 0; }

void log(nxrt_log_level level, const char* plugin, const char* message) {
  static const int threshold = [] {
    const char* e = std::getenv("NXRT_LOG_LEVEL");
    return e ? std::atoi(e) : int(NXRT_LOG_WARNING);
  }();
  if (int(level) < threshold) return;
  static const char* names[] = {"debug", "info", "warning", "error"};
  std::fprintf(stderr, "nxrt [%s] %s: %s\n", names[level <= 3 ? level : 3], plugin ? plugin : "?", message ? message : "");
}

size_t graph_node_count(const nxrt_graph* g) { return g ? g->nodes.size() : 0; }
const nxrt_node* graph_node(const nxrt_graph* g, size_t i) { return g && i < g->nodes.size() ? g->nodes[i] : nullptr; }
size_t graph_input_count(const nxrt_graph* g) { return g ? g->inputs.size() : 0; }
const nxrt_value* graph_input(const nxrt_graph* g, size_t i) { return g && i < g->inputs.size() ? g->inputs[i] : nullptr; }
size_t graph_output_count(const nxrt_graph* g) { return g ? g->outputs.size() : 0; }
const nxrt_value* graph_output(const nxrt_graph* g, size_t i) { return g && i < g->outputs.size() ? g->outputs[i] : nullptr; }
int64_t graph_opset(const nxrt_graph* g, const char* domain) {
  if (!g || !g->model) return -1;
  std::string d = domain ? domain : "";
  if (d == "ai.onnx") d.clear();
  auto it = g->model->opsets.find(d);
  return it == g->model->opsets.end() ? -1 : it->second;
}

size_t node_index(const nxrt_node* n) { return n ? n->index : NXRT_NO_INDEX; }
const char* node_name(const nxrt_node* n) { return n ? n->name.c_str() : ""; }
const char* node_op_type(const nxrt_node* n) { return n ? n->op_type.c_str() : ""; }
const char* node_domain(const nxrt_node* n) { return n ? n->domain.c_str() : ""; }
size_t node_input_count(const nxrt_node* n) { return n ? n->inputs.size() : 0; }
const nxrt_value* node_input(const nxrt_node* n, size_t i) { return n && i < n->inputs.size() ? n->inputs[i] : nullptr; }
size_t node_output_count(const nxrt_node* n) { return n ? n->outputs.size() : 0; }
const nxrt_value* node_output(const nxrt_node* n, size_t i) { return n && i < n->outputs.size() ? n->outputs[i] : nullptr; }
size_t node_attribute_count(const nxrt_node* n) { return n ? n->attributes.size() : 0; }
const nxrt_attribute* node_attribute_at(const nxrt_node* n, size_t i) {
  return n && i < n->attributes.size() ? &n->attributes[i] : nullptr;
}
const nxrt_attribute* node_attribute(const nxrt_node* n, const char* name) {
  if (!n || !name) return nullptr;
  for (auto& a : n->attributes) if (a.name == name) return &a;
  for (auto& a : n->annotations) if (a.name == name) return &a;  // host annotations: asked for by name only
  return nullptr;
}

const char* attribute_name(const nxrt_attribute* a) { return a ? a->name.c_str() : ""; }
nxrt_attribute_type attribute_type(const nxrt_attribute* a) { return a ? a->type : nxrt_attribute_type(NXRT_ATTR_UNDEFINED); }
int64_t attribute_int(const nxrt_attribute* a) { return a ? a->i : 0; }
float attribute_float(const nxrt_attribute* a) { return a ? a->f : 0.f; }
const char* attribute_string(const nxrt_attribute* a, size_t* len) {
  if (len) *len = a ? a->s.size() : 0;
  return a ? a->s.c_str() : nullptr;
}
const int64_t* attribute_ints(const nxrt_attribute* a, size_t* count) {
  if (count) *count = a ? a->ints.size() : 0;
  return a ? a->ints.data() : nullptr;
}
const float* attribute_floats(const nxrt_attribute* a, size_t* count) {
  if (count) *count = a ? a->floats.size() : 0;
  return a ? a->floats.data() : nullptr;
}
size_t attribute_string_count(const nxrt_attribute* a) { return a ? a->strings.size() : 0; }
const char* attribute_string_at(const nxrt_attribute* a, size_t i, size_t* len) {
  if (!a || i >= a->strings.size()) {
    if (len) *len = 0;
    return nullptr;
  }
  if (len) *len = a->strings[i].size();
  return a->strings[i].c_str();
}

// Callee-filled rule: writes what fits in the caller's struct and writes back that size.
void fill_host_tensor(const HostTensor& t, nxrt_const_tensor* out) {
  nxrt_const_tensor v{};
  v.struct_size = sizeof v;
  v.dtype = t.dtype;
  v.rank = uint32_t(t.dims.size());
  v.dims = t.dims.data();
  v.data = t.data.data();
  v.byte_offset = 0;
  v.memory = NXRT_MEMORY_HOST;
  const uint32_t size = NXRT_FILLED_SIZE(out->struct_size, uint32_t(sizeof v));
  std::memcpy(static_cast<void*>(out), &v, size);
  out->struct_size = size;
}

// The smallest tensor struct the host fills: up to and including `dims`, or a caller
// could not even learn the shape.
bool tensor_struct_ok(const nxrt_const_tensor* out) {
  return out && out->struct_size >= offsetof(nxrt_const_tensor, dims) + sizeof(out->dims);
}

nxrt_status* attribute_tensor(const nxrt_attribute* a, nxrt_const_tensor* out) {
  if (!a || !out) return new_status(NXRT_INVALID_ARGUMENT, "attribute_tensor: NULL argument");
  if (!tensor_struct_ok(out))
    return new_status(NXRT_INVALID_ARGUMENT, fmt::format("attribute_tensor: tensor struct_size {} is too small", out->struct_size));
  if (a->type != NXRT_ATTR_TENSOR)
    return new_status(NXRT_INVALID_ARGUMENT, fmt::format("attribute '{}' is not a tensor", a->name));
  if (!a->tensor)
    return new_status(NXRT_UNSUPPORTED, fmt::format("tensor attribute '{}' has a type the host cannot decode", a->name));
  fill_host_tensor(*a->tensor, out);
  return nullptr;
}

nxrt_status* attribute_graph(const nxrt_attribute* a, const nxrt_graph** out) {
  if (!a || !out) return new_status(NXRT_INVALID_ARGUMENT, "attribute_graph: NULL argument");
  *out = nullptr;
  if (a->type != NXRT_ATTR_GRAPH) return new_status(NXRT_INVALID_ARGUMENT, fmt::format("attribute '{}' is not a graph", a->name));
  if (!a->graph)
    return new_status(NXRT_UNSUPPORTED, fmt::format("graph attribute '{}' has a body the host could not read", a->name));
  *out = &a->graph->view;
  return nullptr;
}

const char* value_name(const nxrt_value* v) { return v ? v->name.c_str() : ""; }
nxrt_dtype value_dtype(const nxrt_value* v) { return v ? v->dtype : nxrt_dtype(NXRT_DTYPE_UNDEFINED); }
int64_t value_rank(const nxrt_value* v) { return v ? v->rank : -1; }
const int64_t* value_dims(const nxrt_value* v) { return v && v->rank > 0 ? v->dims.data() : nullptr; }
int value_is_constant(const nxrt_value* v) { return v && v->constant ? 1 : 0; }
nxrt_status* value_constant(const nxrt_value* v, nxrt_const_tensor* out) {
  if (!v || !out) return new_status(NXRT_INVALID_ARGUMENT, "value_constant: NULL argument");
  if (!tensor_struct_ok(out))
    return new_status(NXRT_INVALID_ARGUMENT, fmt::format("value_constant: tensor struct_size {} is too small", out->struct_size));
  if (!v->constant) return new_status(NXRT_NOT_FOUND, fmt::format("value '{}' is not a constant", v->name));
  fill_host_tensor(*v->constant, out);
  return nullptr;
}

// The nodes a view may show: the main graph's or one body's.
const std::vector<std::unique_ptr<nxrt_node>>* scope_nodes(const nxrt_graph* g) {
  if (g->body) return &g->body->nodes;
  return g->model ? &g->model->nodes : nullptr;
}

// Views list their nodes sorted by index.
bool in_view(const nxrt_graph* g, const nxrt_node* n) {
  if (!n || n->body != g->body) return false;
  auto it = std::lower_bound(g->nodes.begin(), g->nodes.end(), n->index,
                             [](const nxrt_node* a, size_t i) { return a->index < i; });
  return it != g->nodes.end() && *it == n;
}

const nxrt_node* value_producer(const nxrt_graph* g, const nxrt_value* v) {
  if (!g || !v || v->producer < 0 || v->body != g->body) return nullptr;
  auto* nodes = scope_nodes(g);
  if (!nodes || size_t(v->producer) >= nodes->size()) return nullptr;
  const nxrt_node* p = (*nodes)[size_t(v->producer)].get();
  return in_view(g, p) ? p : nullptr;
}

size_t value_consumer_count(const nxrt_graph* g, const nxrt_value* v) {
  if (!g || !v || v->body != g->body) return 0;
  auto* nodes = scope_nodes(g);
  if (!nodes) return 0;
  size_t n = 0;
  for (int c : v->consumers)
    if (size_t(c) < nodes->size() && in_view(g, (*nodes)[size_t(c)].get())) ++n;
  return n;
}

const nxrt_node* value_consumer(const nxrt_graph* g, const nxrt_value* v, size_t i) {
  if (!g || !v || v->body != g->body) return nullptr;
  auto* nodes = scope_nodes(g);
  if (!nodes) return nullptr;
  for (int c : v->consumers) {
    if (size_t(c) >= nodes->size()) continue;
    const nxrt_node* n = (*nodes)[size_t(c)].get();
    if (in_view(g, n) && i-- == 0) return n;
  }
  return nullptr;
}

int value_is_graph_output(const nxrt_value* v) { return v && v->is_graph_output ? 1 : 0; }

nxrt_status* graph_capture_constant(const nxrt_graph* g, const nxrt_value* v) {
  if (!g || !v) return new_status(NXRT_INVALID_ARGUMENT, "graph_capture_constant: NULL argument");
  if (!g->captured)
    return new_status(NXRT_INVALID_ARGUMENT, "graph_capture_constant: only valid inside kernel_create or kernel_import, on its graph");
  if (!v->constant || std::find(g->inputs.begin(), g->inputs.end(), v) == g->inputs.end())
    return new_status(NXRT_INVALID_ARGUMENT,
                      fmt::format("graph_capture_constant: '{}' is not a constant input of this kernel", v->name));
  if (std::find(g->captured->begin(), g->captured->end(), v) == g->captured->end()) g->captured->push_back(v);
  return nullptr;
}

nxrt_status* claim_nodes(nxrt_claim_sink* sink, const size_t* idx, size_t count, double) {
  if (!sink) return new_status(NXRT_INVALID_ARGUMENT, "claim_nodes: sink is NULL");
  auto violation = [&](std::string msg) {
    if (sink->error.empty()) sink->error = msg;
    return new_status(NXRT_INVALID_ARGUMENT, std::move(msg));
  };
  if (count == 0 || !idx) return violation("claim_nodes: empty claim");
  if (count > 1 && !sink->fused_allowed)
    return violation(fmt::format("claimed a group of {} nodes without declaring NXRT_FEATURE_FUSED_GROUPS", count));
  std::set<size_t> seen;
  for (size_t k = 0; k < count; ++k) {
    if (!sink->in_view.count(idx[k]))
      return violation(fmt::format("claimed node {} which does not exist in the graph it was shown", idx[k]));
    if (!seen.insert(idx[k]).second) return violation(fmt::format("claimed node {} twice in one group", idx[k]));
    if (sink->claimed.count(idx[k])) return violation(fmt::format("claimed node {} in two claims", idx[k]));
  }
  sink->claimed.insert(seen.begin(), seen.end());
  sink->groups.emplace_back(idx, idx + count);
  return nullptr;
}

nxrt_status* refuse_node(nxrt_claim_sink* sink, size_t node, nxrt_refusal reason, const char* message) {
  if (!sink) return new_status(NXRT_INVALID_ARGUMENT, "refuse_node: sink is NULL");
  if (!sink->in_view.count(node)) {
    std::string msg = fmt::format("refused node {} which does not exist in the graph it was shown", node);
    if (sink->error.empty()) sink->error = msg;
    return new_status(NXRT_INVALID_ARGUMENT, msg);
  }
  sink->refusals[node] = {reason, message ? message : ""};
  return nullptr;
}

size_t ctx_input_count(const nxrt_kernel_context* ctx);
size_t ctx_output_count(const nxrt_kernel_context* ctx);
nxrt_stream* ctx_stream(const nxrt_kernel_context* ctx) { return ctx ? ctx->stream : nullptr; }

nxrt_status* profile_device_event(nxrt_profile_sink* sink, size_t node_index, const char* name, uint64_t device_start_ns,
                                  uint64_t device_end_ns) {
  if (!sink) return new_status(NXRT_INVALID_ARGUMENT, "profile_device_event: sink is NULL");
  if (device_end_ns < device_start_ns)
    return new_status(NXRT_INVALID_ARGUMENT,
                      fmt::format("profile_device_event: end {} ns is before start {} ns", device_end_ns, device_start_ns));
  try {
    std::lock_guard lock(sink->mu);
    sink->events.push_back({node_index, name ? name : "", device_start_ns, device_end_ns});
  } catch (const std::bad_alloc&) {
    return new_status(NXRT_OUT_OF_MEMORY, "profile_device_event: out of memory");
  }
  return nullptr;
}

const nxrt_host_services kServices = [] {
  nxrt_host_services s{};
  s.struct_size = sizeof s;
  s.abi_major = NXRT_EP_ABI_MAJOR;
  s.abi_minor = NXRT_EP_ABI_MINOR;
  s.status_create = status_create;
  s.status_release = status_release;
  s.status_code = status_code;
  s.status_message = status_message;
  s.status_retryable = status_retryable;
  s.log = log;
  s.graph_node_count = graph_node_count;
  s.graph_node = graph_node;
  s.graph_input_count = graph_input_count;
  s.graph_input = graph_input;
  s.graph_output_count = graph_output_count;
  s.graph_output = graph_output;
  s.graph_opset = graph_opset;
  s.node_index = node_index;
  s.node_name = node_name;
  s.node_op_type = node_op_type;
  s.node_domain = node_domain;
  s.node_input_count = node_input_count;
  s.node_input = node_input;
  s.node_output_count = node_output_count;
  s.node_output = node_output;
  s.node_attribute_count = node_attribute_count;
  s.node_attribute_at = node_attribute_at;
  s.node_attribute = node_attribute;
  s.attribute_name = attribute_name;
  s.attribute_type = attribute_type;
  s.attribute_int = attribute_int;
  s.attribute_float = attribute_float;
  s.attribute_string = attribute_string;
  s.attribute_ints = attribute_ints;
  s.attribute_floats = attribute_floats;
  s.attribute_string_count = attribute_string_count;
  s.attribute_string_at = attribute_string_at;
  s.attribute_tensor = attribute_tensor;
  s.attribute_graph = attribute_graph;
  s.value_name = value_name;
  s.value_dtype = value_dtype;
  s.value_rank = value_rank;
  s.value_dims = value_dims;
  s.value_is_constant = value_is_constant;
  s.value_constant = value_constant;
  s.value_producer = value_producer;
  s.value_consumer_count = value_consumer_count;
  s.value_consumer = value_consumer;
  s.value_is_graph_output = value_is_graph_output;
  s.claim_nodes = claim_nodes;
  s.refuse_node = refuse_node;
  s.ctx_input_count = ctx_input_count;
  s.ctx_input = nxrt::ctx_input;
  s.ctx_output_count = ctx_output_count;
  s.ctx_output = nxrt::ctx_output;
  s.ctx_output_string_set = nxrt::ctx_output_string_set;
  s.ctx_stream = ctx_stream;
  s.ctx_cancelled = nxrt::ctx_cancelled;
  s.ctx_run_id = nxrt::ctx_run_id;
  s.profile_device_event = profile_device_event;
  s.graph_capture_constant = graph_capture_constant;
  return s;
}();

size_t ctx_input_count(const nxrt_kernel_context* ctx) { return ctx && ctx->step ? ctx->step->inputs.size() : 0; }
size_t ctx_output_count(const nxrt_kernel_context* ctx) { return ctx && ctx->step ? ctx->step->outputs.size() : 0; }

}  // namespace

const nxrt_host_services& host_services() { return kServices; }

}  // namespace nxrt
