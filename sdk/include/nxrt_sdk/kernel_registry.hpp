// Single-node kernels registered by (domain, op, opset range). The registry
// answers get_capability: a node is claimed when a registered kernel covers
// its op and opset and the kernel's check accepts it; otherwise it is refused
// with the reason the check gave.
//
// Ownership: the registry owns its KernelDefs; create() returns a Kernel the caller (the SDK glue)
// owns. Thread class: fill it before the session is used, then claim()/create() are read-only and
// safe from any thread.
#pragma once
#include "context.hpp"
#include "graph.hpp"
#include "kernel.hpp"
#include "kernel_cache.hpp"
#include "prepacked.hpp"

#include <climits>
#include <concepts>
#include <tuple>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <cstdint>
#include <string>
#include <vector>

namespace nxrt::sdk {

struct Refusal {
  nxrt_refusal reason;
  std::string message;
};

template <typename... Args>
Refusal refuse(nxrt_refusal reason, fmt::format_string<Args...> f, Args&&... args) {
  return Refusal{reason, fmt::format(f, std::forward<Args>(args)...)};
}

// Returns a refusal when an input in [first_input, input_end) or any output uses a dtype
// outside `allowed` (inputs outside the range, e.g. an int64 shape, are checked elsewhere).
inline std::optional<Refusal> require_dtypes(const Node& n, std::span<const nxrt_dtype> allowed, size_t first_input = 0,
                                             size_t input_end = SIZE_MAX) {
  auto ok = [&](nxrt_dtype t) {
    for (auto a : allowed) if (a == t) return true;
    return false;
  };
  for (size_t i = first_input; i < n.input_count() && i < input_end; ++i) {
    auto v = n.input(i);
    if (v.present() && !ok(v.dtype()))
      return refuse(NXRT_REFUSE_DTYPE, "{} input {} is {}", n.op_type(), i, dtype_name(v.dtype()));
  }
  for (size_t i = 0; i < n.output_count(); ++i) {
    auto v = n.output(i);
    if (v.present() && !ok(v.dtype()))
      return refuse(NXRT_REFUSE_DTYPE, "{} output {} is {}", n.op_type(), i, dtype_name(v.dtype()));
  }
  return std::nullopt;
}
inline std::optional<Refusal> require_dtypes(const Node& n, std::initializer_list<nxrt_dtype> allowed) {
  return require_dtypes(n, std::span<const nxrt_dtype>(allowed.begin(), allowed.size()));
}

template <typename Session>
struct KernelDef {
  std::string op;
  std::string domain;  // "" = default ONNX domain
  int since = 1;       // opset range the kernel implements, inclusive
  int until = INT_MAX;
  // nullopt: supported. Runs during get_capability on the full graph view.
  std::function<std::optional<Refusal>(const Node&)> check;
  std::function<std::unique_ptr<Kernel>(const Node&, Session&)> create;
};

// ABI 2.4: a kernel factory that declares its derived data through Prepacked (prepacked.hpp),
// so the kernel exports it and kernel_import rebuilds the kernel from a blob without it.
template <typename Session>
using PrepackedCreate = std::function<std::unique_ptr<Kernel>(const Node&, Session&, Prepacked&)>;

template <typename Session>
class KernelRegistry {
 public:
  void add(KernelDef<Session> def) { defs_[{def.domain, def.op}].push_back(std::move(def)); }
  // The same with a Prepacked factory (def.create is replaced by it): kernel_create runs it
  // with fresh buffers (counted in the session's memory stats when it has counters()), and
  // import() runs it fed from a blob.
  void add(KernelDef<Session> def, PrepackedCreate<Session> create) {
    def.create = [create](const Node& n, Session& s) {
      return create_prepacked(prepacked_kind(n), counters_of(s), [&](Prepacked& pp) { return create(n, s, pp); });
    };
    prepacked_[{def.domain, def.op, def.since}] = std::move(create);
    add(std::move(def));
  }

  // The kernel definition for a node, or the refusal explaining why none fits.
  const KernelDef<Session>* find(const Node& n, int64_t opset, Refusal* why) const {
    std::string domain(n.domain());
    if (domain == "ai.onnx") domain.clear();
    auto it = defs_.find({domain, std::string(n.op_type())});
    if (it == defs_.end()) {
      if (why) *why = refuse(NXRT_REFUSE_OP, "no kernel for {}{}{}", domain, domain.empty() ? "" : "::", n.op_type());
      return nullptr;
    }
    for (auto& def : it->second)
      if (opset >= def.since && opset <= def.until) return &def;
    if (why) *why = refuse(NXRT_REFUSE_OPSET, "{} has no kernel for opset {}", n.op_type(), opset);
    return nullptr;
  }

  // Claims every node a kernel accepts; refuses the rest with a reason.
  void claim(const Graph& g, nxrt_claim_sink* sink) const {
    for (size_t i = 0; i < g.node_count(); ++i) {
      Node n = g.node(i);
      std::string domain(n.domain());
      Refusal why{};
      const auto* def = find(n, g.opset(domain.c_str()), &why);
      std::optional<Refusal> r;
      if (!def) r = why;
      else if (touches_string(n) && !host_has_strings())
        r = refuse(NXRT_REFUSE_DTYPE, "{} reads or writes a string tensor, which needs an ABI 2.3 host", n.op_type());
      else if (def->check) r = def->check(n);
      size_t index = n.index();
      if (r) check(host().refuse_node(sink, index, r->reason, r->message.c_str()));
      else check(host().claim_nodes(sink, &index, 1, 0.0));
    }
  }

  // String tensors (nxrt_string elements, ctx_output_string_set) exist from ABI 2.3 on;
  // an older host has neither, so string nodes are refused for it whatever the kernel says.
  static bool host_has_strings() {
    return host().abi_minor >= 3 && NXRT_HAS_FIELD(&host(), nxrt_host_services, ctx_output_string_set) &&
           host().ctx_output_string_set != nullptr;
  }
  static bool touches_string(const Node& n) {
    for (size_t i = 0; i < n.input_count(); ++i)
      if (n.input(i).present() && n.input(i).dtype() == NXRT_DTYPE_STRING) return true;
    for (size_t i = 0; i < n.output_count(); ++i)
      if (n.output(i).present() && n.output(i).dtype() == NXRT_DTYPE_STRING) return true;
    return false;
  }

  std::unique_ptr<Kernel> create(const Graph& subgraph, Session& s) const {
    if (subgraph.node_count() != 1) fail(NXRT_UNSUPPORTED, "this plugin binds single nodes, got a group of {}", subgraph.node_count());
    Node n = subgraph.node(0);
    std::string domain(n.domain());
    Refusal why{};
    const auto* def = find(n, subgraph.opset(domain.c_str()), &why);
    if (!def) fail(NXRT_UNSUPPORTED, "{}", why.message);
    if (def->check)
      if (auto r = def->check(n)) fail(NXRT_UNSUPPORTED, "{}", r->message);
    return def->create(n, s);
  }

  // kernel_import of a single-node claim whose kernel has a Prepacked factory. Throws
  // BlobRejected (RECOMPILE) when the node is not one this registry rebuilds from a blob.
  std::unique_ptr<Kernel> import(const Graph& subgraph, Session& s, std::span<const uint8_t> blob) const {
    if (subgraph.node_count() != 1)
      throw BlobRejected{NXRT_CACHE_RECOMPILE, fmt::format("a group of {} nodes is not a single-node kernel", subgraph.node_count())};
    Node n = subgraph.node(0);
    std::string domain(n.domain());
    Refusal why{};
    const auto* def = find(n, subgraph.opset(domain.c_str()), &why);
    if (!def) throw BlobRejected{NXRT_CACHE_RECOMPILE, why.message};
    if (def->check)
      if (auto r = def->check(n)) throw BlobRejected{NXRT_CACHE_RECOMPILE, r->message};
    auto it = prepacked_.find({def->domain, def->op, def->since});
    if (it == prepacked_.end())
      throw BlobRejected{NXRT_CACHE_RECOMPILE, fmt::format("{} kernels keep nothing in a blob", prepacked_kind(n))};
    const auto& create = it->second;
    return import_prepacked(prepacked_kind(n), blob, [&](Prepacked& pp) { return create(n, s, pp); });
  }

  // Ops this registry knows, for documentation and coverage reports.
  std::vector<std::string> ops() const {
    std::vector<std::string> out;
    for (auto& [key, defs] : defs_) out.push_back(key.first.empty() ? key.second : key.first + "::" + key.second);
    return out;
  }

 private:
  static MemoryCounters* counters_of(Session& s) {
    if constexpr (requires { { s.counters() } -> std::same_as<MemoryCounters&>; }) return &s.counters();
    else return nullptr;
  }
  std::map<std::pair<std::string, std::string>, std::vector<KernelDef<Session>>> defs_;
  std::map<std::tuple<std::string, std::string, int>, PrepackedCreate<Session>> prepacked_;
};

}  // namespace nxrt::sdk
