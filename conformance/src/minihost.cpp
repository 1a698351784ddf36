#include "minihost.hpp"
#include "utf8.hpp"
#include "runner.hpp"

#include <fmt/format.h>

#include <dirent.h>
#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <unordered_set>

namespace conf {

constexpr uint32_t kStatusMagic = 0x5354a7u;

void HostLog::violation(const std::string& v) {
  std::lock_guard lock(mu);
  if (violations.size() < 64) violations.push_back(v);
}
std::vector<std::string> HostLog::take() {
  std::lock_guard lock(mu);
  auto out = std::move(violations);
  violations.clear();
  return out;
}
HostLog& host_log() {
  static HostLog* log = new HostLog;  // never destroyed: plugins may log at exit
  return *log;
}

namespace {
std::mutex& status_mu() {
  static std::mutex* m = new std::mutex;
  return *m;
}
std::unordered_set<const nxrt_status*>& live_statuses() {
  static auto* s = new std::unordered_set<const nxrt_status*>;
  return *s;
}
nxrt_status g_oom{kStatusMagic, NXRT_OUT_OF_MEMORY, 1, "out of memory (the host could not allocate a status)"};
}  // namespace

const nxrt_status* oom_status() { return &g_oom; }

bool is_live_status(const nxrt_status* s) {
  if (s == &g_oom) return true;
  std::lock_guard lock(status_mu());
  return live_statuses().count(s) != 0;
}

const char* status_code_name(int code) {
  switch (code) {
    case NXRT_OK: return "NXRT_OK";
    case NXRT_INVALID_ARGUMENT: return "NXRT_INVALID_ARGUMENT";
    case NXRT_UNSUPPORTED: return "NXRT_UNSUPPORTED";
    case NXRT_OUT_OF_MEMORY: return "NXRT_OUT_OF_MEMORY";
    case NXRT_DEVICE_LOST: return "NXRT_DEVICE_LOST";
    case NXRT_NOT_FOUND: return "NXRT_NOT_FOUND";
    case NXRT_VERSION_MISMATCH: return "NXRT_VERSION_MISMATCH";
    case NXRT_CANCELLED: return "NXRT_CANCELLED";
    case NXRT_TIMEOUT: return "NXRT_TIMEOUT";
    case NXRT_INTERNAL: return "NXRT_INTERNAL";
    default: return "invalid status code";
  }
}

std::string consume_status(nxrt_status* s, nxrt_status_code* code, std::string* problem) {
  if (!s) {
    if (code) *code = NXRT_OK;
    return "ok";
  }
  if (s == &g_oom) {  // the static status: valid, never freed
    if (code) *code = s->code;
    return std::string(status_code_name(s->code)) + ": " + s->message;
  }
  {
    std::lock_guard lock(status_mu());
    if (!live_statuses().count(s)) {
      if (problem) *problem = "the plugin returned a status pointer that host->status_create did not make (or that was already released)";
      if (code) *code = NXRT_INTERNAL;
      return "foreign status";
    }
    live_statuses().erase(s);
  }
  std::string desc = std::string(status_code_name(s->code)) + ": " + s->message;
  if (code) *code = s->code;
  if (problem) {
    if (s->code == NXRT_OK) *problem = "a non-NULL status carries NXRT_OK";
    else if (s->code < 1 || s->code > 9) *problem = "status code " + std::to_string(int(s->code)) + " is not an nxrt_status_code";
    else if (s->message.empty()) *problem = std::string("status ") + status_code_name(s->code) + " has an empty message";
    else if (!valid_utf8(s->message))
      *problem = std::string("status ") + status_code_name(s->code) + "'s message is not valid UTF-8: '" + to_valid_utf8(s->message) + "'";
  }
  s->magic = 0;
  delete s;
  host_log().statuses_released++;
  return desc;
}

std::string Result::str() const {
  if (ok) return "ok";
  return std::string(status_code_name(code)) + ": " + message;
}

Result take(nxrt_status* s) {
  Result r;
  if (!s) return r;
  r.ok = false;
  std::string d = consume_status(s, &r.code, &r.problem);
  auto colon = d.find(": ");
  r.message = colon == std::string::npos ? d : d.substr(colon + 2);
  if (r.problem.find("foreign") != std::string::npos || r.problem.find("status_create") != std::string::npos)
    r.message = "";
  return r;
}

// ------------------------------------------------------------ host services

namespace {

nxrt_status* h_status_create(nxrt_status_code code, int retryable, const char* message) {
  // Never NULL: when it "cannot allocate" (starved on purpose) the static status.
  if (host_log().starve_statuses) return &g_oom;
  auto* s = new (std::nothrow) nxrt_status{kStatusMagic, code, retryable, message ? message : ""};
  if (!s) return &g_oom;
  {
    std::lock_guard lock(status_mu());
    live_statuses().insert(s);
  }
  host_log().statuses_created++;
  return s;
}
void h_status_release(nxrt_status* s) {
  if (!s || s == &g_oom) return;
  {
    std::lock_guard lock(status_mu());
    if (!live_statuses().count(s)) {
      host_log().violation("status_release called on a pointer that is not a live status (double release or foreign pointer)");
      return;
    }
    live_statuses().erase(s);
  }
  host_log().statuses_released++;
  delete s;
}
nxrt_status_code h_status_code(const nxrt_status* s) {
  if (!s) return NXRT_OK;
  if (!is_live_status(s)) {
    host_log().violation("status_code called on a pointer that is not a live status");
    return NXRT_INTERNAL;
  }
  return s->code;
}
const char* h_status_message(const nxrt_status* s) {
  if (!s) return "";
  if (!is_live_status(s)) {
    host_log().violation("status_message called on a pointer that is not a live status");
    return "";
  }
  return s->message.c_str();
}
int h_status_retryable(const nxrt_status* s) {
  if (!s) return 0;
  if (!is_live_status(s)) {
    host_log().violation("status_retryable called on a pointer that is not a live status");
    return 0;
  }
  return s->retryable ? 1 : 0;
}
void h_log(nxrt_log_level, const char*, const char*) {}

size_t g_node_count(const nxrt_graph* g) { return g ? g->nodes.size() : 0; }
const nxrt_node* g_node(const nxrt_graph* g, size_t i) { return g && i < g->nodes.size() ? g->nodes[i] : nullptr; }
size_t g_input_count(const nxrt_graph* g) { return g ? g->inputs.size() : 0; }
const nxrt_value* g_input(const nxrt_graph* g, size_t i) { return g && i < g->inputs.size() ? g->inputs[i] : nullptr; }
size_t g_output_count(const nxrt_graph* g) { return g ? g->outputs.size() : 0; }
const nxrt_value* g_output(const nxrt_graph* g, size_t i) { return g && i < g->outputs.size() ? g->outputs[i] : nullptr; }
int64_t g_opset(const nxrt_graph* g, const char* domain) {
  if (!g) return -1;
  std::string d = domain ? domain : "";
  if (d == "ai.onnx") d.clear();
  auto it = g->opsets.find(d);
  return it == g->opsets.end() ? -1 : it->second;
}
size_t n_index(const nxrt_node* n) { return n ? n->index : NXRT_NO_INDEX; }
const char* n_name(const nxrt_node* n) { return n ? n->name.c_str() : nullptr; }
const char* n_op(const nxrt_node* n) { return n ? n->op_type.c_str() : nullptr; }
const char* n_domain(const nxrt_node* n) { return n ? n->domain.c_str() : nullptr; }
size_t n_in_count(const nxrt_node* n) { return n ? n->inputs.size() : 0; }
const nxrt_value* n_in(const nxrt_node* n, size_t i) { return n && i < n->inputs.size() ? n->inputs[i] : nullptr; }
size_t n_out_count(const nxrt_node* n) { return n ? n->outputs.size() : 0; }
const nxrt_value* n_out(const nxrt_node* n, size_t i) { return n && i < n->outputs.size() ? n->outputs[i] : nullptr; }
size_t n_attr_count(const nxrt_node* n) { return n ? n->attrs.size() : 0; }
const nxrt_attribute* n_attr_at(const nxrt_node* n, size_t i) { return n && i < n->attrs.size() ? &n->attrs[i] : nullptr; }
const nxrt_attribute* n_attr(const nxrt_node* n, const char* name) {
  if (!n || !name) return nullptr;
  for (auto& a : n->attrs)
    if (a.name == name) return &a;
  return nullptr;
}
const char* a_name(const nxrt_attribute* a) { return a ? a->name.c_str() : nullptr; }
nxrt_attribute_type a_type(const nxrt_attribute* a) { return a ? a->type : nxrt_attribute_type(NXRT_ATTR_UNDEFINED); }
int64_t a_int(const nxrt_attribute* a) { return a ? a->i : 0; }
float a_float(const nxrt_attribute* a) { return a ? a->f : 0.f; }
const char* a_string(const nxrt_attribute* a, size_t* len) {
  if (!a) return nullptr;
  if (len) *len = a->s.size();
  return a->s.c_str();
}
const int64_t* a_ints(const nxrt_attribute* a, size_t* count) {
  if (!a) return nullptr;
  if (count) *count = a->ints.size();
  return a->ints.data();
}
const float* a_floats(const nxrt_attribute* a, size_t* count) {
  if (!a) return nullptr;
  if (count) *count = a->floats.size();
  return a->floats.data();
}
size_t a_string_count(const nxrt_attribute*) { return 0; }
const char* a_string_at(const nxrt_attribute*, size_t, size_t*) { return nullptr; }
// The mini-host's graphs carry no TENSOR or GRAPH attributes.
nxrt_status* a_tensor(const nxrt_attribute* a, nxrt_const_tensor* out) {
  if (!a || !out) return h_status_create(NXRT_INVALID_ARGUMENT, 0, "attribute_tensor: NULL argument");
  return h_status_create(NXRT_INVALID_ARGUMENT, 0, ("attribute_tensor: '" + a->name + "' is not a TENSOR attribute").c_str());
}
nxrt_status* a_graph(const nxrt_attribute* a, const nxrt_graph** out) {
  if (!a || !out) return h_status_create(NXRT_INVALID_ARGUMENT, 0, "attribute_graph: NULL argument");
  *out = nullptr;
  return h_status_create(NXRT_INVALID_ARGUMENT, 0, ("attribute_graph: '" + a->name + "' is not a GRAPH attribute").c_str());
}

// Callee-filled rule: write only what fits in the caller's struct_size and
// write back the size filled.
template <typename T>
void fill_callee(T* out, T full) {
  uint32_t n = uint32_t(NXRT_FILLED_SIZE(size_t(out->struct_size), sizeof(T)));
  if (n < sizeof(uint32_t)) return;
  full.struct_size = n;
  std::memcpy(out, &full, n);
}

const char* v_name(const nxrt_value* v) { return v ? v->name.c_str() : nullptr; }
nxrt_dtype v_dtype(const nxrt_value* v) { return v ? v->dtype : nxrt_dtype(NXRT_DTYPE_UNDEFINED); }
int64_t v_rank(const nxrt_value* v) { return v ? v->rank : -1; }
const int64_t* v_dims(const nxrt_value* v) { return v ? v->dims.data() : nullptr; }
int v_is_constant(const nxrt_value* v) { return v && v->constant ? 1 : 0; }
nxrt_status* v_constant(const nxrt_value* v, nxrt_const_tensor* out) {
  if (!v || !out) return h_status_create(NXRT_INVALID_ARGUMENT, 0, "value_constant: NULL argument");
  if (!v->constant) return h_status_create(NXRT_NOT_FOUND, 0, ("value_constant: '" + v->name + "' is not a constant").c_str());
  nxrt_const_tensor t{};
  t.dtype = v->dtype;
  t.rank = uint32_t(v->rank);
  t.dims = v->dims.data();
  t.data = (v->origin ? v->origin : v)->data.data();
  t.byte_offset = 0;
  t.memory = NXRT_MEMORY_HOST;
  fill_callee(out, t);
  return nullptr;
}
bool has_value(const std::vector<const nxrt_value*>& vs, const nxrt_value* v) {
  return std::find(vs.begin(), vs.end(), v) != vs.end();
}
const nxrt_node* v_producer(const nxrt_graph* g, const nxrt_value* v) {
  if (!g || !v || v->constant) return nullptr;
  for (auto* n : g->nodes)
    if (has_value(n->outputs, v)) return n;
  return nullptr;
}
size_t v_consumer_count(const nxrt_graph* g, const nxrt_value* v) {
  if (!g || !v) return 0;
  size_t k = 0;
  for (auto* n : g->nodes)
    for (auto* u : n->inputs) k += u == v;
  return k;
}
const nxrt_node* v_consumer(const nxrt_graph* g, const nxrt_value* v, size_t i) {
  if (!g || !v) return nullptr;
  for (auto* n : g->nodes)
    for (auto* u : n->inputs)
      if (u == v && i-- == 0) return n;
  return nullptr;
}
int v_is_graph_output(const nxrt_value* v) { return v && v->owner && has_value(v->owner->outputs, v) ? 1 : 0; }

bool node_in_view(const nxrt_graph* g, size_t index) {
  for (auto* n : g->nodes)
    if (n->index == index) return true;
  return false;
}

nxrt_status* sink_violation(nxrt_claim_sink* sink, const std::string& v) {
  sink->violations.push_back(v);
  return h_status_create(NXRT_INVALID_ARGUMENT, 0, v.c_str());
}

nxrt_status* h_claim(nxrt_claim_sink* sink, const size_t* idx, size_t count, double cost) {
  if (!sink) {
    host_log().violation("claim_nodes called with a NULL sink");
    return h_status_create(NXRT_INVALID_ARGUMENT, 0, "claim_nodes: NULL sink");
  }
  std::lock_guard lock(sink->mu);
  if (!sink->active) return sink_violation(sink, "claim_nodes called after get_capability returned");
  if (count == 0) return sink_violation(sink, "claim_nodes with an empty node list");
  if (!idx) return sink_violation(sink, "claim_nodes with a NULL node list");
  if (count > 1 && !(sink->features & NXRT_FEATURE_FUSED_GROUPS))
    return sink_violation(sink, "claimed a group of " + std::to_string(count) +
                                    " nodes without declaring NXRT_FEATURE_FUSED_GROUPS");
  if (!(cost >= 0)) return sink_violation(sink, "claim cost is negative or NaN");
  std::set<size_t> seen;
  for (size_t k = 0; k < count; ++k) {
    size_t i = idx[k];
    if (!node_in_view(sink->graph, i))
      return sink_violation(sink, "claimed node " + std::to_string(i) + ", which does not exist (the graph has " +
                                      std::to_string(sink->graph->nodes.size()) + " nodes)");
    if (!seen.insert(i).second) return sink_violation(sink, "claim lists node " + std::to_string(i) + " twice");
    for (auto& c : sink->claims)
      if (std::find(c.begin(), c.end(), i) != c.end())
        return sink_violation(sink, "node " + std::to_string(i) + " claimed more than once");
    if (sink->refusals.count(i)) return sink_violation(sink, "node " + std::to_string(i) + " both refused and claimed");
  }
  sink->claims.emplace_back(idx, idx + count);
  return nullptr;
}

nxrt_status* h_refuse(nxrt_claim_sink* sink, size_t i, nxrt_refusal reason, const char* message) {
  if (!sink) {
    host_log().violation("refuse_node called with a NULL sink");
    return h_status_create(NXRT_INVALID_ARGUMENT, 0, "refuse_node: NULL sink");
  }
  std::lock_guard lock(sink->mu);
  if (!sink->active) return sink_violation(sink, "refuse_node called after get_capability returned");
  if (!node_in_view(sink->graph, i))
    return sink_violation(sink, "refused node " + std::to_string(i) + ", which does not exist (the graph has " +
                                    std::to_string(sink->graph->nodes.size()) + " nodes)");
  if (reason < NXRT_REFUSE_OP || reason > NXRT_REFUSE_OTHER)
    return sink_violation(sink, "refusal of node " + std::to_string(i) + " has invalid reason " + std::to_string(int(reason)));
  for (auto& c : sink->claims)
    if (std::find(c.begin(), c.end(), i) != c.end())
      return sink_violation(sink, "node " + std::to_string(i) + " both claimed and refused");
  if (sink->refusals.count(i)) return sink_violation(sink, "node " + std::to_string(i) + " refused twice");
  sink->refusals[i] = {int(reason), message ? message : ""};
  return nullptr;
}

nxrt_status* h_capture(const nxrt_graph* cg, const nxrt_value* v) {
  auto* g = const_cast<nxrt_graph*>(cg);
  if (!g || !v) return h_status_create(NXRT_INVALID_ARGUMENT, 0, "graph_capture_constant: NULL argument");
  if (!g->creating) {
    host_log().violation("graph_capture_constant called outside kernel_create (or on another graph than the one being created)");
    return h_status_create(NXRT_INVALID_ARGUMENT, 0, "graph_capture_constant: the graph is not being created");
  }
  if (!v->constant || !has_value(g->inputs, v))
    return h_status_create(NXRT_INVALID_ARGUMENT, 0,
                           ("graph_capture_constant: '" + v->name + "' is not a constant input of the graph").c_str());
  std::lock_guard lock(g->mu);
  g->captured.insert(v);
  return nullptr;
}

nxrt_status* h_profile_event(nxrt_profile_sink* sink, size_t node_index, const char* name, uint64_t start, uint64_t end) {
  if (!sink) {
    host_log().violation("profile_device_event called with a NULL sink");
    return h_status_create(NXRT_INVALID_ARGUMENT, 0, "profile_device_event: NULL sink");
  }
  std::lock_guard lock(sink->mu);
  if (!sink->active) {
    sink->violations.push_back("profile_device_event called after on_run_end returned");
    return h_status_create(NXRT_INVALID_ARGUMENT, 0, "profile_device_event: the sink is closed");
  }
  if (end < start) sink->violations.push_back("profile_device_event: device_end_ns < device_start_ns");
  sink->events.push_back({node_index, name ? name : "", start, end});
  return nullptr;
}

}  // namespace
}  // namespace conf

// ----------------------------------------------------------- kernel context

struct nxrt_kernel_context {
  conf::Session* session = nullptr;
  std::vector<nxrt_const_tensor> inputs;
  std::vector<std::vector<int64_t>> in_dims;
  std::vector<bool> in_present;
  struct Out {
    bool bound = false;
    nxrt_dtype dtype = NXRT_DTYPE_UNDEFINED;
    std::vector<int64_t> dims;
    void* handle = nullptr;
    size_t bytes = 0;
    uint64_t offset = 0;  // byte_offset inside the allocation (decoy bytes before it)
    uint64_t guard = 0;   // decoy bytes after it
  };
  std::vector<Out> outputs;
  conf::ComputeOptions opt;
  std::mutex mu;
  std::vector<std::string> violations;
  void violation(const std::string& v) {
    std::lock_guard lock(mu);
    violations.push_back(v);
  }
};

namespace conf {
namespace {

size_t c_in_count(const nxrt_kernel_context* c) { return c ? c->inputs.size() : 0; }
nxrt_status* c_in(const nxrt_kernel_context* c, size_t i, nxrt_const_tensor* out) {
  auto* ctx = const_cast<nxrt_kernel_context*>(c);
  if (!ctx || !out) return h_status_create(NXRT_INVALID_ARGUMENT, 0, "ctx_input: NULL argument");
  if (i >= ctx->inputs.size()) {
    ctx->violation("ctx_input(" + std::to_string(i) + ") out of range (" + std::to_string(ctx->inputs.size()) + " inputs)");
    return h_status_create(NXRT_INVALID_ARGUMENT, 0, "ctx_input: index out of range");
  }
  if (int(i) == ctx->opt.fail_input) return h_status_create(NXRT_INTERNAL, 0, "injected failure: ctx_input");
  if (!ctx->in_present[i]) return h_status_create(NXRT_NOT_FOUND, 0, "optional input is absent");
  fill_callee(out, ctx->inputs[i]);
  return nullptr;
}
size_t c_out_count(const nxrt_kernel_context* c) { return c ? c->outputs.size() : 0; }
nxrt_status* c_out(nxrt_kernel_context* ctx, size_t i, nxrt_dtype dtype, uint32_t rank, const int64_t* dims,
                   nxrt_tensor* out) {
  if (!ctx || !out || (rank && !dims)) return h_status_create(NXRT_INVALID_ARGUMENT, 0, "ctx_output: NULL argument");
  if (i >= ctx->outputs.size()) {
    ctx->violation("ctx_output(" + std::to_string(i) + ") out of range (" + std::to_string(ctx->outputs.size()) + " outputs)");
    return h_status_create(NXRT_INVALID_ARGUMENT, 0, "ctx_output: index out of range");
  }
  if (int(i) == ctx->opt.fail_output)
    return h_status_create(NXRT_OUT_OF_MEMORY, 0, "injected failure: cannot allocate the output");
  auto& o = ctx->outputs[i];
  {
    std::lock_guard lock(ctx->mu);
    if (o.bound) {
      ctx->violations.push_back("output " + std::to_string(i) + " bound twice in one call");
      return h_status_create(NXRT_INVALID_ARGUMENT, 0, "ctx_output: output already bound");
    }
    o.bound = true;
  }
  size_t es = dtype_size(dtype);
  if (es == 0) {
    ctx->violation("ctx_output: invalid dtype " + std::to_string(int(dtype)));
    return h_status_create(NXRT_INVALID_ARGUMENT, 0, "ctx_output: invalid dtype");
  }
  o.dtype = dtype;
  o.dims.assign(dims, dims + rank);
  for (auto d : o.dims)
    if (d < 0) {
      ctx->violation("ctx_output: negative dimension");
      return h_status_create(NXRT_INVALID_ARGUMENT, 0, "ctx_output: negative dimension");
    }
  o.bytes = size_t(numel(o.dims)) * es;
  auto& api = ctx->session->plugin().api();
  const uint64_t off = ctx->opt.byte_offset;
  // Inside a larger allocation: `off` decoy bytes before (byte_offset checks) and a guard
  // of decoy bytes after; the tensor itself starts as decoy bytes when poisoned, else zeros.
  o.offset = off;
  o.guard = std::max<uint64_t>(off, conf::kGuardBytes);
  std::vector<uint8_t> init(off + o.bytes + o.guard, conf::kDecoyByte);
  if (!off && !ctx->opt.poison_outputs) std::fill(init.begin(), init.begin() + long(o.bytes), uint8_t(0));
  conf::Result r = ctx->session->upload(init.data(), init.size(), &o.handle);
  if (!r.ok) {
    if (r.code == NXRT_OUT_OF_MEMORY) return h_status_create(NXRT_OUT_OF_MEMORY, 0, ("ctx_output: " + r.str()).c_str());
    return h_status_create(NXRT_INTERNAL, 0, ("ctx_output: the host could not place the output: " + r.str()).c_str());
  }
  (void)api;
  nxrt_tensor t{};
  t.dtype = dtype;
  t.rank = rank;
  t.dims = o.dims.data();
  t.data = o.handle;
  t.byte_offset = o.offset;
  t.memory = NXRT_MEMORY_DEVICE;
  fill_callee(out, t);
  return nullptr;
}
nxrt_stream* c_stream(const nxrt_kernel_context* c) { return c ? c->opt.stream : nullptr; }
int c_cancelled(const nxrt_kernel_context* c) { return c && c->opt.cancelled ? 1 : 0; }
uint64_t c_run_id(const nxrt_kernel_context* c) { return c ? c->opt.run_id : 0; }

nxrt_host_services make_table() {
  nxrt_host_services h{};
  // The mini-host is an ABI 2.0 host on purpose: every plugin is certified
  // against the oldest host of its major (a plugin built against a later 2.x
  // must negotiate 2.0 and work without what later minors add).
  h.struct_size = sizeof h;
  h.abi_major = NXRT_EP_ABI_MAJOR;
  h.abi_minor = kHostMinor;
  h.status_create = h_status_create;
  h.status_release = h_status_release;
  h.status_code = h_status_code;
  h.status_message = h_status_message;
  h.status_retryable = h_status_retryable;
  h.log = h_log;
  h.graph_node_count = g_node_count;
  h.graph_node = g_node;
  h.graph_input_count = g_input_count;
  h.graph_input = g_input;
  h.graph_output_count = g_output_count;
  h.graph_output = g_output;
  h.graph_opset = g_opset;
  h.node_index = n_index;
  h.node_name = n_name;
  h.node_op_type = n_op;
  h.node_domain = n_domain;
  h.node_input_count = n_in_count;
  h.node_input = n_in;
  h.node_output_count = n_out_count;
  h.node_output = n_out;
  h.node_attribute_count = n_attr_count;
  h.node_attribute_at = n_attr_at;
  h.node_attribute = n_attr;
  h.attribute_name = a_name;
  h.attribute_type = a_type;
  h.attribute_int = a_int;
  h.attribute_float = a_float;
  h.attribute_string = a_string;
  h.attribute_ints = a_ints;
  h.attribute_floats = a_floats;
  h.attribute_string_count = a_string_count;
  h.attribute_string_at = a_string_at;
  h.attribute_tensor = a_tensor;
  h.attribute_graph = a_graph;
  h.value_name = v_name;
  h.value_dtype = v_dtype;
  h.value_rank = v_rank;
  h.value_dims = v_dims;
  h.value_is_constant = v_is_constant;
  h.value_constant = v_constant;
  h.value_producer = v_producer;
  h.value_consumer_count = v_consumer_count;
  h.value_consumer = v_consumer;
  h.value_is_graph_output = v_is_graph_output;
  h.claim_nodes = h_claim;
  h.refuse_node = h_refuse;
  h.graph_capture_constant = h_capture;
  h.ctx_input_count = c_in_count;
  h.ctx_input = c_in;
  h.ctx_output_count = c_out_count;
  h.ctx_output = c_out;
  h.ctx_stream = c_stream;
  h.ctx_cancelled = c_cancelled;
  h.ctx_run_id = c_run_id;
  h.profile_device_event = h_profile_event;
  return h;
}

uint64_t trap_run_id(const nxrt_kernel_context*) {
  host_log().violation("the plugin called ctx_run_id, which lies beyond the host table's struct_size");
  return 0;
}
nxrt_status* trap_profile(nxrt_profile_sink*, size_t, const char*, uint64_t, uint64_t) {
  host_log().violation("the plugin called profile_device_event, which lies beyond the host table's struct_size");
  return nullptr;
}
// The mini-host has no string tensors (it never hands a kernel one): a 2.3+ plugin that
// calls ctx_output_string_set anyway is told so.
nxrt_status* no_strings(nxrt_kernel_context*, size_t, uint64_t, const char*, uint64_t) {
  host_log().violation("the plugin called ctx_output_string_set, but the mini-host bound no STRING output");
  return h_status_create(NXRT_INVALID_ARGUMENT, 0, "ctx_output_string_set: the mini-host binds no STRING outputs");
}

struct NewerTable {
  nxrt_host_services base;
  void* future[16];  // fields a future minor appends
};

}  // namespace

const nxrt_host_services* host_table_full() {
  static const nxrt_host_services t = make_table();
  return &t;
}
const nxrt_host_services* host_table_21() {
  static const nxrt_host_services t = [] {
    nxrt_host_services h = make_table();
    h.abi_minor = kInteropMinor;
    return h;
  }();
  return &t;
}
const nxrt_host_services* host_table_24() {
  static const nxrt_host_services t = [] {
    nxrt_host_services h = make_table();
    h.abi_minor = kCacheMinor;
    h.ctx_output_string_set = no_strings;
    return h;
  }();
  return &t;
}
const nxrt_host_services* host_table_25() {  // 2.5 appended no host service
  static const nxrt_host_services t = [] {
    nxrt_host_services h = *host_table_24();
    h.abi_minor = kDescribeMinor;
    return h;
  }();
  return &t;
}
const nxrt_host_services* host_table_newer() {
  static NewerTable t = [] {
    NewerTable n{};
    n.base = make_table();
    n.base.struct_size = sizeof(NewerTable);
    n.base.abi_minor = 7;
    return n;
  }();
  return &t.base;
}
const nxrt_host_services* host_table_truncated() {
  static nxrt_host_services t = [] {
    nxrt_host_services h = make_table();
    h.struct_size = uint32_t(offsetof(nxrt_host_services, ctx_run_id));
    h.ctx_run_id = trap_run_id;
    h.profile_device_event = trap_profile;
    return h;
  }();
  return &t;
}

// ------------------------------------------------------------ graph builder

const nxrt_value* GraphBuilder::value(const std::string& name, nxrt_dtype t, std::vector<int64_t> dims) {
  nxrt_value v;
  v.name = name;
  v.owner = &g_;
  v.dtype = t;
  v.rank = int64_t(dims.size());
  v.dims = std::move(dims);
  values_.push_back(std::move(v));
  return &values_.back();
}

const nxrt_value* GraphBuilder::constant(const std::string& name, nxrt_dtype t, std::vector<int64_t> dims,
                                         std::vector<uint8_t> data) {
  auto* v = const_cast<nxrt_value*>(value(name, t, std::move(dims)));
  v->constant = true;
  v->data = std::move(data);
  return v;
}

const nxrt_node* GraphBuilder::node(const std::string& op, const std::string& domain, std::vector<const nxrt_value*> in,
                                    std::vector<const nxrt_value*> out, std::vector<nxrt_attribute> attrs) {
  nxrt_node n;
  n.index = nodes_.size();
  n.name = op + "_" + std::to_string(n.index);
  n.op_type = op;
  n.domain = domain;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attrs = std::move(attrs);
  nodes_.push_back(std::move(n));
  g_.nodes.push_back(&nodes_.back());
  return &nodes_.back();
}

namespace {
// The view of the nodes `idx` of `whole`: nodes by index, external inputs and outputs.
std::unique_ptr<nxrt_graph> make_view(const nxrt_graph& g_, const std::vector<size_t>& idx) {
  auto g = std::make_unique<nxrt_graph>();
  g->opsets = g_.opsets;
  std::set<const nxrt_value*> produced;
  for (size_t i : idx) {
    const nxrt_node* n = nullptr;
    for (auto* m : g_.nodes)
      if (m->index == i) n = m;
    if (!n) continue;
    g->nodes.push_back(n);
    for (auto* v : n->outputs) produced.insert(v);
  }
  if (g->nodes.size() == 1) {
    g->inputs = g->nodes[0]->inputs;
    g->outputs = g->nodes[0]->outputs;
    return g;
  }
  std::set<const nxrt_value*> seen;
  for (auto* n : g->nodes)
    for (auto* v : n->inputs)
      if (v && !produced.count(v) && seen.insert(v).second) g->inputs.push_back(v);
  // Outputs: produced values used outside the group or graph outputs.
  std::set<size_t> inside(idx.begin(), idx.end());
  for (auto* n : g->nodes)
    for (auto* v : n->outputs) {
      bool external = std::find(g_.outputs.begin(), g_.outputs.end(), v) != g_.outputs.end();
      for (auto* m : g_.nodes)
        if (!inside.count(m->index))
          for (auto* u : m->inputs)
            if (u == v) external = true;
      if (external) g->outputs.push_back(v);
    }
  return g;
}
}  // namespace

std::unique_ptr<nxrt_graph> GraphBuilder::subgraph(const std::vector<size_t>& idx) const { return make_view(g_, idx); }

std::unique_ptr<OwnedView> GraphBuilder::owned_subgraph(const std::vector<size_t>& idx) const {
  auto o = std::make_unique<OwnedView>();
  std::map<const nxrt_value*, const nxrt_value*> copy_of;
  copy_of[nullptr] = nullptr;
  for (const nxrt_value& v : values_) {
    nxrt_value c = v;
    c.owner = &o->whole;
    c.origin = &v;
    c.data.clear();  // value_constant reads the builder's
    o->values.push_back(std::move(c));
    copy_of[&v] = &o->values.back();
    o->original[&o->values.back()] = &v;
  }
  auto remap = [&](const std::vector<const nxrt_value*>& vs) {
    std::vector<const nxrt_value*> r;
    for (auto* v : vs) r.push_back(copy_of.at(v));
    return r;
  };
  for (const nxrt_node* n : g_.nodes) {
    nxrt_node c = *n;
    c.inputs = remap(n->inputs);
    c.outputs = remap(n->outputs);
    o->nodes.push_back(std::move(c));
    o->whole.nodes.push_back(&o->nodes.back());
  }
  o->whole.inputs = remap(g_.inputs);
  o->whole.outputs = remap(g_.outputs);
  o->whole.opsets = g_.opsets;
  o->view = make_view(o->whole, idx);
  return o;
}

void OwnedView::poison() {
  auto hash = [](std::string& s) { std::fill(s.begin(), s.end(), '#'); };
  for (nxrt_value& v : values) {
    hash(v.name);
    v.dtype = NXRT_DTYPE_UNDEFINED;
    v.rank = kPoisonInt;
    std::fill(v.dims.begin(), v.dims.end(), kPoisonInt);
  }
  for (nxrt_node& n : nodes) {
    hash(n.name);
    hash(n.op_type);
    hash(n.domain);
    n.index = size_t(kPoisonInt);
    for (nxrt_attribute& a : n.attrs) {
      hash(a.name);
      hash(a.s);
      a.i = kPoisonInt;
      a.f = NAN;
      std::fill(a.ints.begin(), a.ints.end(), kPoisonInt);
      std::fill(a.floats.begin(), a.floats.end(), float(NAN));
    }
  }
  for (nxrt_graph* g : {&whole, view.get()})
    for (auto& [domain, version] : g->opsets) version = kPoisonInt;
}

// ----------------------------------------------------------------- plugin

Plugin::~Plugin() {
  if (negotiated_) shutdown();
  // A thread the plugin left running would run in unmapped code after dlclose and crash the
  // process later, blamed on whatever runs then: such a plugin stays loaded (the
  // process.threads_fds_cycles check names the leak).
  if (dl_ && thread_count_settled(threads_at_open_, 500) <= threads_at_open_) dlclose(dl_);
}

std::unique_ptr<Plugin> Plugin::open(const std::string& path, std::string* err, std::string* stage) {
  const size_t threads_before = thread_count();
  dlerror();
  void* dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char* e = dlerror();
    if (err) *err = e ? e : "dlopen failed";
    if (stage) *stage = "dlopen";
    return nullptr;
  }
  dlerror();
  void* sym = dlsym(dl, NXRT_EP_ENTRY_SYMBOL);
  if (!sym) {
    const char* e = dlerror();
    if (err) *err = std::string("the library does not export ") + NXRT_EP_ENTRY_SYMBOL + (e ? std::string(" (") + e + ")" : "");
    if (stage) *stage = "symbol";
    dlclose(dl);
    return nullptr;
  }
  auto p = std::unique_ptr<Plugin>(new Plugin);
  p->dl_ = dl;
  p->threads_at_open_ = threads_before;
  p->path_ = path;
  p->fn_ = reinterpret_cast<nxrt_ep_negotiate_fn>(sym);
  return p;
}

NegotiateResult Plugin::negotiate_raw(const NegotiateArgs& a) {
  NegotiateResult r;
  constexpr size_t kCanary = 128;
  // Trap pointers for request fields past struct_size: a plugin that reads a
  // field the host did not set (and dereferences it) crashes in this check.
  static const char* const kTrap = reinterpret_cast<const char*>(uintptr_t(0x10));
  // The request lives in a buffer larger than its struct_size; past it: traps (or
  // a future host's fields, 0xEE).
  size_t rq_bytes = std::max<size_t>(a.request_size, sizeof(nxrt_negotiate_request)) + kCanary;
  std::vector<uint8_t> rqbuf(rq_bytes, 0xEE);
  auto* rq = reinterpret_cast<nxrt_negotiate_request*>(rqbuf.data());
  std::memset(rqbuf.data(), 0, sizeof(nxrt_negotiate_request));
  rq->struct_size = a.request_size;
  rq->abi_major = a.major;
  rq->abi_minor = a.minor;
  rq->host = a.null_host ? nullptr : a.host ? a.host : host_table_full();
  rq->library_path = path_.c_str();
  rq->host_name = kHostName;
  rq->host_version = kHostVersion;
  if (a.request_size < offsetof(nxrt_negotiate_request, library_path) + sizeof(void*)) rq->library_path = kTrap;
  if (a.request_size < offsetof(nxrt_negotiate_request, host_name) + sizeof(void*)) rq->host_name = kTrap;
  if (a.request_size < offsetof(nxrt_negotiate_request, host_version) + sizeof(void*)) rq->host_version = kTrap;
  // The reply: bytes past its struct_size are canaries.
  size_t rp_bytes = std::max<size_t>(a.reply_size, sizeof(nxrt_negotiate_reply)) + kCanary;
  std::vector<uint8_t> rpbuf(rp_bytes + 16, 0xA5);
  uint8_t* base = rpbuf.data() + (16 - reinterpret_cast<uintptr_t>(rpbuf.data()) % 16) % 16;
  std::memset(base, 0xA5, rp_bytes);
  auto* rp = reinterpret_cast<nxrt_negotiate_reply*>(base);
  std::memset(base, 0, std::min<size_t>(a.reply_size, sizeof(nxrt_negotiate_reply)));
  // A "future" reply larger than ours: its unknown fields hold 0x5C.
  if (a.reply_size > sizeof(nxrt_negotiate_reply))
    std::memset(base + sizeof(nxrt_negotiate_reply), 0x5C, a.reply_size - sizeof(nxrt_negotiate_reply));
  rp->struct_size = a.reply_size;
  {
    Phase ph("nxrt_ep_negotiate");
    r.rc = fn_(rq, rp);
  }
  for (size_t i = a.reply_size; i < rp_bytes; ++i)
    if (base[i] != 0xA5) {
      r.canary_ok = false;
      r.first_bad_byte = i;
      break;
    }
  r.written_size = rp->struct_size;
  for (size_t i = std::max<size_t>(r.written_size, sizeof(nxrt_negotiate_reply)); i < a.reply_size; ++i)
    if (base[i] != 0x5C) {
      r.tail_ok = false;
      if (!r.first_bad_byte) r.first_bad_byte = i;
      break;
    }
  std::memset(&r.reply, 0, sizeof r.reply);
  // The frozen prefix (..message) is always readable; later fields only within
  // both the caller's size and the size the plugin wrote back.
  size_t readable = std::min<size_t>(a.reply_size, sizeof r.reply);
  if (r.rc == NXRT_OK) readable = std::min<size_t>(readable, std::max<size_t>(r.written_size, offsetof(nxrt_negotiate_reply, reserved0)));
  std::memcpy(&r.reply, base, readable);
  r.reply.struct_size = r.written_size;
  r.reply.message[sizeof r.reply.message - 1] = '\0';
  return r;
}

void Plugin::shutdown_raw(const NegotiateResult& r) {
  if (r.rc != NXRT_OK || !r.reply.api) return;
  if (!NXRT_HAS_FIELD(r.reply.api, nxrt_plugin_api, shutdown) || !r.reply.api->shutdown) return;
  Phase ph("shutdown");
  r.reply.api->shutdown(r.reply.plugin);
}

std::string Plugin::negotiate(uint32_t minor) {
  NegotiateArgs args;
  args.minor = minor;
  args.host = minor == kHostMinor      ? host_table_full()
              : minor >= kDescribeMinor ? host_table_25()
              : minor >= kCacheMinor    ? host_table_24()
                                        : host_table_21();
  NegotiateResult r = negotiate_raw(args);
  const std::string offered = "2." + std::to_string(minor);
  if (r.rc != NXRT_OK)
    return "the plugin refused ABI " + offered + " with " + status_code_name(r.rc) + ": '" + r.reply.message + "'";
  if (r.reply.abi_major != NXRT_EP_ABI_MAJOR) {
    shutdown_raw(r);
    return "the plugin agreed to major " + std::to_string(r.reply.abi_major) + " but the host offered major 2";
  }
  if (r.reply.abi_minor > minor) {
    shutdown_raw(r);
    return "the plugin agreed to minor " + std::to_string(r.reply.abi_minor) + ", newer than the host's " +
           std::to_string(minor);
  }
  if (!r.reply.api) return "negotiation returned NXRT_OK with reply.api = NULL (no function table)";
  reply_ = r.reply;
  api_ptr_ = r.reply.api;
  instance_ = r.reply.plugin;
  api_size_ = r.reply.api->struct_size;
  std::memset(&api_, 0, sizeof api_);
  std::memcpy(&api_, r.reply.api, std::min<size_t>(api_size_, sizeof api_));
  api_.struct_size = api_size_;
  raw_features_ = r.reply.features;
  offered_minor_ = minor;
  features_ = r.reply.features & NXRT_FEATURES_OF_MINOR(r.reply.abi_minor);  // as a host masks them
  negotiated_ = true;
  return "";
}

void Plugin::shutdown() {
  if (negotiated_ && NXRT_HAS_FIELD(&api_, nxrt_plugin_api, shutdown) && api_.shutdown) {
    Phase ph("shutdown");
    api_.shutdown(instance_);
  }
  negotiated_ = false;
  instance_ = nullptr;
}

// ---------------------------------------------------------------- session

Session::~Session() {
  for (void* h : retired_) free(h);
  if (s_ && p_.api().session_release) {
    Phase ph("session_release");
    p_.api().session_release(s_);
  }
}

Result Session::create(const OptionList& options) {
  std::vector<nxrt_option> opts(options.size());
  std::vector<const nxrt_option*> ptrs;
  for (size_t i = 0; i < options.size(); ++i) {
    opts[i].struct_size = sizeof(nxrt_option);
    opts[i].key = options[i].first.c_str();
    opts[i].value = options[i].second.c_str();
    ptrs.push_back(&opts[i]);
  }
  Phase ph("session_create");
  Result r = take(p_.api().session_create(p_.instance(), device_, ptrs.empty() ? nullptr : ptrs.data(), ptrs.size(), &s_));
  if (r.ok && !s_) {
    r.ok = false;
    r.code = NXRT_INTERNAL;
    r.problem = "session_create returned success but no session";
  }
  return r;
}

Result Session::upload(const void* data, size_t bytes, void** handle, nxrt_stream* stream) {
  Phase ph("memory_alloc/copy");
  auto& api = p_.api();
  *handle = nullptr;
  Result r = take(api.memory_alloc(s_, NXRT_MEMORY_DEVICE, bytes, NXRT_TENSOR_ALIGNMENT, handle));
  if (!r.ok) return r;
  if (!*handle) {
    r.ok = false;
    r.problem = "memory_alloc returned success and a NULL handle";
    return r;
  }
  if (bytes == 0) return r;
  nxrt_copy_region c{};
  c.struct_size = sizeof c;
  c.src_memory = NXRT_MEMORY_HOST;
  c.src = data;
  c.dst_memory = NXRT_MEMORY_DEVICE;
  c.dst = *handle;
  c.bytes = bytes;
  const nxrt_copy_region* cp = &c;
  return take(api.copy(s_, &cp, 1, stream));
}

Result Session::download(void* handle, uint64_t offset, void* dst, size_t bytes, nxrt_stream* stream) {
  if (bytes == 0) return {};
  Phase ph("copy");
  nxrt_copy_region c{};
  c.struct_size = sizeof c;
  c.src_memory = NXRT_MEMORY_DEVICE;
  c.src = handle;
  c.src_offset = offset;
  c.dst_memory = NXRT_MEMORY_HOST;
  c.dst = dst;
  c.bytes = bytes;
  const nxrt_copy_region* cp = &c;
  return take(p_.api().copy(s_, &cp, 1, stream));
}

void Session::free(void* handle, nxrt_memory_kind kind) {
  if (handle) p_.api().memory_free(s_, kind, handle);
}

void Session::retire(const std::vector<std::pair<void*, size_t>>& buffers) {
  std::vector<void*> now;
  for (auto& [h, bytes] : buffers) {
    if (!h) continue;
    if (bytes) {
      const std::vector<uint8_t> poison(bytes, kPoisonByte);
      Phase ph("copy (poisoning a finished call's buffer)");
      nxrt_copy_region c{};
      c.struct_size = sizeof c;
      c.src_memory = NXRT_MEMORY_HOST;
      c.src = poison.data();
      c.dst_memory = NXRT_MEMORY_DEVICE;
      c.dst = h;
      c.bytes = bytes;
      const nxrt_copy_region* cp = &c;
      take(p_.api().copy(s_, &cp, 1, nullptr));
    }
    now.push_back(h);
  }
  std::vector<void*> old;
  {
    std::lock_guard lock(retired_mu_);
    old.swap(retired_);
    retired_ = std::move(now);
  }
  for (void* h : old) free(h);
}

Result Session::capability(const nxrt_graph& g, nxrt_claim_sink& sink) {
  sink.graph = &g;
  sink.features = p_.features();
  sink.active = true;
  Phase ph("get_capability");
  Result r = take(p_.api().get_capability(s_, &g, &sink));
  std::lock_guard lock(sink.mu);
  sink.active = false;
  return r;
}

// ----------------------------------------------------------------- compute

uint64_t checksum(const void* data, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

ComputeResult compute(Session& s, nxrt_kernel* k, const std::vector<HostTensor>& inputs, size_t n_outputs,
                      const ComputeOptions& o) {
  ComputeResult res;
  nxrt_kernel_context ctx;
  ctx.session = &s;
  ctx.opt = o;
  // The ABI gives a plugin with NXRT_FEATURE_STREAMS a stream on every compute call.
  nxrt_stream* own_stream = nullptr;
  const auto& api = s.plugin().api();
  if (!ctx.opt.stream && (s.plugin().features() & NXRT_FEATURE_STREAMS) && api.stream_create) {
    Result r = take(api.stream_create(s.raw(), &own_stream));
    if (!r.ok) {
      res.problem = "stream_create failed: " + r.str();
      return res;
    }
    ctx.opt.stream = own_stream;
  }
  struct StreamRelease {
    const nxrt_plugin_api& api;
    nxrt_stream* s;
    ~StreamRelease() {
      if (s) api.stream_release(s);
    }
  } release_stream{api, own_stream};
  ctx.in_dims.reserve(inputs.size());
  std::vector<void*> handles;
  std::vector<uint64_t> offsets;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto& t = inputs[i];
    // A constant the kernel captured: dtype and dims, data = NULL.
    bool captured = false;
    if (o.view && i < o.view->inputs.size()) {
      auto* g = const_cast<nxrt_graph*>(o.view);
      std::lock_guard lock(g->mu);
      captured = g->captured.count(o.view->inputs[i]) != 0;
    }
    void* h = nullptr;
    const uint64_t off = o.byte_offset * (i + 1);
    offsets.push_back(off);
    if (!captured) {
      std::vector<uint8_t> placed;
      if (off) {  // at the offset, decoy bytes around it
        placed.assign(t.bytes.size() + 2 * off, kDecoyByte);
        std::copy(t.bytes.begin(), t.bytes.end(), placed.begin() + long(off));
      }
      Result r = off ? s.upload(placed.data(), placed.size(), &h) : s.upload(t.bytes.data(), t.bytes.size(), &h);
      if (!r.ok) {
        res.problem = "uploading an input failed: " + r.str() + (r.problem.empty() ? "" : " (" + r.problem + ")");
        for (auto* x : handles) s.free(x);
        return res;
      }
    }
    handles.push_back(h);
    ctx.in_dims.push_back(t.dims);
    nxrt_const_tensor nt{};
    nt.struct_size = sizeof nt;
    nt.dtype = t.dtype;
    nt.rank = uint32_t(t.dims.size());
    nt.dims = ctx.in_dims.back().data();
    nt.data = h;
    nt.byte_offset = off;
    nt.memory = NXRT_MEMORY_DEVICE;
    ctx.inputs.push_back(nt);
    ctx.in_present.push_back(true);
  }
  ctx.outputs.resize(n_outputs);
  {
    Phase ph(ctx.opt.phase ? ctx.opt.phase : "kernel_compute");
    if (o.starve_statuses) host_log().starve_statuses = true;
    nxrt_status* st = s.plugin().api().kernel_compute(k, &ctx);
    host_log().starve_statuses = false;
    res.status = take(st);
  }
  if (ctx.opt.stream && s.plugin().api().stream_synchronize) {
    Result r = take(s.plugin().api().stream_synchronize(ctx.opt.stream));
    if (!r.ok && res.status.ok) res.problem = "stream_synchronize after compute failed: " + r.str();
  }
  // Inputs are read-only: every input buffer must hold what the host put there.
  for (size_t i = 0; i < inputs.size() && res.input_written < 0; ++i) {
    if (!handles[i] || inputs[i].bytes.empty()) continue;
    std::vector<uint8_t> back(inputs[i].bytes.size());
    Result r = s.download(handles[i], offsets[i], back.data(), back.size());
    if (!r.ok) {
      if (res.problem.empty()) res.problem = "downloading input " + std::to_string(i) + " after compute failed: " + r.str();
      continue;
    }
    if (checksum(back.data(), back.size()) != checksum(inputs[i].bytes.data(), inputs[i].bytes.size())) {
      size_t at = 0;
      while (at < back.size() && back[at] == inputs[i].bytes[at]) ++at;
      res.input_written = int(i);
      res.input_written_detail = "byte " + std::to_string(at) + " of " + std::to_string(back.size()) + " changed";
    }
  }
  if (res.status.ok) {
    for (size_t i = 0; i < ctx.outputs.size(); ++i) {
      auto& out = ctx.outputs[i];
      HostTensor t;
      if (!out.bound) {
        ctx.violations.push_back("kernel_compute returned success without binding output " + std::to_string(i));
        res.outputs.push_back(t);
        continue;
      }
      t.dtype = out.dtype;
      t.dims = out.dims;
      std::vector<uint8_t> all(out.offset + out.bytes + out.guard);
      Result r = s.download(out.handle, 0, all.data(), all.size());
      if (!r.ok) res.problem = "downloading output " + std::to_string(i) + " failed: " + r.str();
      t.bytes.assign(all.begin() + long(out.offset), all.begin() + long(out.offset + out.bytes));
      if (r.ok && res.out_of_bounds.empty()) {
        const size_t end = out.offset + out.bytes;
        size_t before = 0, after = 0, first_after = SIZE_MAX, last_before = SIZE_MAX;
        for (size_t b = 0; b < out.offset; ++b)
          if (all[b] != kDecoyByte) ++before, last_before = out.offset - b;
        for (size_t b = end; b < all.size(); ++b)
          if (all[b] != kDecoyByte) ++after, first_after = std::min(first_after, b - end);
        if (after)
          res.out_of_bounds = fmt::format(
              "kernel_compute wrote past the end of output {} ({} {} bytes): {} of the {} guard bytes after it changed, the "
              "first at +{} from its end (a vector store or loop running over the tail?)",
              i, dtype_name(out.dtype), out.bytes, after, out.guard, first_after);
        else if (before)
          res.out_of_bounds = fmt::format(
              "kernel_compute wrote before the start of output {} (byte_offset {}): {} byte(s) changed, the farthest at -{} "
              "from its start (is byte_offset ignored, or an index negative?)",
              i, out.offset, before, last_before);
      }
      res.outputs.push_back(std::move(t));
    }
  }
  std::vector<std::pair<void*, size_t>> used;
  for (auto& out : ctx.outputs)
    if (out.handle) used.emplace_back(out.handle, out.offset + out.bytes + out.guard);
  for (size_t i = 0; i < handles.size(); ++i)
    if (handles[i]) used.emplace_back(handles[i], inputs[i].bytes.size() + 2 * offsets[i]);
  s.retire(used);
  res.violations = std::move(ctx.violations);
  return res;
}

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

size_t thread_count() {
  size_t n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

size_t thread_count_settled(size_t n, int wait_ms) {
  size_t now = thread_count();
  for (int waited = 0; now > n && waited < wait_ms; waited += 20) {
    usleep(20 * 1000);
    now = thread_count();
  }
  return now;
}

size_t rss_bytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return size_t(resident) * size_t(sysconf(_SC_PAGESIZE));
}

size_t malloc_bytes() {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

}  // namespace conf
