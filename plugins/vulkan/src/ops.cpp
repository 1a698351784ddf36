// The common part of operator support: the claim checks every node goes
// through (domain, op, attributes, types, opset range, binding sizes) before
// its kernel's own check, and the dispatch of shape inference and command
// emission to the kernel registered for the op (ops_registry.cpp).
#include "ops.hpp"

#include "op_kernel.hpp"
#include "shape_math.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace nxrt::vk {

using sdk::fail;
using sdk::Refusal;
using sdk::refuse;

namespace {

// Data inputs/outputs against the kernel's types. A float16 node needs the op's
// float16 kernel, 16-bit storage on the device, and float16 on every data tensor.
R check_dtypes(const IrGraph& g, const IrNode& n, const OpKernel& d, const DeviceLimits& lim) {
  const TypeConstraint& types = d.types;
  auto ok = [&](nxrt_dtype t) { return std::find(types.dtypes.begin(), types.dtypes.end(), t) != types.dtypes.end(); };
  bool any16 = false, all16 = true;
  auto visit = [&](const IrValue* v, const char* role, size_t i) -> R {
    if (v->dtype == NXRT_DTYPE_FLOAT16 && types.f16) {
      any16 = true;
      return std::nullopt;
    }
    all16 = false;
    if (ok(v->dtype)) return std::nullopt;
    if (v->dtype == NXRT_DTYPE_FLOAT16)
      return refuse(NXRT_REFUSE_DTYPE, "{} {} {} is float16 (no float16 Vulkan kernel for {})", n.op, role, i, n.op);
    std::string takes;
    for (auto t : types.dtypes) takes += (takes.empty() ? "" : "/") + std::string(sdk::dtype_name(t));
    if (types.f16) takes += "/float16";
    return refuse(NXRT_REFUSE_DTYPE, "{} {} {} is {} (the Vulkan kernel takes {})", n.op, role, i, sdk::dtype_name(v->dtype), takes);
  };
  for (size_t i = 0; i < n.in.size(); ++i)
    if (auto v = g.in(n, i); v && !d.meta_inputs.count(i))
      if (auto r = visit(v, "input", i)) return r;
  for (size_t i = 0; i < n.out.size(); ++i)
    if (auto v = g.out(n, i); v && !d.meta_outputs.count(i))
      if (auto r = visit(v, "output", i)) return r;
  if (any16 && !all16) return refuse(NXRT_REFUSE_DTYPE, "{} mixes float16 with other types", n.op);
  if (any16 && !lim.storage16)
    return refuse(NXRT_REFUSE_DTYPE, "{} is float16 but the device lacks storageBuffer16BitAccess", n.op);
  return std::nullopt;
}

R check_opset(const IrNode& n, const OpsetRange& r) {
  if (n.opset < r.since) return refuse(NXRT_REFUSE_OPSET, fmt::runtime(r.refusal), n.op);
  if (n.opset > r.until)
    return refuse(NXRT_REFUSE_OPSET, "{} opset {} is newer than the Vulkan kernel's (up to {})", n.op, n.opset, r.until);
  return std::nullopt;
}

// Every tensor must fit one storage-buffer binding.
R check_binding_sizes(const IrGraph& g, const IrNode& n, const DeviceLimits& lim) {
  for (size_t k = 0; k < n.in.size() + n.out.size(); ++k) {
    auto v = k < n.in.size() ? g.in(n, k) : g.out(n, k - n.in.size());
    if (!v || v->rank < 0) continue;
    bool known = true;
    uint64_t bytes = sdk::dtype_size(v->dtype);
    for (auto dd : v->dims) {
      if (dd < 0) known = false;
      else bytes *= uint64_t(dd);
    }
    if (known && bytes > lim.max_storage_range)
      return refuse(NXRT_REFUSE_SHAPE, "{}: a {}-byte tensor exceeds maxStorageBufferRange ({})", n.op, bytes, lim.max_storage_range);
    if (known && bytes / std::max<size_t>(1, sdk::dtype_size(v->dtype)) > 0xffffffffull)
      return refuse(NXRT_REFUSE_SHAPE, "{}: tensor with more than 2^32 elements", n.op);
  }
  return std::nullopt;
}

}  // namespace

std::optional<Refusal> check_node(const IrGraph& g, const IrNode& n, const DeviceLimits& lim) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return refuse(NXRT_REFUSE_OP, "no Vulkan kernel for {}::{}", n.domain, n.op);
  const OpKernel* d = find_kernel(n.op);
  if (!d) return refuse(NXRT_REFUSE_OP, "no Vulkan kernel for {}", n.op);
  for (auto& [name, a] : n.attrs)
    if (!d->attrs.count(name)) return refuse(NXRT_REFUSE_ATTRIBUTE, "{} attribute '{}' is not implemented", n.op, name);
  if (n.in.empty() || !g.in(n, 0)) return refuse(NXRT_REFUSE_OTHER, "{} without a first input", n.op);
  if (auto r = d->check_types ? d->check_types(g, n, lim) : check_dtypes(g, n, *d, lim)) return r;
  if (auto r = check_binding_sizes(g, n, lim)) return r;
  if (auto r = check_opset(n, d->opset)) return r;
  if (d->check) return d->check(g, n);
  return std::nullopt;
}

std::vector<std::string> supported_ops() { return kernel_ops(); }

bool is_view(const IrNode& n) {
  auto d = find_kernel(n.op);
  return d && d->view;
}

void infer_shapes(const IrGraph& g, const IrNode& n, const std::vector<const Shape*>& in, std::vector<Shape>& out) {
  out.assign(n.out.size(), {});
  auto d = find_kernel(n.op);
  if (!d) fail(NXRT_INTERNAL, "no Vulkan kernel for {}", n.op);
  d->infer(g, n, in, out);
}

void emit_node(PipelineSource& dev, const IrGraph& g, const IrNode& n, const std::vector<Loc>& il, const std::vector<const Shape*>& is,
               const std::vector<Loc>& ol, const std::vector<Shape>& os, std::vector<Cmd>& cmds) {
  const int64_t ny = numel(os[0]);
  if (ny == 0) return;
  auto d = find_kernel(n.op);
  if (!d || !d->emit) fail(NXRT_INTERNAL, "no emitter for {}", n.op);
  Emitter e{dev, cmds};
  // check_node claims float16 only with every data tensor float16: kernels
  // pick the 16-bit storage variant from the output's type.
  const bool f16 = g.out(n, 0)->dtype == NXRT_DTYPE_FLOAT16;
  d->emit(e, EmitArgs{g, n, il, is, ol, os, ny, f16});
}

}  // namespace nxrt::vk
