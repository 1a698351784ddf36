// The sequential executor: validates inputs, walks the steps, binds outputs
// through the kernel context, copies across devices, returns host outputs.
#include "control_flow.hpp"
#include "error.hpp"
#include "executor.hpp"
#include "io_binding.hpp"
#include "profile_sink.hpp"
#include "run_state.hpp"
#include "status.hpp"
#include "string_tensor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

namespace nxrt {

ValueTooLarge::ValueTooLarge(const nxrt_value* v, uint64_t bytes, uint64_t cap)
    : HostError(NXRT_ERR_RESOURCE_EXHAUSTED,
                fmt::format("'{}' would hold {} bytes, above this session's cap of {} bytes for a value sized at run time",
                            v->name, bytes, cap)),
      value(v) {}

namespace {

void* host_alloc(uint64_t bytes) {
  void* p = std::aligned_alloc(NXRT_TENSOR_ALIGNMENT, (std::max<uint64_t>(bytes, 1) + NXRT_TENSOR_ALIGNMENT - 1) /
                                                           NXRT_TENSOR_ALIGNMENT * NXRT_TENSOR_ALIGNMENT);
  if (!p) raise(NXRT_ERR_RUNTIME, "out of host memory allocating {} bytes", bytes);
  return p;
}

// Callee-filled rule: writes what fits in the caller's struct and writes back that size.
// nxrt_tensor and nxrt_const_tensor share one layout.
template <typename Tensor>
void fill(Tensor* out, nxrt_dtype dtype, const std::vector<int64_t>& dims, void* handle, uint64_t offset, int location) {
  Tensor t{};
  t.struct_size = sizeof t;
  t.dtype = dtype;
  t.rank = uint32_t(dims.size());
  t.dims = dims.data();
  t.data = handle;
  t.byte_offset = offset;
  t.memory = location == 0 ? NXRT_MEMORY_HOST : NXRT_MEMORY_DEVICE;
  const uint32_t size = NXRT_FILLED_SIZE(out->struct_size, uint32_t(sizeof t));
  std::memcpy(static_cast<void*>(out), &t, size);
  out->struct_size = size;
}

// The smallest tensor struct the host fills: through `dims`.
template <typename Tensor>
bool struct_ok(const Tensor* out) {
  return out->struct_size >= offsetof(Tensor, dims) + sizeof(out->dims);
}

// Gives slot `id` memory for `dims`: its planned place, the caller's output
// buffer, or a fresh allocation freed after the run.
void bind_slot(const Session& s, RunState& rs, int id, const std::vector<int64_t>& dims, nxrt_dtype dtype) {
  const Slot& slot = s.slots()[size_t(id)];
  SlotState& st = rs.state[size_t(id)];
  uint64_t bytes = uint64_t(element_count(dims)) * dtype_size(dtype);
  const int bound = rs.output_override.empty() ? -1 : rs.output_override[size_t(id)];
  if (bound >= 0) {  // a graph output bound to device memory: written in place
    BoundOutput& o = (*rs.bound_outputs)[size_t(bound)];
    if (o.kind == BoundOutput::Leave) {
      o.tensor = DeviceTensor::allocate(s.eps()[size_t(o.ep)], dtype, dims);
    } else if (o.tensor->dtype != dtype || o.tensor->dims != dims) {
      raise(NXRT_ERR_INVALID_ARGUMENT, "output '{}' is {} {} but the device tensor bound to it is {} {}", slot.value->name,
            dtype_name(dtype), shape_str(dims), dtype_name(o.tensor->dtype), shape_str(o.tensor->dims));
    }
    st.handle = o.tensor->handle;
    st.offset = o.tensor->offset;
  } else if (slot.planned && dims == slot.dims) {
    st.handle = rs.arenas[size_t(slot.location)];
    st.offset = slot.offset;
  } else if (s.dynamic_value_cap() && bytes > s.dynamic_value_cap()) {
    throw ValueTooLarge(slot.value, bytes, s.dynamic_value_cap());
  } else if (slot.graph_output >= 0) {
    HostTensor& out = rs.outputs[size_t(slot.graph_output)];
    s.output_buffers()->size_output(out.data, bytes);
    st.handle = out.data.data();
    st.offset = 0;
  } else if (slot.location == 0) {
    st.handle = host_alloc(bytes);
    rs.host_dynamic.push_back(st.handle);
    st.offset = 0;
  } else {
    EpInstance& ep = *s.eps()[size_t(slot.ep)];
    void* h = ep.alloc_device(bytes, fmt::format("allocating {} bytes for '{}'", bytes, slot.value->name));
    rs.device_dynamic.emplace_back(slot.ep, h);
    st.handle = h;
    st.offset = 0;
  }
  st.dims = dims;
  st.dtype = dtype;
  st.ready = true;
}

// Reads a slot's current binding (fixed constants or this run's state).
nxrt_dtype read_slot(const Session& s, const RunState& rs, int id, void** handle, uint64_t* offset,
                     const std::vector<int64_t>** dims) {
  const Slot& slot = s.slots()[size_t(id)];
  if (slot.fixed) {
    *handle = slot.fixed_handle;
    *offset = slot.fixed_offset;
    *dims = &slot.fixed_dims;
    return slot.dtype;
  }
  const SlotState& st = rs.state[size_t(id)];
  if (!st.ready) raise(NXRT_ERR_RUNTIME, "value '{}' is read before it was produced", slot.value->name);
  *handle = st.handle;
  *offset = st.offset;
  *dims = &st.dims;
  return st.dtype;
}

// NXRT_CHECK_READONLY_INPUTS=1: every kernel input the host can read (host memory or
// a host-addressable device) is hashed before kernel_compute and checked after it (and
// after its stream), so a plugin writing to a read-only input fails the run naming it.
// A debugging and certification aid (nxrt-conformance sets it); it costs a pass over
// every input per kernel.
bool check_read_only_inputs() {
  static const bool on = [] {
    const char* e = std::getenv("NXRT_CHECK_READONLY_INPUTS");
    return e && *e && *e != '0';
  }();
  return on;
}

struct InputDigest {
  size_t index;
  uint64_t hash;
};

uint64_t fnv1a(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// The inputs of `step` the host can read, with their bytes' hash (NULL data: a captured constant).
std::vector<std::pair<size_t, std::pair<const unsigned char*, size_t>>> readable_inputs(const Session& s, const RunState& rs,
                                                                                       const Step& step) {
  std::vector<std::pair<size_t, std::pair<const unsigned char*, size_t>>> out;
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    const int id = step.inputs[i];
    if (id < 0) continue;
    const Slot& slot = s.slots()[size_t(id)];
    if (slot.location != 0 && !(slot.ep >= 0 && s.eps()[size_t(slot.ep)]->host_addressable)) continue;
    void* h;
    uint64_t off;
    const std::vector<int64_t>* dims;
    const nxrt_dtype dtype = read_slot(s, rs, id, &h, &off, &dims);
    if (!h) continue;
    out.push_back({i, {static_cast<const unsigned char*>(h) + off, size_t(element_count(*dims)) * dtype_size(dtype)}});
  }
  return out;
}

std::vector<InputDigest> digest_inputs(const Session& s, const RunState& rs, const Step& step) {
  std::vector<InputDigest> d;
  for (auto& [i, bytes] : readable_inputs(s, rs, step)) d.push_back({i, fnv1a(bytes.first, bytes.second)});
  return d;
}

void verify_inputs(const Session& s, const RunState& rs, const Step& step, const std::vector<InputDigest>& before,
                   const std::string& plugin) {
  const auto now = readable_inputs(s, rs, step);
  for (size_t k = 0; k < before.size() && k < now.size(); ++k)
    if (fnv1a(now[k].second.first, now[k].second.second) != before[k].hash)
      raise(NXRT_ERR_PLUGIN, "plugin '{}' wrote to input {} ('{}') of {}, which is read-only", plugin, before[k].index,
            s.slots()[size_t(step.inputs[before[k].index])].value->name, step.label);
}

template <typename F>
nxrt_status* to_status(F&& f) noexcept {
  try {
    f();
    return nullptr;
  } catch (const HostError& e) {
    return new_status(e.code() == NXRT_ERR_INVALID_ARGUMENT ? NXRT_INVALID_ARGUMENT : NXRT_INTERNAL, e.what());
  } catch (const std::bad_alloc&) {
    return new_status(NXRT_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return new_status(NXRT_INTERNAL, e.what());
  }
}

// A host step: its inputs read in host memory (the executor waited for their downloads),
// its outputs bound like a kernel's and filled; a graph output takes the result's buffer.
void run_host_step(const Session& s, RunState& rs, const Step& step) {
  std::vector<TensorView> views(step.inputs.size());
  std::vector<const TensorView*> in(step.inputs.size(), nullptr);
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    if (step.inputs[i] < 0) continue;
    void* h;
    uint64_t off;
    const std::vector<int64_t>* dims;
    in[i] = &views[i];
    if (!s.slots()[size_t(step.inputs[i])].fixed && rs.values[size_t(step.inputs[i])]) {
      views[i].value = rs.values[size_t(step.inputs[i])];
      continue;
    }
    views[i].dtype = read_slot(s, rs, step.inputs[i], &h, &off, &dims);
    views[i].dims = *dims;
    views[i].data = static_cast<const char*>(h) + off;
  }
  std::vector<Result> out;
  step.host->run(in, out, rs.cancel);
  if (out.size() != step.outputs.size())
    raise(NXRT_ERR_RUNTIME, "{} produced {} outputs, the node has {}", step.label, out.size(), step.outputs.size());
  for (size_t o = 0; o < out.size(); ++o) {
    const int id = step.outputs[o];
    if (id < 0) continue;
    const Slot& slot = s.slots()[size_t(id)];
    if (out[o].value) {  // a sequence or optional: kept by reference
      if (slot.value->kind == ValueKind::Tensor && out[o].value->kind != Value::Tensor)
        raise(NXRT_ERR_RUNTIME, "output {} of {} ('{}') is a sequence or optional but the model says tensor", o, step.label,
              slot.value->name);
      if (out[o].value->kind == Value::Tensor) {
        out[o].tensor = out[o].value->tensor;  // an optional's or sequence's element, as a tensor slot
      } else {
        rs.values[size_t(id)] = out[o].value;
        SlotState& st = rs.state[size_t(id)];
        st.handle = nullptr;
        st.offset = 0;
        st.dims.clear();
        st.ready = true;
        continue;
      }
    }
    HostTensor& t = out[o].tensor;
    if (slot.dtype != NXRT_DTYPE_UNDEFINED && t.dtype != slot.dtype)
      raise(NXRT_ERR_RUNTIME, "output {} of {} ('{}') is {} but the model says {}", o, step.label, slot.value->name,
            dtype_name(t.dtype), dtype_name(slot.dtype));
    const bool overridden = !rs.output_override.empty() && rs.output_override[size_t(id)] >= 0;
    if (slot.graph_output >= 0 && !overridden && !(slot.planned && t.dims == slot.dims)) {
      // The result becomes the run's output buffer: no copy.
      HostTensor& dst = rs.outputs[size_t(slot.graph_output)];
      dst.data = std::move(t.data);
      dst.strings = std::move(t.strings);
      SlotState& st = rs.state[size_t(id)];
      st.handle = dst.data.data();
      st.offset = 0;
      st.dims = t.dims;
      st.dtype = t.dtype;
      st.ready = true;
      continue;
    }
    bind_slot(s, rs, id, t.dims, t.dtype);
    if (t.strings) rs.keep.push_back(t.strings);  // the slot's elements point into it
    const SlotState& st = rs.state[size_t(id)];
    if (!t.data.empty()) std::memcpy(static_cast<char*>(st.handle) + st.offset, t.data.data(), t.data.size());
  }
}

// Whether output i of the kernel call was bound (ctx_output) already.
bool is_bound(const nxrt_kernel_context& ctx, size_t i) {
  return i < 64 ? (ctx.bound >> i) & 1 : (ctx.more.size() > i - 64 && ctx.more[i - 64]);
}

}  // namespace

nxrt_status* ctx_input(const nxrt_kernel_context* ctx, size_t i, nxrt_const_tensor* out) {
  if (!ctx || !out) return new_status(NXRT_INVALID_ARGUMENT, "ctx_input: NULL argument");
  if (!struct_ok(out))
    return new_status(NXRT_INVALID_ARGUMENT, fmt::format("ctx_input: tensor struct_size {} is too small", out->struct_size));
  const Step& step = *ctx->step;
  if (i >= step.inputs.size())
    return new_status(NXRT_INVALID_ARGUMENT, fmt::format("ctx_input: {} has {} inputs, asked for {}", step.label, step.inputs.size(), i));
  int id = step.inputs[i];
  if (id < 0) return new_status(NXRT_NOT_FOUND, fmt::format("input {} of {} is absent", i, step.label));
  if (i < step.captured.size() && step.captured[i]) {  // the kernel keeps its own copy: shape only
    const Slot& slot = ctx->session->slots()[size_t(id)];
    fill(out, slot.dtype, slot.fixed_dims, nullptr, 0, slot.location);
    return nullptr;
  }
  return to_status([&] {
    void* h;
    uint64_t off;
    const std::vector<int64_t>* dims;
    nxrt_dtype dtype = read_slot(*ctx->session, *ctx->rs, id, &h, &off, &dims);
    fill(out, dtype, *dims, h, off, ctx->session->slots()[size_t(id)].location);
  });
}

nxrt_status* ctx_output(nxrt_kernel_context* ctx, size_t i, nxrt_dtype dtype, uint32_t rank, const int64_t* dims,
                        nxrt_tensor* out) {
  if (!ctx || !out || (rank && !dims)) return new_status(NXRT_INVALID_ARGUMENT, "ctx_output: NULL argument");
  if (!struct_ok(out))
    return new_status(NXRT_INVALID_ARGUMENT, fmt::format("ctx_output: tensor struct_size {} is too small", out->struct_size));
  const Step& step = *ctx->step;
  if (i >= step.outputs.size())
    return new_status(NXRT_INVALID_ARGUMENT, fmt::format("ctx_output: {} has {} outputs, asked for {}", step.label, step.outputs.size(), i));
  int id = step.outputs[i];
  if (id < 0) return new_status(NXRT_NOT_FOUND, fmt::format("output {} of {} is not used by the model", i, step.label));
  if (is_bound(*ctx, i)) return new_status(NXRT_INVALID_ARGUMENT, fmt::format("output {} of {} was bound twice", i, step.label));
  const Slot& slot = ctx->session->slots()[size_t(id)];
  // Disagreeing with the model's types or shape inference is the plugin's fault: the run
  // fails as a plugin failure even if the kernel then returns success.
  auto inconsistent = [&](std::string msg) {
    if (ctx->host_error.empty()) ctx->host_error = msg;
    return new_status(NXRT_INVALID_ARGUMENT, msg);
  };
  if (slot.dtype != NXRT_DTYPE_UNDEFINED && dtype != slot.dtype)
    return inconsistent(fmt::format("output {} of {} ('{}') is {} but the kernel produced {}", i, step.label, slot.value->name,
                                    dtype_name(slot.dtype), dtype_name(dtype)));
  thread_local std::vector<int64_t> d;  // reused: no allocation per output in steady state
  d.assign(dims, dims + rank);
  for (auto v : d)
    if (v < 0) return new_status(NXRT_INVALID_ARGUMENT, fmt::format("output {} of {}: negative dimension in {}", i, step.label, shape_str(d)));
  if (slot.value->rank >= 0) {
    bool ok = int64_t(rank) == slot.value->rank;
    for (size_t k = 0; ok && k < d.size(); ++k) ok = slot.value->dims[k] < 0 || slot.value->dims[k] == d[k];
    if (!ok)
      return inconsistent(fmt::format("output {} of {} ('{}') has shape {} but shape inference says {}", i, step.label,
                                      slot.value->name, shape_str(d), shape_str(slot.value->dims)));
  }
  if (dtype == NXRT_DTYPE_STRING && slot.location != 0)
    return new_status(NXRT_INVALID_ARGUMENT, fmt::format("output {} of {}: string tensors live in host memory", i, step.label));
  return to_status([&] {
    try {
      bind_slot(*ctx->session, *ctx->rs, id, d, dtype);
    } catch (const ValueTooLarge&) {
      ctx->host_refusal = std::current_exception();
      throw;
    }
    if (i < 64) ctx->bound |= 1ull << i;
    else {
      if (ctx->more.size() <= i - 64) ctx->more.resize(i - 63);
      ctx->more[i - 64] = true;
    }
    const SlotState& st = ctx->rs->state[size_t(id)];
    if (dtype == NXRT_DTYPE_STRING) {  // every element starts as the empty string
      std::memset(static_cast<char*>(st.handle) + st.offset, 0, size_t(element_count(d)) * sizeof(nxrt_string));
      // The run's pool for ctx_output_string_set, made once per run on the first string output
      // (locked: a kernel may bind outputs from several threads), so setting elements needs no lock.
      std::lock_guard lock(ctx->rs->strings_mu);
      if (!ctx->rs->strings) ctx->rs->strings = std::make_shared<StringPool>();
    }
    fill(out, dtype, st.dims, st.handle, st.offset, slot.location);
  });
}

nxrt_status* ctx_output_string_set(nxrt_kernel_context* ctx, size_t i, uint64_t element, const char* bytes, uint64_t size) {
  if (!ctx || !ctx->step || (size && !bytes)) return new_status(NXRT_INVALID_ARGUMENT, "ctx_output_string_set: NULL argument");
  const Step& step = *ctx->step;
  if (i >= step.outputs.size() || step.outputs[i] < 0)
    return new_status(NXRT_INVALID_ARGUMENT, fmt::format("ctx_output_string_set: {} has no output {}", step.label, i));
  const bool bound = is_bound(*ctx, i);
  const SlotState& st = ctx->rs->state[size_t(step.outputs[i])];
  if (!bound || st.dtype != NXRT_DTYPE_STRING)
    return new_status(NXRT_INVALID_ARGUMENT,
                      fmt::format("ctx_output_string_set: output {} of {} is not a bound string tensor", i, step.label));
  return to_status([&] {
    const uint64_t n = uint64_t(element_count(st.dims));
    if (element >= n) raise(NXRT_ERR_INVALID_ARGUMENT, "ctx_output_string_set: element {} of output {} of {} is past its {} elements",
                            element, i, step.label, n);
    reinterpret_cast<nxrt_string*>(static_cast<char*>(st.handle) + st.offset)[element] = ctx->rs->strings->add(bytes, size);
  });
}

int ctx_cancelled(const nxrt_kernel_context* ctx) {
  return ctx && ctx->rs && ctx->rs->cancel && ctx->rs->cancel->load() ? 1 : 0;
}

uint64_t ctx_run_id(const nxrt_kernel_context* ctx) { return ctx && ctx->rs ? ctx->rs->run_id : 0; }

std::unique_ptr<RunState> make_run_state(Session& s, const std::vector<uint64_t>& arena_bytes) {
  auto rs = std::make_unique<RunState>();
  rs->arenas.assign(arena_bytes.size(), nullptr);
  rs->streams.assign(s.eps().size(), nullptr);
  try {
    for (size_t loc = 0; loc < arena_bytes.size(); ++loc) {
      if (arena_bytes[loc] == 0) continue;
      if (loc == 0) {
        // Pinned when the plugin offers it, else plain host memory.
        if (s.pinned_ep() >= 0 && (rs->arenas[0] = s.eps()[size_t(s.pinned_ep())]->alloc_pinned(arena_bytes[0]))) {
          rs->pinned_arena_ep = s.pinned_ep();
          continue;
        }
        rs->arenas[0] = host_alloc(arena_bytes[0]);
        continue;
      }
      for (auto& ep : s.eps())
        if (ep->location == int(loc))
          rs->arenas[loc] = ep->alloc_device(arena_bytes[loc], fmt::format("allocating the {}-byte activation arena", arena_bytes[loc]),
                                             /*arena=*/true);
    }
    for (size_t e = 0; e < s.eps().size(); ++e) {
      EpInstance& ep = *s.eps()[e];
      if (ep.streams) check_plugin(*ep.lib, ep.lib->api().stream_create(ep.session, &rs->streams[e]), "creating a stream");
    }
  } catch (...) {
    free_run_state(s, *rs);
    throw;
  }
  rs->state.resize(s.slots().size());
  rs->values.resize(s.slots().size());
  rs->pending.assign(s.eps().size(), nullptr);
  rs->pending_set.assign(s.eps().size(), 0);
  rs->pending_stream.assign(s.eps().size(), nullptr);
  rs->events.resize(s.eps().size());
  return rs;
}

void free_run_state(Session& s, RunState& rs) {
  // Work a caller's stream may still run on this state's arenas: wait for it first.
  for (size_t e = 0; e < rs.pending.size(); ++e)
    if (rs.pending[e]) {
      const auto& api = s.eps()[e]->lib->api();
      if (rs.pending_set[e]) release_status(api.event_synchronize(rs.pending[e]));
      api.event_release(rs.pending[e]);
      rs.pending[e] = nullptr;
    }
  for (size_t e = 0; e < rs.events.size(); ++e) {
    for (nxrt_event* ev : rs.events[e]) s.eps()[e]->lib->api().event_release(ev);
    rs.events[e].clear();
  }
  for (size_t e = 0; e < rs.streams.size(); ++e)
    if (rs.streams[e]) {
      s.eps()[e]->lib->api().stream_release(rs.streams[e]);
      rs.streams[e] = nullptr;
    }
  for (size_t loc = 0; loc < rs.arenas.size(); ++loc) {
    if (!rs.arenas[loc]) continue;
    if (loc == 0 && rs.pinned_arena_ep >= 0) {
      s.eps()[size_t(rs.pinned_arena_ep)]->free_pinned(rs.arenas[0]);
    } else if (loc == 0) {
      std::free(rs.arenas[0]);
    } else
      for (auto& ep : s.eps())
        if (ep->location == int(loc)) ep->free_device(rs.arenas[loc]);
    rs.arenas[loc] = nullptr;
  }
}

std::unique_ptr<RunState> Session::acquire_run_state() {
  {
    std::lock_guard lock(pool_mu_);
    if (!pool_.empty()) {
      auto rs = std::move(pool_.back());
      pool_.pop_back();
      return rs;
    }
  }
  return make_run_state(*this, arena_bytes_);
}

void Session::settle_stream(nxrt_stream* stream) {
  std::lock_guard lock(pool_mu_);
  for (auto& rs : pool_)
    for (size_t e = 0; e < rs->pending.size(); ++e)
      if (rs->pending_set[e] && rs->pending_stream[e] == stream) {
        release_status(eps_[e]->lib->api().event_synchronize(rs->pending[e]));
        rs->pending_set[e] = 0;
        rs->pending_stream[e] = nullptr;
      }
}

void Session::release_run_state(std::unique_ptr<RunState> rs) {
  for (auto& st : rs->state) st.ready = false;
  for (auto& v : rs->values) v.reset();
  rs->outputs.clear();
  rs->output_values.clear();
  rs->cancel = nullptr;
  rs->output_override.clear();
  rs->bound_outputs = nullptr;
  std::lock_guard lock(pool_mu_);
  pool_.push_back(std::move(rs));
}

void Session::run(const nxrt_host_tensor* inputs, size_t count, std::vector<HostTensor>& outputs, const std::atomic<bool>* cancel,
                  const KeyValues* run_options, uint64_t* run_id_out) {
  if (count && !inputs) raise(NXRT_ERR_INVALID_ARGUMENT, "inputs is NULL");
  std::vector<BoundInput> given(count);
  for (size_t i = 0; i < count; ++i) {
    const nxrt_host_tensor& t = inputs[i];
    if (!t.name) raise(NXRT_ERR_INVALID_ARGUMENT, "input {} has no name", i);
    if (t.rank && !t.dims) raise(NXRT_ERR_INVALID_ARGUMENT, "input '{}' has rank {} but no dims", t.name, t.rank);
    given[i].name = t.name;
    given[i].dtype = nxrt_dtype(t.dtype);
    given[i].dims.assign(t.dims, t.dims + t.rank);
    given[i].host = t.data;
  }
  run_bound(given, nullptr, outputs, cancel, run_options, run_id_out, nullptr);
}

std::vector<BoundInput> Session::resolve_inputs(const std::vector<BoundInput>& inputs) const {
  const auto& m = *model_;
  std::vector<BoundInput> by_index(m.inputs.size());
  std::vector<char> seen(m.inputs.size(), 0);
  for (const BoundInput& t : inputs) {
    size_t k = 0;
    while (k < m.inputs.size() && m.inputs[k]->name != t.name) ++k;
    if (k == m.inputs.size()) {
      std::string names;
      for (auto* v : m.inputs) names += (names.empty() ? "" : ", ") + v->name;
      raise(NXRT_ERR_INVALID_ARGUMENT, "the model has no input named '{}' (its inputs: {})", t.name, names);
    }
    if (seen[k]) raise(NXRT_ERR_INVALID_ARGUMENT, "input '{}' was given twice", t.name);
    const nxrt_value& v = *m.inputs[k];
    if (v.kind != ValueKind::Tensor || t.value) {  // sequences and optionals: the kinds must agree
      const bool seq = v.kind == ValueKind::Sequence, opt = v.kind == ValueKind::Optional;
      BoundInput given = t;
      // An optional input takes a plain tensor or sequence as the optional holding it (a
      // Loop carrying an optional whose body returns the sequence, as ONNX allows).
      if (opt && (!t.value || t.value->kind != Value::Optional)) {
        auto o = std::make_shared<Value>();
        o->kind = Value::Optional;
        if (t.value) {
          o->items.push_back(t.value);
        } else {
          if (t.device) raise(NXRT_ERR_INVALID_ARGUMENT, "optional input '{}' cannot be a device tensor", t.name);
          // A copy owning its strings: the optional may be returned as an output.
          o->items.push_back(Value::of(copy_tensor(t.dtype, t.dims, t.host)));
        }
        given.value = o;
      }
      const bool ok = given.value && ((seq && given.value->kind == Value::Sequence) || (opt && given.value->kind == Value::Optional));
      if (!ok)
        raise(NXRT_ERR_INVALID_ARGUMENT, "input '{}' must be {}", t.name, seq ? "a sequence" : opt ? "an optional" : "a tensor");
      seen[k] = 1;
      by_index[k] = std::move(given);
      continue;
    }
    if (v.dtype != NXRT_DTYPE_UNDEFINED && t.dtype != v.dtype)
      raise(NXRT_ERR_INVALID_ARGUMENT, "input '{}' is {} but the model expects {}", t.name, dtype_name(t.dtype), dtype_name(v.dtype));
    for (auto d : t.dims)
      if (d < 0) raise(NXRT_ERR_INVALID_ARGUMENT, "input '{}' has a negative dimension {}", t.name, shape_str(t.dims));
    if (v.rank >= 0) {
      bool ok = int64_t(t.dims.size()) == v.rank;
      for (size_t d = 0; ok && d < t.dims.size(); ++d) ok = v.dims[d] < 0 || v.dims[d] == t.dims[d];
      if (!ok) raise(NXRT_ERR_INVALID_ARGUMENT, "input '{}' has shape {} but the model expects {}", t.name, shape_str(t.dims), shape_str(v.dims));
    }
    if (t.device) {
      if (ep_index(t.device->ep.get()) < 0)
        raise(NXRT_ERR_INVALID_ARGUMENT, "input '{}' is a device tensor of another session (EP '{}')", t.name, t.device->ep->lib->name());
    } else if (!t.host && element_count(t.dims) > 0) {
      raise(NXRT_ERR_INVALID_ARGUMENT, "input '{}' has no data", t.name);
    }
    seen[k] = 1;
    by_index[k] = t;
  }
  for (size_t k = 0; k < m.inputs.size(); ++k)
    if (!seen[k]) raise(NXRT_ERR_INVALID_ARGUMENT, "input '{}' was not given", m.inputs[k]->name);
  return by_index;
}

int Session::ep_index(const EpInstance* ep) const {
  for (size_t e = 0; e < eps_.size(); ++e)
    if (eps_[e].get() == ep) return int(e);
  return -1;
}

void Session::run_bound(const std::vector<BoundInput>& inputs, std::vector<BoundOutput>* bound_outputs,
                        std::vector<HostTensor>& outputs, const std::atomic<bool>* cancel, const KeyValues* run_options,
                        uint64_t* run_id_out, const CallerStream* caller, std::vector<ValuePtr>* values_out) {
  const auto& m = *model_;
  const std::vector<BoundInput> given = resolve_inputs(inputs);
  if (bound_outputs && bound_outputs->size() != m.outputs.size())
    raise(NXRT_ERR_INVALID_ARGUMENT, "output bindings for {} outputs, the model has {}", bound_outputs->size(), m.outputs.size());
  if (caller && (caller->ep < 0 || size_t(caller->ep) >= eps_.size() || !caller->stream))
    raise(NXRT_ERR_INVALID_ARGUMENT, "the stream is not one of this session's EPs");

  // Run options go to the hooks of the EP their prefix names.
  std::vector<KeyValues> ep_run_options(eps_.size());
  if (run_options)
    for (auto& [key, value] : *run_options) {
      auto ep_list = [&] {
        std::string s;
        for (auto& e : eps_) s += (s.empty() ? "" : ", ") + e->lib->name();
        return s;
      };
      const size_t dot = key.find('.');
      if (dot == std::string::npos || dot == 0)
        raise(NXRT_ERR_INVALID_ARGUMENT, "run option '{}' has no '<ep>.' prefix (this session's EPs: {})", key, ep_list());
      const std::string ep = key.substr(0, dot);
      size_t e = 0;
      while (e < eps_.size() && eps_[e]->lib->name() != ep) ++e;
      if (e == eps_.size())
        raise(NXRT_ERR_INVALID_ARGUMENT, "run option '{}' is for EP '{}', which this session does not use (its EPs: {})", key,
              ep, ep_list());
      ep_run_options[e].emplace_back(key, value);
    }
  const uint64_t run_id = next_run_id_.fetch_add(1, std::memory_order_relaxed);
  if (run_id_out) *run_id_out = run_id;

  std::shared_ptr<Profiler> prof;
  {
    std::lock_guard lock(profile_mu_);
    prof = profiler_;
  }
  const auto run_begin = Profiler::Clock::now();
  const uint64_t run_index = prof ? prof->next_run() : 0;
  const uint64_t thread = prof ? uint64_t(std::hash<std::thread::id>{}(std::this_thread::get_id())) : 0;
  auto record = [&](const std::string& name, const char* cat, int ep, const std::string& ops, Profiler::Clock::time_point b) {
    Profiler::Event ev;
    ev.name = name;
    ev.cat = cat;
    if (ep >= 0) ev.ep = eps_[size_t(ep)]->lib->name();
    ev.ops = ops;
    ev.begin = b;
    ev.end = Profiler::Clock::now();
    ev.thread = thread;
    ev.run = run_index;
    prof->add(std::move(ev));
  };
  // Host start of each step in this run (profiling): anchors the device clocks.
  std::vector<Profiler::Clock::time_point> step_begin(prof ? steps_.size() : 0);
  std::vector<char> step_ran(prof ? steps_.size() : 0, 0);

  auto rs = acquire_run_state();
  rs->cancel = cancel;
  rs->run_id = run_id;
  rs->outputs.assign(m.outputs.size(), HostTensor{});
  rs->output_values.assign(m.outputs.size(), nullptr);
  for (size_t k = 0; k < m.outputs.size(); ++k) {
    rs->outputs[k].name = m.outputs[k]->name;
    rs->outputs[k].dtype = m.outputs[k]->dtype;
  }
  // The streams of this run: the state's own, or the caller's for its EP.
  std::vector<nxrt_stream*> streams = rs->streams;
  if (caller) streams[size_t(caller->ep)] = caller->stream;
  // Steps this run leaves out: copies a bound device tensor makes unnecessary.
  std::vector<char> skip(steps_.size(), 0);
  // Graph outputs that could not be written in place: copied to their binding at the end.
  std::vector<size_t> bound_after;
  // Host transfers per EP in this run (a caller's stream with none may be left running).
  std::vector<char> host_transfer(eps_.size(), 0);
  // Ordering inside the run with the EPs' events instead of a host wait per copy: a
  // download into a host slot records an event that the host waits for only right before
  // something reads that slot. (Host sources of uploads need no wait: the planner keeps
  // them alive to the end of the run.)
  struct Pending {
    int ep = -1;
    nxrt_event* event = nullptr;
  };
  std::vector<Pending> download(slots_.size());
  std::vector<size_t> events_used(eps_.size(), 0);
  auto next_event = [&](int e) -> nxrt_event* {
    auto& pool = rs->events[size_t(e)];
    if (events_used[size_t(e)] == pool.size()) {
      nxrt_event* ev = nullptr;
      check_plugin(*eps_[size_t(e)]->lib, guarded(eps_[size_t(e)]->lib->name(), "event_create", [&] {
                     return eps_[size_t(e)]->lib->api().event_create(eps_[size_t(e)]->session, &ev);
                   }),
                   "creating an event");
      pool.push_back(ev);
    }
    return pool[events_used[size_t(e)]++];
  };
  auto host_wait = [&](const Pending& p, const std::string& why) {
    const auto t = prof ? Profiler::Clock::now() : Profiler::Clock::time_point{};
    EpInstance& ep = *eps_[size_t(p.ep)];
    check_plugin(*ep.lib, guarded(ep.lib->name(), "event_synchronize", [&] { return ep.lib->api().event_synchronize(p.event); }), why);
    if (prof) record("wait for " + why, "sync", p.ep, "sync", t);
  };
  auto wait_download = [&](int id) {
    if (download[size_t(id)].ep < 0) return;
    host_wait(download[size_t(id)], fmt::format("'{}' on the host", slots_[size_t(id)].value->name));
    download[size_t(id)] = Pending{};
  };

  nxrt_status_code failure_code = NXRT_INTERNAL;
  // Run hooks: on_run_start right before an EP session's first step of this run,
  // on_run_end once its work is complete (after the stream synchronization).
  std::vector<char> started(eps_.size(), 0);
  std::vector<std::unique_ptr<nxrt_profile_sink>> sinks(eps_.size());
  auto start_hooks = [&](int e) {
    EpInstance& ep = *eps_[size_t(e)];
    if (!ep.run_hooks || started[size_t(e)]) return;
    std::vector<nxrt_option> opts;
    for (auto& [k, v] : ep_run_options[size_t(e)]) opts.push_back(nxrt_option{sizeof(nxrt_option), k.c_str(), v.c_str()});
    std::vector<const nxrt_option*> ptrs;
    for (auto& o : opts) ptrs.push_back(&o);
    nxrt_run_options ro{};
    ro.struct_size = sizeof ro;
    ro.profiling = prof && ep.device_profiling ? 1 : 0;
    ro.run_id = run_id;
    ro.option_count = ptrs.size();
    ro.options = ptrs.empty() ? nullptr : ptrs.data();
    nxrt_status* st = guarded(ep.lib->name(), "on_run_start", [&] { return ep.lib->api().on_run_start(ep.session, &ro); });
    if (!st) {
      started[size_t(e)] = 1;
      if (ro.profiling) sinks[size_t(e)] = std::make_unique<nxrt_profile_sink>();
    }
    check_plugin(*ep.lib, st, "starting the run");
  };

  // failure: the run's error ("" on success), handed to on_run_end.
  auto finish = [&](bool ok, const std::string& failure, nxrt_status_code failure_code) {
    std::string sync_error, end_error;
    for (size_t e = 0; e < eps_.size(); ++e) {
      if (!streams[e]) continue;
      const auto& api = eps_[e]->lib->api();
      // A caller's stream with nothing of this run on the host side is left running:
      // the caller waits for it (natively or nxrt_device_stream_synchronize). The state's
      // arenas are then in use until an event recorded on it completes.
      const bool allocated = std::any_of(rs->device_dynamic.begin(), rs->device_dynamic.end(),
                                         [&](const auto& d) { return d.first == int(e); });
      if (caller && int(e) == caller->ep && ok && !prof && !host_transfer[e] && !allocated) {
        nxrt_status* st = nullptr;
        if (!rs->pending[e]) st = api.event_create(eps_[e]->session, &rs->pending[e]);
        if (!st) st = api.event_record(rs->pending[e], streams[e]);
        if (!st) {
          rs->pending_set[e] = 1;
          rs->pending_stream[e] = streams[e];
          continue;
        }
        release_status(st);  // could not record: wait instead
      }
      nxrt_status* st = nullptr;
      try {
        st = guarded(eps_[e]->lib->name(), "stream_synchronize", [&] { return api.stream_synchronize(streams[e]); });
      } catch (const HostError& err) {
        if (sync_error.empty()) sync_error = err.what();
      }
      if (st) {
        if (sync_error.empty()) sync_error = fmt::format("{}: {}", eps_[e]->lib->name(), st->message);
        release_status(st);
      }
    }
    nxrt_status* run_status = nullptr;
    if (!ok) run_status = new_status(failure_code, failure);
    else if (!sync_error.empty()) run_status = new_status(NXRT_INTERNAL, "device work failed: " + sync_error);
    for (size_t e = 0; e < eps_.size(); ++e) {
      if (!started[e]) continue;
      EpInstance& ep = *eps_[e];
      nxrt_status* st = nullptr;
      try {
        st = guarded(ep.lib->name(), "on_run_end",
                     [&] { return ep.lib->api().on_run_end(ep.session, run_id, run_status, sinks[e].get()); });
      } catch (const HostError& err) {
        if (end_error.empty()) end_error = err.what();
      }
      if (st) {
        if (end_error.empty())
          end_error = fmt::format("ending the run ({}): {}: {}", ep.lib->name(), status_code_name(st->code), st->message);
        release_status(st);
      }
    }
    release_status(run_status);
    if (prof) merge_device_events(*prof, sinks, step_begin, step_ran, run_index);
    for (auto& [e, h] : rs->device_dynamic) eps_[size_t(e)]->free_device(h);
    rs->device_dynamic.clear();
    for (void* p : rs->host_dynamic) std::free(p);
    rs->host_dynamic.clear();
    if (ok && sync_error.empty() && end_error.empty()) {
      for (HostTensor& t : rs->outputs) own_strings(t);  // off the run's pools and the caller's feeds
      outputs = std::move(rs->outputs);
      if (values_out) *values_out = std::move(rs->output_values);
    }
    // A failed run leaves no half-written device outputs behind.
    if (bound_outputs && !(ok && sync_error.empty() && end_error.empty()))
      for (auto& o : *bound_outputs)
        if (o.kind == BoundOutput::Leave) o.tensor.reset();
    rs->strings.reset();
    rs->keep.clear();
    release_run_state(std::move(rs));
    if (ok && !sync_error.empty()) raise(NXRT_ERR_RUNTIME, "device work failed: {}", sync_error);
    if (ok && !end_error.empty()) raise(NXRT_ERR_PLUGIN, "{}", end_error);
  };

  // A copy between host memory and a device tensor (bindings), on EP e's stream of this
  // run and waited for.
  auto sync_copy = [&](int e, const nxrt_copy_region& r, const std::string& what) {
    if (!r.bytes) return;
    EpInstance& ep = *eps_[size_t(e)];
    nxrt_stream* stream = streams[size_t(e)];
    ep.copy(r, stream, what);
    if (stream)
      check_plugin(*ep.lib, guarded(ep.lib->name(), "stream_synchronize", [&] { return ep.lib->api().stream_synchronize(stream); }), what);
    host_transfer[size_t(e)] = 1;
  };

  try {
    // Work a caller's stream of an earlier run on this state may still do comes first.
    for (size_t e = 0; e < eps_.size(); ++e)
      if (rs->pending_set[e]) {
        const auto& api = eps_[e]->lib->api();
        if (streams[e]) check_plugin(*eps_[e]->lib, api.stream_wait_event(streams[e], rs->pending[e]), "ordering after the previous run");
        else check_plugin(*eps_[e]->lib, api.event_synchronize(rs->pending[e]), "waiting for the previous run");
        rs->pending_set[e] = 0;
      }

    for (size_t id = 0; id < slots_.size(); ++id) {
      const Slot& slot = slots_[id];
      if (slot.graph_input < 0) continue;
      const BoundInput& t = given[size_t(slot.graph_input)];
      SlotState& st = rs->state[id];
      st.dims = t.dims;
      st.dtype = t.dtype;
      if (t.value) {  // a sequence or optional: the host's own
        rs->values[id] = t.value;
        st.handle = nullptr;
        st.offset = 0;
        st.ready = true;
        continue;
      }
      if (!t.device) {
        st.handle = const_cast<void*>(t.host);
        st.offset = 0;
        st.ready = true;
        continue;
      }
      // A device tensor: the copies to its own memory location become aliases of it.
      const DeviceTensor& d = *t.device;
      const int loc = d.ep->location;
      if (loc == 0) {  // host-addressable EP memory: the host slot reads it in place
        st.handle = static_cast<char*>(d.handle) + d.offset;
        st.offset = 0;
        st.ready = true;
        continue;
      }
      bool host_needed = std::find(output_slot_.begin(), output_slot_.end(), int(id)) != output_slot_.end();
      for (int si : input_readers_[size_t(slot.graph_input)]) {
        const int dst = steps_[size_t(si)].kind == Step::Copy ? steps_[size_t(si)].outputs[0] : -1;
        if (dst >= 0 && slots_[size_t(dst)].location == loc) {
          skip[size_t(si)] = 1;
          SlotState& ds = rs->state[size_t(dst)];
          ds.handle = d.handle;
          ds.offset = d.offset;
          ds.dims = d.dims;
          ds.dtype = d.dtype;
          ds.ready = true;
        } else {
          host_needed = true;
        }
      }
      if (host_needed) {  // something on the host (or another device) reads it: one download
        const int e = ep_index(d.ep.get());
        void* h = host_alloc(d.bytes);
        rs->host_dynamic.push_back(h);
        sync_copy(e, copy_region(NXRT_MEMORY_DEVICE, d.handle, d.offset, NXRT_MEMORY_HOST, h, 0, d.bytes),
                  fmt::format("downloading device input '{}'", t.name));
        st.handle = h;
        st.offset = 0;
        st.ready = true;
      }
    }

    // Outputs bound to device memory are written in place by the kernel that makes them
    // when it runs on that memory; its download to the host is then left out.
    if (bound_outputs) {
      rs->output_override.assign(slots_.size(), -1);
      rs->bound_outputs = bound_outputs;
      for (size_t k = 0; k < m.outputs.size(); ++k) {
        BoundOutput& o = (*bound_outputs)[k];
        if (o.kind == BoundOutput::Host) continue;
        if (o.kind == BoundOutput::Leave) o.tensor.reset();
        const int e = o.kind == BoundOutput::Device ? ep_index(o.tensor->ep.get()) : o.ep;
        if (e < 0) raise(NXRT_ERR_INVALID_ARGUMENT, "output '{}' is bound to a device tensor of another session", m.outputs[k]->name);
        if (o.kind == BoundOutput::Leave) o.ep = e;
        const int loc = eps_[size_t(e)]->location;
        const int home = output_home_[k];  // the slot a kernel writes the value into
        if (home < 0 || slots_[size_t(home)].location != loc || rs->output_override[size_t(home)] >= 0) {
          bound_after.push_back(k);
          continue;
        }
        rs->output_override[size_t(home)] = int(k);
        // The download home -> host slot is needed only if something else reads the host slot.
        if (output_download_[k] >= 0 && !output_host_read_[k]) skip[size_t(output_download_[k])] = 1;
      }
    }

    for (size_t si = 0; si < steps_.size(); ++si) {
      const Step& step = steps_[si];
      if (skip[si]) continue;
      if (cancel && cancel->load()) {
        failure_code = NXRT_CANCELLED;
        raise(NXRT_ERR_RUNTIME, "run cancelled before {}", step.label);
      }
      for (int in : step.inputs)
        if (in >= 0) wait_download(in);
      if (step.kind == Step::Host) {
        const auto step_start = prof ? Profiler::Clock::now() : Profiler::Clock::time_point{};
        run_host_step(*this, *rs, step);
        if (prof) record(step.label, "host", -1, step.ops, step_start);
        continue;
      }
      start_hooks(step.ep);
      const auto step_start = prof ? Profiler::Clock::now() : Profiler::Clock::time_point{};
      if (prof) {
        step_begin[si] = step_start;
        step_ran[si] = 1;
      }
      EpInstance& ep = *eps_[size_t(step.ep)];
      const auto& api = ep.lib->api();
      if (step.kind == Step::Copy) {
        int src = step.inputs[0], dst = step.outputs[0];
        void* h;
        uint64_t off;
        const std::vector<int64_t>* dims;
        nxrt_dtype dtype = read_slot(*this, *rs, src, &h, &off, &dims);
        std::vector<int64_t> d = *dims;
        bind_slot(*this, *rs, dst, d, dtype);
        const SlotState& ds = rs->state[size_t(dst)];
        // Host values in a pinned arena are that plugin's HOST_PINNED memory.
        auto kind = [&](int id, void* handle) -> nxrt_memory_kind {
          if (slots_[size_t(id)].location != 0) return NXRT_MEMORY_DEVICE;
          return rs->pinned_arena_ep == step.ep && handle == rs->arenas[0] ? NXRT_MEMORY_HOST_PINNED : NXRT_MEMORY_HOST;
        };
        const nxrt_copy_region r = copy_region(kind(src, h), h, off, kind(dst, ds.handle), ds.handle, ds.offset,
                                               uint64_t(element_count(d)) * dtype_size(dtype));
        nxrt_stream* stream = streams[size_t(step.ep)];
        if (slots_[size_t(src)].location == 0 || slots_[size_t(dst)].location == 0) host_transfer[size_t(step.ep)] = 1;
        ep.copy(r, stream, step.label);
        // A download is ordered on the stream; its event says when the host may read it.
        if (stream && r.bytes && slots_[size_t(dst)].location == 0) {
          Pending p{step.ep, next_event(step.ep)};
          check_plugin(*ep.lib, guarded(ep.lib->name(), "event_record", [&] { return api.event_record(p.event, stream); }), step.label);
          download[size_t(dst)] = p;
        }
        if (prof) record(step.label, "copy", step.ep, step.ops, step_start);
        continue;
      }
      nxrt_kernel_context ctx;
      ctx.rs = rs.get();
      ctx.session = this;
      ctx.step = &step;
      ctx.stream = streams[size_t(step.ep)];
      const std::vector<InputDigest> digests = check_read_only_inputs() ? digest_inputs(*this, *rs, step) : std::vector<InputDigest>{};
      // Messages are built only on failure: this is the per-node path of every run.
      nxrt_status* st = nullptr;
      try {
        std::unique_lock<std::mutex> lock;
        if (step.serial) lock = std::unique_lock<std::mutex>(*step.serial);
        st = api.kernel_compute(step.kernel, &ctx);
      } catch (...) {
        throw_abi_exception(ep.lib->name(), "kernel_compute for " + step.label);
      }
      if (ctx.host_refusal) {
        release_status(st);
        std::rethrow_exception(ctx.host_refusal);
      }
      if (!ctx.host_error.empty()) {
        release_status(st);
        raise(NXRT_ERR_PLUGIN, "plugin '{}' failed a host check in {}: {}", ep.lib->name(), step.label, ctx.host_error);
      }
      if (st) check_plugin(*ep.lib, st, fmt::format("running {}", step.label));
      if (!digests.empty()) {
        if (ctx.stream)
          check_plugin(*ep.lib, guarded(ep.lib->name(), "stream_synchronize", [&] { return api.stream_synchronize(ctx.stream); }),
                       step.label);
        verify_inputs(*this, *rs, step, digests, ep.lib->name());
      }
      for (size_t o = 0; o < step.outputs.size(); ++o)
        if (step.outputs[o] >= 0 && !rs->state[size_t(step.outputs[o])].ready)
          raise(NXRT_ERR_PLUGIN, "plugin '{}' did not produce output {} ('{}') of {}", ep.lib->name(), o,
                slots_[size_t(step.outputs[o])].value->name, step.label);
      if (prof) record(step.label, "kernel", step.ep, step.ops, step_start);
    }
    for (size_t id = 0; id < download.size(); ++id) wait_download(int(id));
    auto device_bound = [&](size_t k) { return bound_outputs && (*bound_outputs)[k].kind != BoundOutput::Host; };
    // Host results: outputs produced into the result buffer take their shape; the others
    // (inputs, constants, repeats) are copied. Outputs written in place on a device skip this.
    for (size_t k = 0; k < m.outputs.size(); ++k) {
      if (device_bound(k) && std::find(bound_after.begin(), bound_after.end(), k) == bound_after.end()) continue;
      int id = output_slot_[k];
      if (rs->values[size_t(id)]) {  // a sequence or optional
        if (!rs->state[size_t(id)].ready) raise(NXRT_ERR_RUNTIME, "output '{}' was not produced", m.outputs[k]->name);
        rs->output_values[k] = rs->values[size_t(id)];
        rs->outputs[k].dims.clear();
        rs->outputs[k].data.clear();
        continue;
      }
      if (slots_[size_t(id)].graph_output == int(k)) {
        rs->outputs[k].dims = rs->state[size_t(id)].dims;
        rs->outputs[k].dtype = rs->state[size_t(id)].dtype;
        continue;
      }
      void* h;
      uint64_t off;
      const std::vector<int64_t>* dims;
      nxrt_dtype dtype = read_slot(*this, *rs, id, &h, &off, &dims);
      HostTensor& out = rs->outputs[k];
      out.dims = *dims;
      out.dtype = dtype;
      output_buffers_->size_output(out.data, size_t(element_count(out.dims)) * dtype_size(out.dtype));
      if (!out.data.empty()) std::memcpy(out.data.data(), static_cast<char*>(h) + off, out.data.size());
    }
    // Bound outputs that were made elsewhere: one upload from their host copy.
    for (size_t k : bound_after) {
      BoundOutput& o = (*bound_outputs)[k];
      HostTensor& src = rs->outputs[k];
      if (o.kind == BoundOutput::Leave) {
        o.tensor = DeviceTensor::allocate(eps_[size_t(o.ep)], src.dtype, src.dims);
      } else if (o.tensor->dtype != src.dtype || o.tensor->dims != src.dims) {
        raise(NXRT_ERR_INVALID_ARGUMENT, "output '{}' is {} {} but the device tensor bound to it is {} {}", m.outputs[k]->name,
              dtype_name(src.dtype), shape_str(src.dims), dtype_name(o.tensor->dtype), shape_str(o.tensor->dims));
      }
      const int e = ep_index(o.tensor->ep.get());
      sync_copy(e, copy_region(NXRT_MEMORY_HOST, src.data.data(), 0, NXRT_MEMORY_DEVICE, o.tensor->handle, o.tensor->offset,
                               src.data.size()),
                fmt::format("uploading output '{}' to its device tensor", m.outputs[k]->name));
    }
    // Device-bound outputs carry their shape in the host list, without data.
    for (size_t k = 0; k < m.outputs.size(); ++k)
      if (device_bound(k) && (*bound_outputs)[k].tensor) {
        rs->outputs[k].dims = (*bound_outputs)[k].tensor->dims;
        rs->outputs[k].dtype = (*bound_outputs)[k].tensor->dtype;
        rs->outputs[k].data.clear();
      }
  } catch (const std::exception& e) {
    finish(false, e.what(), failure_code);
    throw;
  } catch (...) {
    finish(false, "unknown error", failure_code);
    throw;
  }
  finish(true, "", NXRT_OK);
  if (prof) record("run", "run", -1, "", run_begin);
}

// Device timings of one profiled run into the trace, one track per EP. Alignment (see
// profiler.hpp): the earliest device event is placed at the host start of its kernel's
// step in this run; the others keep their device-clock offsets from it.
void Session::merge_device_events(Profiler& prof, const std::vector<std::unique_ptr<nxrt_profile_sink>>& sinks,
                                  const std::vector<Profiler::Clock::time_point>& step_begin,
                                  const std::vector<char>& step_ran, uint64_t run_index) const {
  for (size_t e = 0; e < sinks.size(); ++e) {
    if (!sinks[e]) continue;
    std::vector<nxrt_profile_sink::Event> events;
    {
      std::lock_guard lock(sinks[e]->mu);
      events = std::move(sinks[e]->events);
    }
    if (events.empty()) continue;
    auto step_of = [&](size_t node) -> int {
      for (size_t si = 0; si < steps_.size(); ++si)
        if (steps_[si].kind == Step::Kernel && steps_[si].ep == int(e) &&
            std::find(steps_[si].nodes.begin(), steps_[si].nodes.end(), node) != steps_[si].nodes.end())
          return int(si);
      return -1;
    };
    const auto first = std::min_element(events.begin(), events.end(),
                                        [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
    int anchor = step_of(first->node_index);
    if (anchor < 0 || !step_ran[size_t(anchor)])
      for (size_t si = 0; si < steps_.size() && (anchor < 0 || !step_ran[size_t(anchor)]); ++si)
        if (steps_[si].ep == int(e) && step_ran[si]) anchor = int(si);
    if (anchor < 0 || !step_ran[size_t(anchor)]) continue;
    const auto origin = step_begin[size_t(anchor)];
    const uint64_t device_origin = first->start_ns;
    const std::string ep_name = eps_[e]->lib->name();
    for (auto& ev : events) {
      Profiler::Event out;
      const int si = step_of(ev.node_index);
      out.name = !ev.name.empty() ? ev.name : si >= 0 ? steps_[size_t(si)].label : fmt::format("node {}", ev.node_index);
      out.cat = "device";
      out.ep = ep_name;
      out.ops = si >= 0 ? steps_[size_t(si)].ops : std::string();
      out.begin = origin + std::chrono::nanoseconds(int64_t(ev.start_ns - device_origin));
      out.end = out.begin + std::chrono::nanoseconds(int64_t(ev.end_ns - ev.start_ns));
      out.run = run_index;
      out.track = ep_name + " device";
      out.node = int64_t(ev.node_index);
      prof.add(std::move(out));
    }
  }
}

void Session::start_profiling() {
  std::lock_guard lock(profile_mu_);
  if (!profiler_) profiler_ = std::make_shared<Profiler>();
}

size_t Session::end_profiling(const std::string& path) {
  std::shared_ptr<Profiler> p;
  {
    std::lock_guard lock(profile_mu_);
    p = profiler_;
  }
  if (!p) raise(NXRT_ERR_INVALID_ARGUMENT, "profiling was not started on this session");
  const size_t written = p->write_chrome_trace(path);  // runs in flight may add more; not in the file
  std::lock_guard lock(profile_mu_);
  if (profiler_ == p) profiler_.reset();
  return written;
}

}  // namespace nxrt
