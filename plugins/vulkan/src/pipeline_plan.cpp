#include "pipeline_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>

namespace nxrt::vk {

const Pipeline& PipelinePlan::pipeline(Shader s, std::span<const uint32_t> spec) {
  PipelineKey k{s, std::vector<uint32_t>(spec.begin(), spec.end())};
  if (std::find(keys_.begin(), keys_.end(), k) == keys_.end()) keys_.push_back(std::move(k));
  return none_;
}

std::optional<std::vector<PipelineKey>> plan_pipelines(const IrGraph& g) {
  const size_t nv = g.values.size();
  std::vector<Shape> shape(nv);
  std::vector<bool> known(nv, false);
  // Emitters only store locations; one placeholder allocation stands for every buffer.
  static Alloc placeholder;
  for (int v : g.inputs) {
    if (v < 0) continue;
    const IrValue& iv = g.values[size_t(v)];
    if (iv.rank < 0 || iv.dims.size() != size_t(iv.rank)) return std::nullopt;
    for (int64_t d : iv.dims)
      if (d < 0) return std::nullopt;
    shape[size_t(v)] = iv.dims;
    known[size_t(v)] = true;
  }
  std::vector<bool> is_out(nv, false);
  for (int v : g.outputs)
    if (v >= 0) is_out[size_t(v)] = true;
  PipelinePlan plan;
  std::vector<Cmd> cmds;
  try {
    for (const IrNode& n : g.nodes) {
      std::vector<const Shape*> in_shapes;
      for (int v : n.in) {
        if (v >= 0 && !known[size_t(v)]) return std::nullopt;  // an absent optional input's consumer
        in_shapes.push_back(v >= 0 ? &shape[size_t(v)] : nullptr);
      }
      std::vector<Shape> out_shapes;
      infer_shapes(g, n, in_shapes, out_shapes);
      for (size_t o = 0; o < n.out.size() && o < out_shapes.size(); ++o)
        if (n.out[o] >= 0) {
          shape[size_t(n.out[o])] = out_shapes[o];
          known[size_t(n.out[o])] = true;
        }
      // As Program::run: a view that is not a group output is a pure alias, no commands.
      if (is_view(n) && n.out[0] >= 0 && !is_out[size_t(n.out[0])]) continue;
      std::vector<Loc> il, ol;
      for (int v : n.in) il.push_back(v >= 0 ? Loc{&placeholder, 0, 0} : Loc{});
      for (int v : n.out) ol.push_back(v >= 0 ? Loc{&placeholder, 0, 0} : Loc{});
      emit_node(plan, g, n, il, in_shapes, ol, out_shapes, cmds);
    }
  } catch (const sdk::Error&) {
    return std::nullopt;  // shapes the kernel would reject at run time: nothing to plan
  }
  return plan.keys();
}

const char* shader_name(Shader s) {
  static const char* const names[] = {
      "unary",         "binary",         "copy",          "gather",       "softmax",       "layernorm",
      "reduce",        "batchnorm",      "pool",          "conv_direct",  "matmul",        "conv_gemm",
      "unary_f16",     "binary_f16",     "softmax_f16",   "matmul_f16",   "copy_f16",      "gather_f16",
      "layernorm_f16", "reduce_f16",     "batchnorm_f16", "pool_f16",     "conv_direct_f16", "conv_gemm_f16",
      "cast",          "cast_to_f16",    "cast_from_f16"};
  static_assert(std::size(names) == size_t(Shader::count));
  return size_t(s) < std::size(names) ? names[size_t(s)] : "?";
}

uint64_t shader_digest(Shader s) {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t w : shader_spirv(s))
    for (int i = 0; i < 4; ++i) {
      h ^= (w >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  return h;
}

std::string describe(const PipelineKey& k) {
  return fmt::format("{}{{{}}}", shader_name(k.shader), fmt::join(k.spec, ","));
}

}  // namespace nxrt::vk
