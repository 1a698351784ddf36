// Kernel declarations that keep a kernel's opset range and type constraints beside it:
//
//   registry.add(nxrt::sdk::kernel<Relu, MySession>("Relu", {.since = 6, .until = 13}, {NXRT_DTYPE_FLOAT32}));
//   registry.add(nxrt::sdk::kernel<Add, MySession>("Add", {.since = 7}, {NXRT_DTYPE_FLOAT32}, check_broadcast));
//
// builds the KernelDef that KernelRegistry (kernel_registry.hpp) already takes: the dtype check
// (require_dtypes over every input and output, or a range of inputs) runs first, then the extra
// check, and `create` makes a K, from (node, session) when K has that constructor, from the node
// alone, or default-constructed.
//
// Thread class: builds values; the checks and factories it makes are called by the registry
// during get_capability and kernel_create, and keep no state (safe from any thread).
// Ownership: the returned KernelDef owns copies of everything passed in.
#pragma once
#include "kernel_registry.hpp"

#include <climits>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace nxrt::sdk {

// Inclusive opset range of the default (or given) domain a kernel implements.
struct Opsets {
  int since = 1;
  int until = INT_MAX;
};

// The element types a kernel accepts for inputs [first_input, input_end) and every output
// (an op whose shape or axes input is int64 sets input_end to skip it).
struct Types {
  Types(std::initializer_list<nxrt_dtype> allowed, size_t first_input = 0, size_t input_end = SIZE_MAX)
      : allowed(allowed), first_input(first_input), input_end(input_end) {}
  std::vector<nxrt_dtype> allowed;
  size_t first_input = 0;
  size_t input_end = SIZE_MAX;
};

using KernelCheck = std::function<std::optional<Refusal>(const Node&)>;

template <typename K, typename Session>
KernelDef<Session> kernel(std::string op, Opsets opsets, Types types, KernelCheck extra = {}, std::string domain = "") {
  KernelDef<Session> d;
  d.op = std::move(op);
  d.domain = std::move(domain);
  d.since = opsets.since;
  d.until = opsets.until;
  d.check = [types = std::move(types), extra = std::move(extra)](const Node& n) -> std::optional<Refusal> {
    if (auto r = require_dtypes(n, types.allowed, types.first_input, types.input_end)) return r;
    return extra ? extra(n) : std::nullopt;
  };
  d.create = [](const Node& n, Session& s) -> std::unique_ptr<Kernel> {
    if constexpr (std::is_constructible_v<K, const Node&, Session&>) return std::make_unique<K>(n, s);
    else if constexpr (std::is_constructible_v<K, const Node&>) return std::make_unique<K>(n);
    else return std::make_unique<K>();
  };
  return d;
}

}  // namespace nxrt::sdk
