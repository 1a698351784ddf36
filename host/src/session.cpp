// Session preparation: partition over EPs, bind kernels, place values,
// insert copies, plan memory by lifetime, upload constants.
#include "session.hpp"

#include "claims.hpp"
#include "error.hpp"
#include "run_state.hpp"
#include "status.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <queue>
#include <set>

namespace nxrt {

EpInstance::~EpInstance() {
  if (session) lib->api().session_release(session);
}

std::unique_ptr<EpInstance> EpInstance::create(std::shared_ptr<PluginLibrary> lib, uint32_t device, int threads) {
  const std::string& name = lib->name();
  if (lib->devices().empty()) raise(NXRT_ERR_NOT_FOUND, "EP '{}' has no device: {}", name, lib->no_device_reason());
  if (device >= lib->devices().size())
    raise(NXRT_ERR_NOT_FOUND, "EP '{}' has no device {} (it has {})", name, device, lib->devices().size());
  auto inst = std::make_unique<EpInstance>();
  inst->lib = lib;
  inst->device = device;
  const std::string t = std::to_string(threads);
  nxrt_option opt{"threads", t.c_str()};
  nxrt_status* st = guarded(name, "session_create", [&] { return lib->api().session_create(device, &opt, 1, &inst->session); });
  check_plugin(*lib, st, "creating an EP session");
  if (!inst->session) raise(NXRT_ERR_PLUGIN, "plugin '{}' returned no session", name);
  inst->host_addressable = lib->devices()[device].host_addressable;
  inst->streams = lib->has(NXRT_FEATURE_STREAMS);
  inst->concurrent = lib->has(NXRT_FEATURE_CONCURRENT_RUN);
  return inst;
}

namespace {

const char* refusal_name(nxrt_refusal r) {
  switch (r) {
    case NXRT_REFUSE_OP: return "op";
    case NXRT_REFUSE_OPSET: return "opset";
    case NXRT_REFUSE_DTYPE: return "dtype";
    case NXRT_REFUSE_SHAPE: return "shape";
    case NXRT_REFUSE_ATTRIBUTE: return "attribute";
    default: return "other";
  }
}

// A group is convex when no path leaves it and comes back.
bool convex(const nxrt_model_ir& m, const std::set<size_t>& g) {
  std::vector<char> seen(m.nodes.size(), 0);
  std::vector<size_t> stack;
  auto push_consumers = [&](size_t n) {
    for (auto* out : m.nodes[n]->outputs)
      if (out) for (int c : out->consumers) stack.push_back(size_t(c));
  };
  for (size_t n : g) push_consumers(n);
  // Walk only outside the group; reaching the group again breaks convexity.
  std::vector<size_t> frontier;
  for (size_t c : stack) if (!g.count(c)) frontier.push_back(c);
  while (!frontier.empty()) {
    size_t c = frontier.back();
    frontier.pop_back();
    if (seen[c]) continue;
    seen[c] = 1;
    for (auto* out : m.nodes[c]->outputs) {
      if (!out) continue;
      for (int cc : out->consumers) {
        if (g.count(size_t(cc))) return false;
        frontier.push_back(size_t(cc));
      }
    }
  }
  return true;
}

// A plugin sees only unassigned nodes, so it cannot know whether a group is convex in the
// whole model. A convex claim is kept whole; any other is split into runs that are
// consecutive in the model's topological order, which are convex, and convex units always
// form an acyclic order.
std::vector<std::vector<size_t>> convex_parts(const nxrt_model_ir& m, const std::set<size_t>& g) {
  if (g.size() <= 1 || convex(m, g)) return {std::vector<size_t>(g.begin(), g.end())};
  std::vector<std::vector<size_t>> parts;
  bool open = false;
  for (const nxrt_node* n : m.live_nodes()) {
    if (!g.count(n->index)) {
      open = false;
      continue;
    }
    if (!open) parts.emplace_back();
    parts.back().push_back(n->index);
    open = true;
  }
  return parts;
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

Session::Session(std::shared_ptr<const nxrt_model_ir> model, std::vector<std::unique_ptr<EpInstance>> eps, bool fallback,
                 std::vector<std::shared_ptr<PluginLibrary>> fallback_libs, int threads, uint32_t device,
                 bool owns_model)
    : model_(std::move(model)), eps_(std::move(eps)), owns_model_(owns_model) {
  try {
    partition(fallback, fallback_libs, threads, device);
    bind_kernels();
    plan_memory();
    upload_constants();
  } catch (...) {
    for (auto& s : steps_)
      if (s.kernel) eps_[size_t(s.ep)]->lib->api().kernel_release(s.kernel);
    steps_.clear();
    for (auto& [ep, h] : constant_buffers_) eps_[size_t(ep)]->lib->api().memory_free(eps_[size_t(ep)]->session, NXRT_MEMORY_DEVICE, h);
    constant_buffers_.clear();
    throw;
  }
}

Session::~Session() {
  for (auto& rs : pool_) free_run_state(*this, *rs);
  pool_.clear();
  for (auto& s : steps_)
    if (s.kernel) eps_[size_t(s.ep)]->lib->api().kernel_release(s.kernel);
  for (auto& [ep, h] : constant_buffers_) eps_[size_t(ep)]->lib->api().memory_free(eps_[size_t(ep)]->session, NXRT_MEMORY_DEVICE, h);
}

void Session::partition(bool fallback, const std::vector<std::shared_ptr<PluginLibrary>>& fallback_libs, int threads,
                        uint32_t device) {
  assign_.assign(model_->nodes.size(), Assignment{});
  std::set<size_t> unassigned;
  for (auto* n : model_->live_nodes()) unassigned.insert(n->index);

  auto offer = [&](int ep_index, bool fell_back) {
    EpInstance& ep = *eps_[size_t(ep_index)];
    if (unassigned.empty()) return;
    nxrt_graph view;
    view.model = model_.get();
    for (size_t n : unassigned) view.nodes.push_back(model_->nodes[n].get());
    view.inputs.assign(model_->inputs.begin(), model_->inputs.end());
    view.outputs.assign(model_->outputs.begin(), model_->outputs.end());
    nxrt_claim_sink sink;
    sink.view = &view;
    sink.plugin = ep.lib->name();
    sink.fused_allowed = ep.lib->has(NXRT_FEATURE_FUSED_GROUPS);
    sink.in_view = unassigned;
    check_plugin(*ep.lib, guarded(ep.lib->name(), "get_capability", [&] { return ep.lib->api().get_capability(ep.session, &view, &sink); }),
                 "asking which nodes it supports");
    if (!sink.error.empty()) raise(NXRT_ERR_PLUGIN, "plugin '{}' broke the claim protocol: {}", ep.lib->name(), sink.error);
    for (auto& group : sink.groups) {
      for (auto& part : convex_parts(*model_, std::set<size_t>(group.begin(), group.end()))) {
        for (size_t n : part) {
          assign_[n].ep = ep_index;
          assign_[n].fell_back = fell_back;
          unassigned.erase(n);
        }
        groups_.push_back(std::move(part));
        group_ep_.push_back(ep_index);
      }
    }
    for (size_t n : unassigned) {
      auto it = sink.refusals.find(n);
      std::string why = it == sink.refusals.end() ? "no verdict given"
                                                  : fmt::format("{} ({})", it->second.second, refusal_name(it->second.first));
      if (!assign_[n].reasons.empty()) assign_[n].reasons += "; ";
      assign_[n].reasons += fmt::format("{}: {}", ep.lib->name(), why);
    }
  };

  std::string requested;
  for (size_t i = 0; i < eps_.size(); ++i) {
    requested += (i ? "," : "") + eps_[i]->lib->name();
    offer(int(i), false);
  }
  if (!unassigned.empty() && fallback) {
    for (auto& lib : fallback_libs) {
      if (unassigned.empty()) break;
      bool used = false;
      for (auto& e : eps_) used |= e->lib == lib;
      if (used || lib->devices().empty()) continue;
      auto inst = EpInstance::create(lib, device < lib->devices().size() ? device : 0, threads);
      eps_.push_back(std::move(inst));
      offer(int(eps_.size() - 1), true);
    }
  }
  if (!unassigned.empty()) {
    std::string list;
    size_t shown = 0;
    for (size_t n : unassigned) {
      if (shown++ == 5) {
        list += fmt::format("; ... and {} more", unassigned.size() - 5);
        break;
      }
      const auto& node = *model_->nodes[n];
      list += fmt::format("{}node '{}' ({}{}{}): {}", shown > 1 ? "; " : "", node.name, node.domain,
                          node.domain.empty() ? "" : "::", node.op_type, assign_[n].reasons.empty() ? "no EP offered" : assign_[n].reasons);
    }
    raise(NXRT_ERR_UNSUPPORTED, "{} node(s) are not supported by the requested EPs ({}){}: {}", unassigned.size(), requested,
          fallback ? " or any fallback EP" : "; pass --fallback to place them on another EP", list);
  }
}

// Orders claims topologically (claims are convex, so their quotient graph is a DAG).
static std::vector<size_t> order_groups(const nxrt_model_ir& m, const std::vector<std::vector<size_t>>& groups) {
  std::vector<int> unit_of(m.nodes.size(), -1);
  for (size_t u = 0; u < groups.size(); ++u) for (size_t n : groups[u]) unit_of[n] = int(u);
  std::vector<std::set<size_t>> succ(groups.size());
  std::vector<size_t> indeg(groups.size(), 0);
  for (size_t u = 0; u < groups.size(); ++u)
    for (size_t n : groups[u])
      for (auto* in : m.nodes[n]->inputs)
        if (in && in->producer >= 0) {
          int p = unit_of[size_t(in->producer)];
          if (p >= 0 && size_t(p) != u && succ[size_t(p)].insert(u).second) indeg[u]++;
        }
  auto first = [&](size_t u) { return groups[u].front(); };
  auto cmp = [&](size_t a, size_t b) { return first(a) > first(b); };
  std::priority_queue<size_t, std::vector<size_t>, decltype(cmp)> ready(cmp);
  for (size_t u = 0; u < groups.size(); ++u) if (indeg[u] == 0) ready.push(u);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t u = ready.top();
    ready.pop();
    order.push_back(u);
    for (size_t s : succ[u]) if (--indeg[s] == 0) ready.push(s);
  }
  if (order.size() != groups.size()) raise(NXRT_ERR_RUNTIME, "claims form a cycle; cannot order them");
  return order;
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
  for (size_t u : order_groups(m, groups_)) {
    const auto& group = groups_[u];
    const int e = group_ep_[u];
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
    check_plugin(*ep.lib, guarded(ep.lib->name(), "kernel_create", [&] { return ep.lib->api().kernel_create(ep.session, &view, &s.kernel); }),
                 fmt::format("creating the kernel for {}", s.label));
    view.captured = nullptr;
    if (!s.kernel) raise(NXRT_ERR_PLUGIN, "plugin '{}' returned no kernel for {}", ep.lib->name(), s.label);
    s.captured.assign(view.inputs.size(), false);
    for (size_t i = 0; i < view.inputs.size(); ++i)
      if (std::find(captured.begin(), captured.end(), view.inputs[i]) != captured.end()) s.captured[i] = true;
    // A captured weight that only this kernel reads is freed now, before the next
    // kernel packs its own: the peak holds each weight about once.
    if (owns_model_)
      for (const nxrt_value* v : captured) {
        bool only_here = !v->is_graph_output;
        for (int c : v->consumers) only_here &= unit_of[size_t(c)] == int(u);
        if (only_here) m.values[v->id]->constant.reset();
      }
    if (!ep.concurrent) s.serial = std::make_unique<std::mutex>();
    steps_.push_back(std::move(s));
  }
  for (size_t k = 0; k < m.outputs.size(); ++k) {
    int id = need(m.outputs[k], 0);
    Slot& s = slots_[size_t(id)];
    if (s.graph_output < 0 && s.graph_input < 0 && !s.fixed) s.graph_output = int(k);
    output_slot_.push_back(id);
  }
}

void Session::plan_memory() {
  const int end = int(steps_.size());
  std::vector<int> def(slots_.size(), -1), last(slots_.size(), -1);
  for (int i = 0; i < end; ++i) {
    const Step& s = steps_[size_t(i)];
    for (int o : s.outputs) if (o >= 0) { def[size_t(o)] = i; last[size_t(o)] = std::max(last[size_t(o)], i); }
    for (int in : s.inputs) {
      if (in < 0) continue;
      last[size_t(in)] = std::max(last[size_t(in)], i);
      // A host buffer feeding an asynchronous upload stays alive to the end of the run.
      if (s.kind == Step::Copy && slots_[size_t(in)].location == 0 && eps_[size_t(s.ep)]->streams) last[size_t(in)] = end;
    }
  }
  struct Item { int slot; uint64_t bytes; };
  std::vector<std::vector<Item>> per_loc(arena_bytes_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.fixed || s.graph_input >= 0 || s.graph_output >= 0 || def[i] < 0) continue;
    if (!s.value->static_shape() || dtype_size(s.dtype) == 0) continue;
    uint64_t bytes = uint64_t(element_count(s.dims)) * dtype_size(s.dtype);
    if (bytes == 0) continue;
    s.bytes = bytes;
    per_loc[size_t(s.location)].push_back({int(i), align_up(bytes, NXRT_TENSOR_ALIGNMENT)});
  }
  for (size_t loc = 0; loc < per_loc.size(); ++loc) {
    auto& items = per_loc[loc];
    std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.bytes > b.bytes; });
    struct Placed { int first, last; uint64_t begin, end; };
    std::vector<Placed> placed;
    uint64_t arena = 0;
    for (auto& it : items) {
      int f = def[size_t(it.slot)], l = last[size_t(it.slot)];
      std::vector<std::pair<uint64_t, uint64_t>> busy;
      for (auto& p : placed) if (p.first <= l && f <= p.last) busy.emplace_back(p.begin, p.end);
      std::sort(busy.begin(), busy.end());
      uint64_t offset = 0;
      for (auto& [b, e] : busy) {
        if (offset + it.bytes <= b) break;
        offset = std::max(offset, e);
      }
      placed.push_back({f, l, offset, offset + it.bytes});
      slots_[size_t(it.slot)].planned = true;
      slots_[size_t(it.slot)].offset = offset;
      arena = std::max(arena, offset + it.bytes);
    }
    arena_bytes_[loc] = arena;
  }
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
  for (auto& [e, ids] : by_ep) {
    EpInstance& ep = *eps_[size_t(e)];
    uint64_t total = 0;  // one buffer per EP
    for (int id : ids) {
      slots_[size_t(id)].fixed_offset = total;
      total += align_up(std::max<uint64_t>(slots_[size_t(id)].value->constant->data.size(), 1), NXRT_TENSOR_ALIGNMENT);
    }
    void* buffer = nullptr;
    check_plugin(*ep.lib, guarded(ep.lib->name(), "memory_alloc", [&] { return ep.lib->api().memory_alloc(ep.session, NXRT_MEMORY_DEVICE, total, NXRT_TENSOR_ALIGNMENT, &buffer); }),
                 fmt::format("allocating {} bytes for constants", total));
    constant_buffers_.emplace_back(e, buffer);
    std::vector<nxrt_copy_region> regions;
    for (int id : ids) {
      Slot& s = slots_[size_t(id)];
      s.fixed_handle = buffer;
      nxrt_copy_region r{};
      r.struct_size = sizeof r;
      r.src_memory = NXRT_MEMORY_HOST;
      r.src = s.value->constant->data.data();
      r.dst_memory = NXRT_MEMORY_DEVICE;
      r.dst = buffer;
      r.dst_offset = s.fixed_offset;
      r.bytes = s.value->constant->data.size();
      if (r.bytes) regions.push_back(r);
    }
    check_plugin(*ep.lib, guarded(ep.lib->name(), "copy", [&] { return ep.lib->api().copy(ep.session, regions.data(), regions.size(), nullptr); }),
                 "uploading constants");
  }
  // The uploads are complete (no stream): what the host does not read can go.
  if (owns_model_)
    for (auto& v : model_->values)
      if (v->constant && !host_read.count(v.get())) v->constant.reset();
}

}  // namespace nxrt
