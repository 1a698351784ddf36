// The partitioner's helpers (Session::partition is in partitioner.cpp): claims are
// kept whole when convex, split into convex runs otherwise, then ordered.
#pragma once
#include "ir.hpp"

#include <set>
#include <vector>

namespace nxrt {

const char* refusal_name(nxrt_refusal r);  // "op", "opset", "dtype"...
// A claim as convex parts: itself when convex, else runs that are consecutive in the
// model's topological order.
std::vector<std::vector<size_t>> convex_parts(const nxrt_model_ir& m, const std::set<size_t>& group);
// Claims in execution order (claims are convex, so their quotient graph is a DAG).
// Throws HostError when they form a cycle.
std::vector<size_t> order_groups(const nxrt_model_ir& m, const std::vector<std::vector<size_t>>& groups);

}  // namespace nxrt
