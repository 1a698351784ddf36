// Shared plumbing for the kernels the plugin registers: the session type, the
// registry, and small helpers for checks and compute.
#pragma once
#include <nxrt_sdk/sdk.hpp>

#include <cstdint>
#include <cstring>
#include <span>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "conv.hpp"
#include "thread_pool.hpp"

namespace nxrt::cpu {

namespace sdk = ::nxrt::sdk;
using sdk::Context;
using sdk::Kernel;
using sdk::Node;
using sdk::Refusal;
using sdk::TensorView;
using sdk::ConstTensorView;
using Check = std::optional<Refusal>;

class CpuSession : public sdk::HostMemorySession {
 public:
  explicit CpuSession(int threads);
  void get_capability(const sdk::Graph& g, nxrt_claim_sink* sink) override;
  std::unique_ptr<Kernel> create_kernel(const sdk::Graph& subgraph) override;
  ThreadPool* pool() { return pool_.threads() > 1 ? &pool_ : nullptr; }

 private:
  ThreadPool pool_;
};

using Registry = sdk::KernelRegistry<CpuSession>;
using Def = sdk::KernelDef<CpuSession>;

// The process-wide registry (built once, read-only afterwards).
const Registry& registry();

void register_gemm_ops(Registry& r);
void register_conv_ops(Registry& r);
void register_nn_ops(Registry& r);
void register_elementwise_ops(Registry& r);
void register_shape_ops(Registry& r);
void register_index_ops(Registry& r);  // and every other register_*_ops declared in ops_more.hpp

// Where a Conv kernel finds its tensors among the kernel inputs, and what it
// applies to its result (a fused group: Conv [+ Add] [+ Relu | Clip]).
struct ConvIo {
  int x = 0, w = 1, b = 2;  // b < 0: no bias
  int residual = -1;        // input added to the result (fused Add), < 0: none
  ConvPostOps post;         // clamp (residual is bound at run time)
};
std::unique_ptr<Kernel> make_conv_kernel(const Node& conv, CpuSession& session, const ConvIo& io);

// Claims with fusion: every node as the registry decides, plus Conv chains
// (Conv -> [Add] -> [Relu | Clip]) as one group when that is exact.
void claim_nodes_fused(const sdk::Graph& g, nxrt_claim_sink* sink);
// The kernel of a multi-node group claimed by claim_nodes_fused.
std::unique_ptr<Kernel> create_fused_kernel(const sdk::Graph& subgraph, CpuSession& session);

// A kernel whose compute is a lambda over immutable captured state. compute
// never mutates the kernel, so concurrent runs on one kernel are safe.
template <typename F>
class FnKernel final : public Kernel {
 public:
  explicit FnKernel(F f) : f_(std::move(f)) {}
  void compute(Context& ctx) override { f_(ctx); }

 private:
  const F f_;
};
template <typename F>
std::unique_ptr<Kernel> make_kernel(F f) {
  return std::make_unique<FnKernel<F>>(std::move(f));
}

// dtypes any data-movement op accepts (fixed-size element types).
inline constexpr nxrt_dtype kAllFixed[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_UINT8,   NXRT_DTYPE_INT8,   NXRT_DTYPE_UINT16,
                                           NXRT_DTYPE_INT16,   NXRT_DTYPE_INT32,   NXRT_DTYPE_INT64,  NXRT_DTYPE_BOOL,
                                           NXRT_DTYPE_FLOAT16, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_UINT32, NXRT_DTYPE_UINT64,
                                           NXRT_DTYPE_BFLOAT16};

// Refuses unless the given input has dtype `t` (when present).
inline Check input_dtype_is(const Node& n, size_t i, nxrt_dtype t, const char* what) {
  auto v = n.input(i);
  if (v.present() && v.dtype() != t)
    return sdk::refuse(NXRT_REFUSE_DTYPE, "{} input {} ({}) is {}, only {} is implemented", n.op_type(), i, what,
                       sdk::dtype_name(v.dtype()), sdk::dtype_name(t));
  return std::nullopt;
}

// All present inputs and outputs share one dtype.
inline Check same_dtype(const Node& n, size_t input_end = SIZE_MAX) {
  nxrt_dtype t = NXRT_DTYPE_UNDEFINED;
  for (size_t i = 0; i < n.input_count() && i < input_end; ++i)
    if (n.has_input(i)) {
      if (t == NXRT_DTYPE_UNDEFINED) t = n.input(i).dtype();
      else if (n.input(i).dtype() != t)
        return sdk::refuse(NXRT_REFUSE_DTYPE, "{}: mixed input dtypes", n.op_type());
    }
  return std::nullopt;
}

// Refuses when output `i` or later is present (an optional output we do not produce).
inline Check no_outputs_from(const Node& n, size_t i, const char* what) {
  for (size_t k = i; k < n.output_count(); ++k)
    if (n.has_output(k)) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: optional output {} ({}) is not implemented", n.op_type(), k, what);
  return std::nullopt;
}

// The kernel_shape / strides / dilations / pads / auto_pad checks shared by
// MaxPool and AveragePool (1-3 spatial dims). Defined in ops_nn.cpp.
Check pool_geometry_check(const Node& n);

// Refuses unless the attribute is absent or equals `want`.
inline Check attr_int_is(const Node& n, const char* name, int64_t want) {
  auto a = n.attr(name);
  if (a && a->i() != want)
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: {}={} is not implemented (only {})", n.op_type(), name, a->i(), want);
  return std::nullopt;
}

// Chains checks: the first refusal wins.
template <typename... C>
Check first_refusal(C&&... c) {
  Check r;
  ((r ? void() : void(r = c())), ...);
  return r;
}

inline std::string dims_str(std::span<const int64_t> d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

// Normalises a possibly negative axis against rank r; fails when out of range.
inline int64_t norm_axis(int64_t axis, int64_t r, const char* op, bool inclusive_end = false) {
  const int64_t hi = inclusive_end ? r : r - 1;
  const int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a > hi) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: axis {} out of range for rank {}", op, axis, r);
  return a;
}

// Copies a constant input (if constant) so it outlives kernel creation.
struct ConstCopy {
  bool present = false;
  nxrt_dtype dtype = NXRT_DTYPE_UNDEFINED;
  std::vector<int64_t> dims;
  std::vector<unsigned char> bytes;
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(bytes.data()); }
  int64_t numel() const { return sdk::element_count(dims); }
};
inline ConstCopy copy_constant(const Node& n, size_t i) {
  ConstCopy c;
  auto v = n.input(i);
  if (!v.present() || !v.is_constant()) return c;
  ConstTensorView t = v.constant();
  c.present = true;
  c.dtype = t.dtype();
  c.dims = t.dims();
  c.bytes.resize(t.bytes());
  if (!c.bytes.empty()) std::memcpy(c.bytes.data(), t.raw(), t.bytes());
  return c;
}

}  // namespace nxrt::cpu
