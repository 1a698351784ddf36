#include "minihost.hpp"
#include "runner.hpp"

#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
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
}  // namespace

bool is_live_status(const nxrt_status* s) {
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
  auto* s = new nxrt_status{kStatusMagic, code, retryable, message ? message : ""};
  {
    std::lock_guard lock(status_mu());
    live_statuses().insert(s);
  }
  host_log().statuses_created++;
  return s;
}
void h_status_release(nxrt_status* s) {
  if (!s) return;
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
size_t n_index(const nxrt_node* n) { return n ? n->index : 0; }
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
nxrt_attribute_type a_type(const nxrt_attribute* a) { return a ? a->type : NXRT_ATTR_UNDEFINED; }
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
int a_tensor(const nxrt_attribute*, nxrt_tensor*) { return 1; }

const char* v_name(const nxrt_value* v) { return v ? v->name.c_str() : nullptr; }
nxrt_dtype v_dtype(const nxrt_value* v) { return v ? v->dtype : NXRT_DTYPE_UNDEFINED; }
int64_t v_rank(const nxrt_value* v) { return v ? v->rank : -1; }
const int64_t* v_dims(const nxrt_value* v) { return v ? v->dims.data() : nullptr; }
int v_is_constant(const nxrt_value* v) { return v && v->constant ? 1 : 0; }
int v_constant(const nxrt_value* v, nxrt_tensor* out) {
  if (!v || !v->constant || !out) return 1;
  if (!NXRT_HAS_FIELD(out, nxrt_tensor, memory)) {
    host_log().violation("value_constant: nxrt_tensor.struct_size " + std::to_string(out->struct_size) + " is too small");
    return 1;
  }
  out->dtype = v->dtype;
  out->rank = uint32_t(v->rank);
  out->dims = v->dims.data();
  out->data = const_cast<uint8_t*>(v->data.data());
  out->byte_offset = 0;
  out->memory = NXRT_MEMORY_HOST;
  return 0;
}

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

}  // namespace
}  // namespace conf

// ----------------------------------------------------------- kernel context

struct nxrt_kernel_context {
  conf::Session* session = nullptr;
  std::vector<nxrt_tensor> inputs;
  std::vector<std::vector<int64_t>> in_dims;
  std::vector<bool> in_present;
  struct Out {
    bool bound = false;
    nxrt_dtype dtype = NXRT_DTYPE_UNDEFINED;
    std::vector<int64_t> dims;
    void* handle = nullptr;
    size_t bytes = 0;
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
nxrt_status* c_in(const nxrt_kernel_context* c, size_t i, nxrt_tensor* out) {
  auto* ctx = const_cast<nxrt_kernel_context*>(c);
  if (!ctx || !out) return h_status_create(NXRT_INVALID_ARGUMENT, 0, "ctx_input: NULL argument");
  if (i >= ctx->inputs.size()) {
    ctx->violation("ctx_input(" + std::to_string(i) + ") out of range (" + std::to_string(ctx->inputs.size()) + " inputs)");
    return h_status_create(NXRT_INVALID_ARGUMENT, 0, "ctx_input: index out of range");
  }
  if (int(i) == ctx->opt.fail_input) return h_status_create(NXRT_INTERNAL, 0, "injected failure: ctx_input");
  if (!ctx->in_present[i]) return h_status_create(NXRT_NOT_FOUND, 0, "optional input is absent");
  if (!NXRT_HAS_FIELD(out, nxrt_tensor, memory)) {
    ctx->violation("ctx_input: nxrt_tensor.struct_size " + std::to_string(out->struct_size) + " is too small");
    return h_status_create(NXRT_INVALID_ARGUMENT, 0, "ctx_input: tensor struct_size too small");
  }
  uint32_t size = out->struct_size;
  *out = ctx->inputs[i];
  out->struct_size = size;
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
  if (!NXRT_HAS_FIELD(out, nxrt_tensor, memory)) {
    ctx->violation("ctx_output: nxrt_tensor.struct_size " + std::to_string(out->struct_size) + " is too small");
    return h_status_create(NXRT_INVALID_ARGUMENT, 0, "ctx_output: tensor struct_size too small");
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
  nxrt_status* st = api.memory_alloc(ctx->session->raw(), NXRT_MEMORY_DEVICE, o.bytes, NXRT_TENSOR_ALIGNMENT, &o.handle);
  if (st) return st;  // the plugin's own allocation failure goes back to it
  out->dtype = dtype;
  out->rank = rank;
  out->dims = o.dims.data();
  out->data = o.handle;
  out->byte_offset = 0;
  out->memory = NXRT_MEMORY_DEVICE;
  return nullptr;
}
nxrt_stream* c_stream(const nxrt_kernel_context* c) { return c ? c->opt.stream : nullptr; }
int c_cancelled(const nxrt_kernel_context* c) { return c && c->opt.cancelled ? 1 : 0; }

nxrt_host_services make_table() {
  nxrt_host_services h{};
  // The mini-host is an ABI 1.0 host on purpose: every plugin is also certified
  // against the oldest host of its major (1.1's graph_capture_constant is then
  // absent, and the plugin must keep working without it).
  h.struct_size = offsetof(nxrt_host_services, ctx_cancelled) + sizeof(h.ctx_cancelled);
  h.abi_major = NXRT_EP_ABI_MAJOR;
  h.abi_minor = 0;
  h.status_create = h_status_create;
  h.status_release = h_status_release;
  h.status_code = h_status_code;
  h.status_message = h_status_message;
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
  h.value_name = v_name;
  h.value_dtype = v_dtype;
  h.value_rank = v_rank;
  h.value_dims = v_dims;
  h.value_is_constant = v_is_constant;
  h.value_constant = v_constant;
  h.claim_nodes = h_claim;
  h.refuse_node = h_refuse;
  h.ctx_input_count = c_in_count;
  h.ctx_input = c_in;
  h.ctx_output_count = c_out_count;
  h.ctx_output = c_out;
  h.ctx_stream = c_stream;
  h.ctx_cancelled = c_cancelled;
  return h;
}

int trap_cancelled(const nxrt_kernel_context*) {
  host_log().violation("the plugin called ctx_cancelled, which lies beyond the host table's struct_size");
  return 0;
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
    h.struct_size = uint32_t(offsetof(nxrt_host_services, ctx_cancelled));
    h.ctx_cancelled = trap_cancelled;
    return h;
  }();
  return &t;
}

// ------------------------------------------------------------ graph builder

const nxrt_value* GraphBuilder::value(const std::string& name, nxrt_dtype t, std::vector<int64_t> dims) {
  nxrt_value v;
  v.name = name;
  v.dtype = t;
  v.rank = int64_t(dims.size());
  v.dims = std::move(dims);
  values_.push_back(std::move(v));
  return &values_.back();
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

std::unique_ptr<nxrt_graph> GraphBuilder::subgraph(const std::vector<size_t>& idx) const {
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

// ----------------------------------------------------------------- plugin

Plugin::~Plugin() {
  if (dl_) dlclose(dl_);
}

std::unique_ptr<Plugin> Plugin::open(const std::string& path, std::string* err, std::string* stage) {
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
  p->fn_ = reinterpret_cast<nxrt_ep_negotiate_fn>(sym);
  return p;
}

NegotiateResult Plugin::negotiate_raw(uint32_t major, uint32_t minor, const nxrt_host_services* host,
                                      uint32_t request_size, uint32_t reply_size) {
  NegotiateResult r;
  constexpr size_t kCanary = 128;
  // Request and reply live in buffers larger than their struct_size; bytes past it are canaries.
  std::vector<uint8_t> rqbuf(sizeof(nxrt_negotiate_request) + kCanary, 0);
  auto* rq = reinterpret_cast<nxrt_negotiate_request*>(rqbuf.data());
  rq->struct_size = request_size;
  rq->abi_major = major;
  rq->abi_minor = minor;
  rq->host = host;
  alignas(16) uint8_t rpbuf[sizeof(nxrt_negotiate_reply) + kCanary];
  std::memset(rpbuf, 0xA5, sizeof rpbuf);
  auto* rp = reinterpret_cast<nxrt_negotiate_reply*>(rpbuf);
  std::memset(rpbuf, 0, reply_size);
  rp->struct_size = reply_size;
  {
    Phase ph("nxrt_ep_negotiate");
    r.rc = fn_(rq, rp);
  }
  for (size_t i = reply_size; i < sizeof rpbuf; ++i)
    if (rpbuf[i] != 0xA5) r.canary_ok = false;
  std::memcpy(&r.reply, rpbuf, std::min<size_t>(reply_size, sizeof r.reply));
  r.reply.message[sizeof r.reply.message - 1] = '\0';
  if (reply_size < sizeof(nxrt_negotiate_reply)) {
    // Fields beyond the reply's size are unknown to this host.
    if (reply_size < offsetof(nxrt_negotiate_reply, features) + sizeof(uint64_t)) r.reply.features = 0;
    if (reply_size < offsetof(nxrt_negotiate_reply, api) + sizeof(void*)) r.reply.api = nullptr;
  }
  return r;
}

std::string Plugin::negotiate() {
  NegotiateResult r = negotiate_raw(NXRT_EP_ABI_MAJOR, 0, host_table_full());
  if (r.rc != NXRT_OK)
    return std::string("the plugin refused ABI 1.0 with ") + status_code_name(r.rc) + ": '" + r.reply.message + "'";
  if (r.reply.abi_major != NXRT_EP_ABI_MAJOR)
    return "the plugin agreed to major " + std::to_string(r.reply.abi_major) + " but the host offered major 1";
  if (r.reply.abi_minor > 0)
    return "the plugin agreed to minor " + std::to_string(r.reply.abi_minor) + ", newer than the host's 0";
  if (!r.reply.api) return "negotiation returned NXRT_OK with reply.api = NULL (no function table)";
  reply_ = r.reply;
  api_size_ = r.reply.api->struct_size;
  std::memset(&api_, 0, sizeof api_);
  std::memcpy(&api_, r.reply.api, std::min<size_t>(api_size_, sizeof api_));
  api_.struct_size = api_size_;
  features_ = r.reply.features;
  negotiated_ = true;
  return "";
}

void Plugin::shutdown() {
  if (negotiated_ && NXRT_HAS_FIELD(&api_, nxrt_plugin_api, shutdown) && api_.shutdown) {
    Phase ph("shutdown");
    api_.shutdown();
  }
  negotiated_ = false;
}

// ---------------------------------------------------------------- session

Session::~Session() {
  if (s_ && p_.api().session_release) {
    Phase ph("session_release");
    p_.api().session_release(s_);
  }
}

Result Session::create(const std::vector<nxrt_option>& options) {
  Phase ph("session_create");
  Result r = take(p_.api().session_create(device_, options.data(), options.size(), &s_));
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
  return take(api.copy(s_, &c, 1, stream));
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
  return take(p_.api().copy(s_, &c, 1, stream));
}

void Session::free(void* handle, nxrt_memory_kind kind) {
  if (handle) p_.api().memory_free(s_, kind, handle);
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
  for (auto& t : inputs) {
    void* h = nullptr;
    Result r = s.upload(t.bytes.data(), t.bytes.size(), &h);
    if (!r.ok) {
      res.problem = "uploading an input failed: " + r.str() + (r.problem.empty() ? "" : " (" + r.problem + ")");
      for (auto* x : handles) s.free(x);
      return res;
    }
    handles.push_back(h);
    ctx.in_dims.push_back(t.dims);
    nxrt_tensor nt{};
    nt.struct_size = sizeof nt;
    nt.dtype = t.dtype;
    nt.rank = uint32_t(t.dims.size());
    nt.dims = ctx.in_dims.back().data();
    nt.data = h;
    nt.byte_offset = 0;
    nt.memory = NXRT_MEMORY_DEVICE;
    ctx.inputs.push_back(nt);
    ctx.in_present.push_back(true);
  }
  ctx.outputs.resize(n_outputs);
  {
    Phase ph("kernel_compute");
    res.status = take(s.plugin().api().kernel_compute(k, &ctx));
  }
  if (res.status.ok && ctx.opt.stream && s.plugin().api().stream_synchronize) {
    Result r = take(s.plugin().api().stream_synchronize(ctx.opt.stream));
    if (!r.ok) res.problem = "stream_synchronize after compute failed: " + r.str();
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
      t.bytes.resize(out.bytes);
      Result r = s.download(out.handle, 0, t.bytes.data(), t.bytes.size());
      if (!r.ok) res.problem = "downloading output " + std::to_string(i) + " failed: " + r.str();
      res.outputs.push_back(std::move(t));
    }
  }
  for (auto& out : ctx.outputs)
    if (out.handle) s.free(out.handle);
  for (auto* h : handles) s.free(h);
  res.violations = std::move(ctx.violations);
  return res;
}

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
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
