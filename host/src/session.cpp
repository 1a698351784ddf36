// Session preparation: opens EP sessions (options checked against the schemas), then
// partitions (partitioner.cpp), binds kernels, places values and inserts copies,
// plans memory (planner.cpp) and uploads constants. Runs are executor.cpp's.
#include "session.hpp"
#include "plugin_text.hpp"

#include "partitioner.hpp"
#include "compiled_model.hpp"
#include "control_flow.hpp"
#include "error.hpp"
#include "executor.hpp"
#include "status.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <queue>
#include <set>

namespace nxrt {

void* EpInstance::alloc_device(uint64_t bytes, const std::string& what, bool arena) {
  // The cap covers what the host asks for; the reservation is taken before the plugin is
  // asked, so concurrent runs cannot overshoot it together.
  if (policy && policy->limit) {
    uint64_t held = policy->in_use.load();
    do {
      if (held + bytes > policy->limit)
        raise(NXRT_ERR_RESOURCE_EXHAUSTED,
              "{}: the session's device memory limit is {} bytes, it holds {} and needs {} more (EP '{}')", what,
              policy->limit, held, bytes, lib->name());
    } while (!policy->in_use.compare_exchange_weak(held, held + bytes));
  } else if (policy) {
    policy->in_use += bytes;
  }
  void* h = nullptr;
  try {
    check_plugin(*lib, retry_once([&] {
                   return guarded(lib->name(), "memory_alloc", [&] {
                     return lib->api().memory_alloc(session, NXRT_MEMORY_DEVICE, bytes, NXRT_TENSOR_ALIGNMENT, &h);
                   });
                 }),
                 what);
    if (!h) raise(NXRT_ERR_PLUGIN, "{}: plugin '{}' returned a NULL allocation", what, lib->name());
  } catch (...) {
    if (policy) policy->in_use -= bytes;
    throw;
  }
  std::lock_guard lock(mem_mu_);
  held_[h] = {bytes, arena};
  usage_.bytes_in_use += bytes;
  usage_.peak_bytes = std::max(usage_.peak_bytes, usage_.bytes_in_use);
  if (arena) usage_.arena_bytes += bytes;
  ++usage_.allocation_count;
  return h;
}

void EpInstance::free_device(void* handle) {
  if (!handle) return;
  {
    std::lock_guard lock(mem_mu_);
    auto it = held_.find(handle);
    if (it != held_.end()) {
      usage_.bytes_in_use -= it->second.first;
      if (it->second.second) usage_.arena_bytes -= it->second.first;
      if (policy) policy->in_use -= it->second.first;
      held_.erase(it);
    }
  }
  lib->api().memory_free(session, NXRT_MEMORY_DEVICE, handle);
}

nxrt_copy_region copy_region(nxrt_memory_kind src_kind, const void* src, uint64_t src_offset, nxrt_memory_kind dst_kind,
                             void* dst, uint64_t dst_offset, uint64_t bytes) {
  nxrt_copy_region r{};
  r.struct_size = sizeof r;
  r.src_memory = src_kind;
  r.src = src;
  r.src_offset = src_offset;
  r.dst_memory = dst_kind;
  r.dst = dst;
  r.dst_offset = dst_offset;
  r.bytes = bytes;
  return r;
}

void* EpInstance::alloc_pinned(uint64_t bytes) const {
  void* h = nullptr;
  nxrt_status* st = guarded(lib->name(), "memory_alloc", [&] {
    return lib->api().memory_alloc(session, NXRT_MEMORY_HOST_PINNED, bytes, NXRT_TENSOR_ALIGNMENT, &h);
  });
  if (st) {
    release_status(st);
    return nullptr;
  }
  return h;
}

void EpInstance::free_pinned(void* pointer) const {
  if (pointer) lib->api().memory_free(session, NXRT_MEMORY_HOST_PINNED, pointer);
}

void EpInstance::copy(const nxrt_copy_region& region, nxrt_stream* stream, const std::string& what) const {
  if (!region.bytes) return;
  const nxrt_copy_region* r = &region;
  check_plugin(*lib, guarded(lib->name(), "copy", [&] { return lib->api().copy(session, &r, 1, stream); }), what);
}

bool EpInstance::native_memory(const void* handle, nxrt_native_handle* out) const {
  if (!lib->has(NXRT_FEATURE_NATIVE_HANDLES)) return false;
  *out = nxrt_native_handle{};
  out->struct_size = sizeof *out;
  nxrt_status* st = guarded(lib->name(), "native_handle", [&] {
    return lib->api().native_handle(session, NXRT_NATIVE_OBJECT_MEMORY, handle, out);
  });
  if (st && st->code == NXRT_UNSUPPORTED) {
    release_status(st);
    return false;
  }
  check_plugin(*lib, st, "reading the native handle of device memory");
  return true;
}

void* EpInstance::import_memory(const nxrt_native_handle& native, std::string* why) const {
  if (!lib->has(NXRT_FEATURE_MEMORY_IMPORT)) {
    *why = fmt::format("plugin '{}' does not import memory (no memory-import feature)", lib->name());
    return nullptr;
  }
  void* h = nullptr;
  nxrt_status* st = guarded(lib->name(), "memory_import", [&] { return lib->api().memory_import(session, &native, &h); });
  if (st && st->code == NXRT_UNSUPPORTED) {
    *why = fmt::format("EP '{}' cannot import it: {}", lib->name(), st->message);
    release_status(st);
    return nullptr;
  }
  check_plugin(*lib, st, "importing memory");
  if (!h) raise(NXRT_ERR_PLUGIN, "plugin '{}' imported memory but returned a NULL handle", lib->name());
  return h;
}

EpMemoryUsage EpInstance::usage() const {
  std::lock_guard lock(mem_mu_);
  return usage_;
}

bool EpInstance::plugin_stats(nxrt_memory_stats* out) const {
  if (!lib->has(NXRT_FEATURE_MEMORY_STATS)) return false;
  *out = nxrt_memory_stats{};
  out->struct_size = sizeof *out;
  check_plugin(*lib, guarded(lib->name(), "session_stats", [&] { return lib->api().session_stats(session, out); }),
               "reading memory stats");
  return true;
}

EpInstance::~EpInstance() {
  if (session) lib->api().session_release(session);
}

namespace {

// What session_create and session_create_offline are given: the host's "threads", then
// this plugin's own "<name>." options, as the ABI's array of pointers (valid while this lives).
struct SessionOptionArray {
  std::string threads;
  std::vector<nxrt_option> opts;
  std::vector<const nxrt_option*> ptrs;
  SessionOptionArray(const std::string& name, int t, const KeyValues& options) : threads(std::to_string(t)) {
    const std::string prefix = name + ".";
    opts.push_back(nxrt_option{sizeof(nxrt_option), "threads", threads.c_str()});
    for (auto& [k, v] : options)
      if (k.compare(0, prefix.size(), prefix) == 0) opts.push_back(nxrt_option{sizeof(nxrt_option), k.c_str(), v.c_str()});
    for (auto& o : opts) ptrs.push_back(&o);
  }
  SessionOptionArray(const SessionOptionArray&) = delete;  // ptrs point into it
};

}  // namespace

std::unique_ptr<EpInstance> EpInstance::create(std::shared_ptr<PluginLibrary> lib, uint32_t device, int threads,
                                               const KeyValues& options, std::shared_ptr<MemoryPolicy> policy) {
  const std::string& name = lib->name();
  if (lib->devices().empty()) raise(NXRT_ERR_NOT_FOUND, "EP '{}' has no device: {}", name, lib->no_device_reason());
  if (device >= lib->devices().size())
    raise(NXRT_ERR_NOT_FOUND, "EP '{}' has no device {} (it has {})", name, device, lib->devices().size());
  auto inst = std::make_unique<EpInstance>();
  inst->lib = lib;
  inst->device = device;
  SessionOptionArray o(name, threads, options);
  nxrt_status* st = retry_once([&] {
    inst->session = nullptr;
    return guarded(name, "session_create", [&] {
      return lib->api().session_create(lib->instance(), device, o.ptrs.data(), o.ptrs.size(), &inst->session);
    });
  });
  // An out-of-range option value is the user's mistake: INVALID_ARGUMENT stays one.
  check_plugin(*lib, st, "creating an EP session", /*user_input=*/true);
  if (!inst->session) raise(NXRT_ERR_PLUGIN, "plugin '{}' returned no session", name);
  inst->host_addressable = lib->devices()[device].host_addressable;
  inst->streams = lib->has(NXRT_FEATURE_STREAMS);
  inst->concurrent = lib->has(NXRT_FEATURE_CONCURRENT_RUN);
  inst->run_hooks = lib->has(NXRT_FEATURE_RUN_HOOKS);
  inst->device_profiling = inst->run_hooks && lib->has(NXRT_FEATURE_DEVICE_PROFILING);
  inst->policy = policy ? std::move(policy) : std::make_shared<MemoryPolicy>();
  if (inst->policy->has_allocator) {
    if (!lib->has(NXRT_FEATURE_EXTERNAL_ALLOCATOR))
      raise(NXRT_ERR_UNSUPPORTED, "EP '{}' cannot take an external device allocator (plugin {} lacks the external-allocator feature)",
            name, lib->path().string());
    check_plugin(*lib, guarded(name, "session_set_allocator",
                               [&] { return lib->api().session_set_allocator(inst->session, &inst->policy->allocator); }),
                 "handing the session the external allocator");
  }
  return inst;
}

std::unique_ptr<EpInstance> EpInstance::create_offline(std::shared_ptr<PluginLibrary> lib, const KeyValues& device, int threads,
                                                       const KeyValues& options) {
  const std::string& name = lib->name();
  if (!lib->has(NXRT_FEATURE_OFFLINE_COMPILE))
    raise(NXRT_ERR_UNSUPPORTED, "EP '{}' cannot compile for a described device (plugin {} lacks the offline-compile feature)",
          name, lib->path().string());
  auto inst = std::make_unique<EpInstance>();
  inst->lib = lib;
  inst->offline = true;
  SessionOptionArray o(name, threads, options);
  std::vector<nxrt_property> props;
  for (auto& [k, v] : device) props.push_back(nxrt_property{sizeof(nxrt_property), k.c_str(), v.c_str()});
  std::vector<const nxrt_property*> pp;
  for (auto& p : props) pp.push_back(&p);
  check_plugin(*lib, guarded(name, "session_create_offline", [&] {
                 return lib->api().session_create_offline(lib->instance(), pp.data(), pp.size(), o.ptrs.data(), o.ptrs.size(),
                                                          &inst->session);
               }),
               "creating a compile-only session for the described device", /*user_input=*/true);
  if (!inst->session) raise(NXRT_ERR_PLUGIN, "plugin '{}' returned no compile-only session", name);
  for (auto& [k, v] : device)
    if (k == "host_addressable") inst->host_addressable = v == "1" || v == "yes" || v == "true";
  inst->streams = lib->has(NXRT_FEATURE_STREAMS);
  inst->concurrent = lib->has(NXRT_FEATURE_CONCURRENT_RUN);
  inst->policy = std::make_shared<MemoryPolicy>();
  return inst;
}

KeyValues validate_ep_options(const KeyValues& options, const std::vector<std::shared_ptr<PluginLibrary>>& eps,
                              const std::vector<std::shared_ptr<PluginLibrary>>& fallback_libs, int* threads) {
  KeyValues out;
  auto listed = [&] {
    std::string s;
    for (auto& l : eps) s += (s.empty() ? "" : ",") + l->name();
    return s.empty() ? std::string("none") : s;
  };
  for (auto& [key, value] : options) {
    const size_t dot = key.find('.');
    if (dot == std::string::npos) {
      if (key == "cache_dir") continue;  // the host's compiled-model cache (env.cpp)
      if (key != "threads") raise(NXRT_ERR_INVALID_ARGUMENT, "option '{}' has no '<ep>.' prefix (host options: threads, cache_dir)", key);
      char* end = nullptr;
      errno = 0;
      long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end || errno || n < 0 || n > (1 << 20))
        raise(NXRT_ERR_INVALID_ARGUMENT, "option 'threads' needs an integer >= 0, got '{}'", value);
      if (threads) *threads = int(n);
      continue;
    }
    const std::string ep = key.substr(0, dot);
    std::shared_ptr<PluginLibrary> lib;
    for (auto& l : eps) if (l->name() == ep) lib = l;
    if (!lib) for (auto& l : fallback_libs) if (l->name() == ep) lib = l;
    if (!lib) raise(NXRT_ERR_INVALID_ARGUMENT, "option '{}' is for EP '{}', which is not in the EP list ({})", key, ep, listed());
    const OptionInfo* info = lib->find_option(key);
    const std::string known = lib->options().empty() ? std::string("it has no options")
                                                     : fmt::format("its options: {}", lib->option_names());
    if (!info) raise(NXRT_ERR_INVALID_ARGUMENT, "unknown option '{}' for EP '{}' ({})", key, ep, known);
    if (!option_value_ok(info->type, value)) {
      const char* want = info->type == NXRT_OPTION_INT ? "an int" : info->type == NXRT_OPTION_FLOAT ? "a float" : "a bool (0, 1, true, false)";
      raise(NXRT_ERR_INVALID_ARGUMENT, "option '{}' for EP '{}' needs {}, got '{}' ({})", key, ep, want, value, known);
    }
    bool replaced = false;
    for (auto& kv : out)
      if (kv.first == key) { kv.second = value; replaced = true; }
    if (!replaced) out.emplace_back(key, value);
  }
  return out;
}

namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

Session::Session(std::shared_ptr<const nxrt_model_ir> model, std::vector<std::unique_ptr<EpInstance>> eps, bool fallback,
                 std::vector<std::shared_ptr<PluginLibrary>> fallback_libs, int threads, uint32_t device,
                 bool owns_model, KeyValues ep_options, std::shared_ptr<MemoryPolicy> policy,
                 std::shared_ptr<KernelCache> cache, bool compile_only)
    : model_(std::move(model)),
      eps_(std::make_move_iterator(eps.begin()), std::make_move_iterator(eps.end())),
      policy_(policy ? std::move(policy) : std::make_shared<MemoryPolicy>()),
      owns_model_(owns_model),
      ep_options_(std::move(ep_options)),
      cache_(std::move(cache)),
      compile_only_(compile_only) {
  prepare(fallback, fallback_libs, threads, device);
}

Session::Session(std::shared_ptr<const nxrt_model_ir> model, const Session& parent)
    : model_(std::move(model)), eps_(parent.eps_), policy_(parent.policy_), ep_options_(parent.ep_options_) {
  prepare(parent.fallback_, parent.fallback_libs_, parent.threads_, parent.device_);
}

void Session::prepare(bool fallback, const std::vector<std::shared_ptr<PluginLibrary>>& fallback_libs, int threads,
                      uint32_t device) {
  fallback_ = fallback;
  fallback_libs_ = fallback_libs;
  threads_ = threads;
  device_ = device;
  output_buffers_ = std::make_shared<OutputBuffers>(std::max<size_t>(2, 2 * model_->outputs.size()));
  try {
    auto t = std::chrono::steady_clock::now();
    auto stage = [&](const char* name) {
      const auto now = std::chrono::steady_clock::now();
      load_stages_.emplace_back(name, std::chrono::duration<double, std::milli>(now - t).count());
      t = now;
    };
    partition(fallback, fallback_libs, threads, device);
    stage("partition");
    bind_kernels();
    stage("compile");
    if (!compile_only_) {  // a compile-only session is exported, never run
      plan_memory();
      stage("plan");
      upload_constants();
      stage("upload");
    }
    for (const Step& st : steps_)
      if (st.kind == Step::Host && !st.host->bodies().empty()) body_placement_[st.nodes[0]] = describe_bodies(*st.host, "  ");
  } catch (...) {
    for (auto& s : steps_)
      if (s.kernel) eps_[size_t(s.ep)]->lib->api().kernel_release(s.kernel);
    steps_.clear();
    slots_.clear();
    for (auto& [ep, h] : constant_buffers_) eps_[size_t(ep)]->free_device(h);
    constant_buffers_.clear();
    throw;
  }
}

Session::~Session() {
  for (auto& rs : pool_) free_run_state(*this, *rs);
  pool_.clear();
  for (auto& s : steps_)
    if (s.kernel) eps_[size_t(s.ep)]->lib->api().kernel_release(s.kernel);
  for (auto& [ep, h] : constant_buffers_) eps_[size_t(ep)]->free_device(h);
}

const std::string& Session::body_placement(size_t node_index) const {
  static const std::string none;
  auto it = body_placement_.find(node_index);
  return it == body_placement_.end() ? none : it->second;
}

void Session::bind_kernels() {
  const auto& m = *model_;
  std::map<std::pair<size_t, int>, int> slot_of;
  auto new_slot = [&](const nxrt_value* v, int loc, int ep) {
    Slot s;
    s.value = v;
    s.location = loc;
    s.ep = ep;
    s.dtype = v->dtype;
    if (v->static_shape()) s.dims = v->dims;
    slots_.push_back(std::move(s));
    int id = int(slots_.size() - 1);
    slot_of[{v->id, loc}] = id;
    return id;
  };
  auto ep_at = [&](int loc) {
    for (size_t e = 0; e < eps_.size(); ++e) if (eps_[e]->location == loc) return int(e);
    return -1;
  };
  int next_loc = 1;
  for (auto& ep : eps_) ep->location = ep->host_addressable ? 0 : next_loc++;
  arena_bytes_.assign(size_t(next_loc), 0);

  for (size_t k = 0; k < m.inputs.size(); ++k) slots_[size_t(new_slot(m.inputs[k], 0, -1))].graph_input = int(k);

  auto add_copy = [&](int src, int dst, int ep) {
    Step c;
    c.kind = Step::Copy;
    c.ep = ep;
    c.ops = "copy";
    c.inputs = {src};
    c.outputs = {dst};
    c.label = fmt::format("copy of '{}' to {}", slots_[size_t(src)].value->name,
                          slots_[size_t(dst)].location == 0 ? std::string("host") : eps_[size_t(ep)]->lib->name());
    steps_.push_back(std::move(c));
    ++copies_;
  };
  std::function<int(const nxrt_value*, int)> need = [&](const nxrt_value* v, int loc) -> int {
    auto it = slot_of.find({v->id, loc});
    if (it != slot_of.end()) return it->second;
    if (v->constant) {
      int id = new_slot(v, loc, loc == 0 ? -1 : ep_at(loc));
      slots_[size_t(id)].fixed = true;
      slots_[size_t(id)].fixed_dims = v->constant->dims;
      return id;
    }
    int home = -1;
    for (auto& [key, id] : slot_of)
      if (key.first == v->id && !slots_[size_t(id)].fixed) { home = id; break; }
    if (home < 0) raise(NXRT_ERR_RUNTIME, "value '{}' is used before it is produced", v->name);
    int home_loc = slots_[size_t(home)].location;
    if (loc == 0) {
      int dst = new_slot(v, 0, -1);
      add_copy(home, dst, ep_at(home_loc));
      return dst;
    }
    int src = home_loc == 0 ? home : need(v, 0);
    int dst = new_slot(v, loc, ep_at(loc));
    add_copy(src, dst, ep_at(loc));
    return dst;
  };

  std::vector<int> unit_of(m.nodes.size(), -1);
  for (size_t u = 0; u < groups_.size(); ++u) for (size_t n : groups_[u]) unit_of[n] = int(u);
  // Values control-flow bodies read (not among any node's inputs): never freed as captured.
  std::set<const nxrt_value*> read_by_bodies;
  for (const nxrt_node* n : m.live_nodes())
    for (auto& a : n->attributes)
      if (a.graph) {
        for (const nxrt_value* v : implicit_inputs(m, *n)) read_by_bodies.insert(v);
        break;
      }
  for (size_t u : order_groups(m, groups_)) {
    const auto& group = groups_[u];
    const int e = group_ep_[u];
    if (e < 0) {  // a node the host runs: its inputs and implicit inputs on the host
      const nxrt_node& n = *m.nodes[group[0]];
      Step s;
      s.kind = Step::Host;
      s.nodes = group;
      s.ops = n.op_type;
      s.label = fmt::format("node '{}' ({})", n.name, n.op_type);
      for (auto* in : n.inputs) s.inputs.push_back(in ? need(in, 0) : -1);
      for (const nxrt_value* in : implicit_inputs(m, n)) s.inputs.push_back(need(in, 0));
      for (auto* out : n.outputs) s.outputs.push_back(out ? new_slot(out, 0, -1) : -1);
      s.host = make_host_op(m, n, *this);
      steps_.push_back(std::move(s));
      continue;
    }
    EpInstance& ep = *eps_[size_t(e)];
    nxrt_graph view;
    view.model = model_.get();
    for (size_t n : group) view.nodes.push_back(m.nodes[n].get());
    if (group.size() == 1) {
      const nxrt_node& n = *m.nodes[group[0]];
      view.inputs.assign(n.inputs.begin(), n.inputs.end());
      view.outputs.assign(n.outputs.begin(), n.outputs.end());
    } else {
      std::set<size_t> seen;
      for (size_t n : group) {
        for (auto* in : m.nodes[n]->inputs)
          if (in && (in->producer < 0 || unit_of[size_t(in->producer)] != int(u)) && seen.insert(in->id).second)
            view.inputs.push_back(in);
        for (auto* out : m.nodes[n]->outputs) {
          if (!out) continue;
          bool outside = out->is_graph_output;
          for (int c : out->consumers) outside |= unit_of[size_t(c)] != int(u);
          if (outside) view.outputs.push_back(out);
        }
      }
    }
    Step s;
    s.kind = Step::Kernel;
    s.ep = e;
    s.nodes = group;
    for (size_t n : group) s.ops += (s.ops.empty() ? "" : "+") + m.nodes[n]->op_type;
    const nxrt_node& first = *m.nodes[group[0]];
    s.label = group.size() == 1 ? fmt::format("node '{}' ({})", first.name, first.op_type)
                                : fmt::format("group of {} nodes starting at '{}' ({})", group.size(), first.name, first.op_type);
    for (auto* in : view.inputs) s.inputs.push_back(in ? need(in, ep.location) : -1);
    for (auto* out : view.outputs) s.outputs.push_back(out ? new_slot(out, ep.location, ep.location == 0 ? -1 : e) : -1);
    std::vector<const nxrt_value*> captured;
    view.captured = &captured;
    // From the compiled-model cache when it holds this claim and the plugin accepts it.
    if (cache_) s.kernel = cache_->import(ep, view, claim_key(m, group), s.label);
    if (!s.kernel) {
      captured.clear();  // a refused import's captures do not count
      check_plugin(*ep.lib, guarded(ep.lib->name(), "kernel_create", [&] { return ep.lib->api().kernel_create(ep.session, &view, &s.kernel); }),
                   fmt::format("creating the kernel for {}", s.label));
      if (cache_) cache_->compiled(ep);
    }
    view.captured = nullptr;
    if (!s.kernel) raise(NXRT_ERR_PLUGIN, "plugin '{}' returned no kernel for {}", ep.lib->name(), s.label);
    describe_kernel(ep, s);
    s.captured.assign(view.inputs.size(), false);
    for (size_t i = 0; i < view.inputs.size(); ++i)
      if (std::find(captured.begin(), captured.end(), view.inputs[i]) != captured.end()) s.captured[i] = true;
    // A captured weight that only this kernel reads is freed now, before the next
    // kernel packs its own: the peak holds each weight about once.
    if (owns_model_)
      for (const nxrt_value* v : captured) {
        bool only_here = !v->is_graph_output && !read_by_bodies.count(v);
        for (int c : v->consumers) only_here &= unit_of[size_t(c)] == int(u);
        if (only_here) m.values[v->id]->constant.reset();
      }
    if (!ep.concurrent) s.serial = std::make_unique<std::mutex>();
    steps_.push_back(std::move(s));
  }
  // Host values that cross to a device are staged in that plugin's pinned memory (the
  // whole host arena), so its transfers need no bounce buffer; the first such EP wins.
  for (const Step& st : steps_) {
    if (st.kind != Step::Copy || pinned_ep_ >= 0) continue;
    const Slot& a = slots_[size_t(st.inputs[0])];
    const Slot& b = slots_[size_t(st.outputs[0])];
    if ((a.location == 0) != (b.location == 0) && !eps_[size_t(st.ep)]->host_addressable) pinned_ep_ = st.ep;
  }
  for (size_t k = 0; k < m.outputs.size(); ++k) {
    int id = need(m.outputs[k], 0);
    Slot& s = slots_[size_t(id)];
    if (s.graph_output < 0 && s.graph_input < 0 && !s.fixed) s.graph_output = int(k);
    output_slot_.push_back(id);
  }
  // I/O binding routes: which steps read each input's host slot; for each output the slot
  // a kernel writes it into, the download from there, and whether the host slot has other readers.
  input_readers_.assign(m.inputs.size(), {});
  for (size_t si = 0; si < steps_.size(); ++si)
    for (int in : steps_[si].inputs)
      if (in >= 0 && slots_[size_t(in)].graph_input >= 0) input_readers_[size_t(slots_[size_t(in)].graph_input)].push_back(int(si));
  output_home_.assign(m.outputs.size(), -1);
  output_download_.assign(m.outputs.size(), -1);
  output_host_read_.assign(m.outputs.size(), 0);
  for (size_t k = 0; k < m.outputs.size(); ++k) {
    const int host_slot = output_slot_[k];
    int& home = output_home_[k];
    for (size_t si = 0; si < steps_.size() && home < 0; ++si)
      if (steps_[si].kind == Step::Kernel)
        for (int out : steps_[si].outputs)
          if (out >= 0 && slots_[size_t(out)].value == m.outputs[k]) home = out;
    output_host_read_[k] = std::count(output_slot_.begin(), output_slot_.end(), host_slot) > 1;
    for (size_t si = 0; si < steps_.size(); ++si)
      for (int in : steps_[si].inputs)
        if (in == host_slot) output_host_read_[k] = 1;
        else if (home >= 0 && in == home && steps_[si].kind == Step::Copy && steps_[si].outputs[0] == host_slot)
          output_download_[k] = int(si);
  }
}

// ABI 2.5: the plugin's one line on how a kernel computes, kept on its nodes for `nxrt inspect`.
// The text is the plugin's, so it is made printable and cut like any untrusted string.
void Session::describe_kernel(const EpInstance& ep, const Step& step) {
  std::string text;
  const PluginLibrary& lib = *ep.lib;
  if (lib.abi_minor() >= 5 && lib.api().kernel_describe) {
    const char* d = guarded(lib.name(), "kernel_describe", [&] { return lib.api().kernel_describe(step.kernel); });
    if (d) text = clip_printable(std::string_view(d, strnlen(d, NXRT_KERNEL_DESCRIPTION_MAX + 1)), NXRT_KERNEL_DESCRIPTION_MAX);
  }
  const nxrt_node& first = *model_->nodes[step.nodes[0]];
  if (step.nodes.size() == 1) {
    assign_[first.index].kernel = std::move(text);
    return;
  }
  const std::string what = step.nodes.size() <= 4 ? step.ops : fmt::format("group of {} nodes", step.nodes.size());
  assign_[first.index].kernel = text.empty() ? what : what + ": " + text;
  for (size_t i = 1; i < step.nodes.size(); ++i)
    assign_[model_->nodes[step.nodes[i]]->index].kernel = fmt::format("in the group of '{}'", first.name);
}

std::vector<int> Session::import_mapped_constants(int e, const std::vector<int>& ids) {
  // Only where device memory is system memory (a CPU-kind device such as lavapipe): there a
  // constant read in place costs the kernels nothing, and the session starts without
  // allocating, faulting in and copying its weights. A GPU's own memory is faster: copied.
  EpInstance& ep = *eps_[size_t(e)];
  const Artifact* a = model_->compiled.get();
  if (!a || !ep.lib->has(NXRT_FEATURE_MEMORY_IMPORT) || ep.device >= ep.lib->devices().size() ||
      ep.lib->devices()[ep.device].kind != NXRT_DEVICE_CPU)
    return ids;
  constexpr uintptr_t kPage = 4096;
  const auto map = a->mapping();
  const uintptr_t map_lo = uintptr_t(map.data()), map_hi = map_lo + map.size();
  std::vector<int> inside, rest;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int id : ids) {
    const Bytes& d = slots_[size_t(id)].value->constant->data;
    const uintptr_t p = uintptr_t(d.data());
    if (d.size() && p >= map_lo && p + d.size() <= map_hi && (p - map_lo) % NXRT_TENSOR_ALIGNMENT == 0) {
      inside.push_back(id);
      lo = std::min(lo, p);
      hi = std::max(hi, p + d.size());
    } else {
      rest.push_back(id);
    }
  }
  // Whole pages of the mapping (mmap maps the last partial page too); a plugin that needs
  // a coarser alignment says NXRT_UNSUPPORTED and the constants are copied as before.
  const uintptr_t base = lo & ~(kPage - 1), end = (hi + kPage - 1) & ~(kPage - 1);
  if (inside.empty() || end > ((map_hi + kPage - 1) & ~(kPage - 1))) return ids;
  nxrt_native_handle h{};
  h.struct_size = sizeof h;
  h.type = NXRT_NATIVE_HOST_POINTER;
  h.handle = uint64_t(base);
  h.size = uint64_t(end - base);
  std::string why;
  void* handle = ep.import_memory(h, &why);
  if (!handle) return ids;
  constant_buffers_.emplace_back(e, handle);
  for (int id : inside) {
    Slot& s = slots_[size_t(id)];
    s.fixed_handle = handle;
    s.fixed_offset = uint64_t(uintptr_t(s.value->constant->data.data()) - base);
    held_constants_.push_back(s.value->constant);  // the view keeps the mapping alive
  }
  return rest;
}

void Session::upload_constants() {
  // Constant slots some step still reads: kernels that did not capture them, copies,
  // graph outputs. The rest (captured) the run never touches: no upload, no host copy.
  std::vector<bool> read(slots_.size(), false);
  for (const Step& st : steps_)
    for (size_t i = 0; i < st.inputs.size(); ++i)
      if (st.inputs[i] >= 0 && (st.kind == Step::Copy || i >= st.captured.size() || !st.captured[i]))
        read[size_t(st.inputs[i])] = true;
  for (int id : output_slot_) read[size_t(id)] = true;
  std::set<const nxrt_value*> host_read;

  std::map<int, std::vector<int>> by_ep;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (!s.fixed || !read[i]) continue;
    if (s.location == 0) {
      s.fixed_offset = 0;
      host_read.insert(s.value);
      held_constants_.push_back(s.value->constant);
      s.fixed_handle = const_cast<uint8_t*>(s.value->constant->data.data());
    } else {
      by_ep[s.ep].push_back(int(i));
    }
  }
  for (auto& [e, all_ids] : by_ep) {
    EpInstance& ep = *eps_[size_t(e)];
    const std::vector<int> ids = import_mapped_constants(e, all_ids);
    if (ids.empty()) continue;
    uint64_t total = 0;  // one buffer per EP
    for (int id : ids) {
      slots_[size_t(id)].fixed_offset = total;
      total += align_up(std::max<uint64_t>(slots_[size_t(id)].value->constant->data.size(), 1), NXRT_TENSOR_ALIGNMENT);
    }
    void* buffer = ep.alloc_device(total, fmt::format("allocating {} bytes for constants", total));
    constant_buffers_.emplace_back(e, buffer);
    std::vector<nxrt_copy_region> regions;
    for (int id : ids) {
      Slot& s = slots_[size_t(id)];
      s.fixed_handle = buffer;
      const nxrt_copy_region r = copy_region(NXRT_MEMORY_HOST, s.value->constant->data.data(), 0, NXRT_MEMORY_DEVICE, buffer,
                                             s.fixed_offset, s.value->constant->data.size());
      if (r.bytes) regions.push_back(r);
    }
    std::vector<const nxrt_copy_region*> region_ptrs;
    for (auto& r : regions) region_ptrs.push_back(&r);
    check_plugin(*ep.lib, guarded(ep.lib->name(), "copy", [&] { return ep.lib->api().copy(ep.session, region_ptrs.data(), region_ptrs.size(), nullptr); }),
                 "uploading constants");
  }
  // The uploads are complete (no stream): what the host does not read can go.
  if (owns_model_)
    for (auto& v : model_->values)
      if (v->constant && !host_read.count(v.get())) v->constant.reset();
}

}  // namespace nxrt
