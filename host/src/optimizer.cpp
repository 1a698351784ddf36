// The optimizer's driver: runs the passes of a level in order (optimizer.hpp lists them)
// and keeps an account of each in the model's optimizer_log.
#include "optimizer.hpp"

#include "error.hpp"
#include "plugin_library.hpp"

#include <fmt/format.h>

#include <map>

namespace nxrt {

void optimize(nxrt_model_ir& m, const OptimizeOptions& o) {
  if (o.level < 0 || o.level > kMaxOptLevel)
    raise(NXRT_ERR_INVALID_ARGUMENT, "optimization level {} is not one of 0..{}", o.level, kMaxOptLevel);
  auto& log = m.optimizer_log;
  log.push_back(fmt::format("optimization level {}", o.level));
  auto note = [&](int level, const char* pass, size_t changed, const std::string& extra = {}, const char* unit = "node(s)") {
    log.push_back(fmt::format("  [{}] {}: {} {}{}{}", level, pass, changed, unit, extra.empty() ? "" : "; ", extra));
  };
  if (o.level == 0) return;
  // Level 1: exact. Each pass can open work for another, so they repeat until nothing moves.
  size_t noops = 0, shapes = 0, folded = 0, cse = 0, dead = 0;
  std::string fold_note;
  for (int round = 0; round < 8; ++round) {
    size_t changed = 0;
    changed += passes::remove_noops(m);
    noops += changed;
    const size_t s = passes::fold_shapes(m);
    shapes += s;
    std::string n;
    const size_t f = passes::fold_constants(m, o.folder, &n);
    if (fold_note.empty() || f) fold_note = n;
    folded += f;
    const size_t c = passes::eliminate_common_subexpressions(m);
    cse += c;
    const size_t d = passes::eliminate_dead_nodes(m);
    dead += d;
    if (changed + s + f + c + d == 0) break;
  }
  note(1, "no-op removal (Identity, inference Dropout, same-type Cast)", noops);
  note(1, "shape folding (Shape, Size, Gather of Shape, Concat of shapes)", shapes);
  note(1, "constant folding", folded, fold_note);
  note(1, "common-subexpression elimination", cse);
  note(1, "dead-node elimination", dead);
  note(1, "DequantizeLinear copied for each reader past the first", passes::split_shared_dequantize(m));
  if (o.level >= 2) {
    note(2, "MatMul+Add -> Gemm", passes::fuse_matmul_add(m));
    note(2, "BatchNormalization folded into Conv", passes::fold_batchnorm(m));
  }
  if (o.level >= 3)
    note(3, "fusion groups marked for plugins (LayerNorm, GELU, attention)", passes::mark_fusion_groups(m), {}, "group(s)");
}

std::shared_ptr<nxrt_model_ir> clone_model(const std::shared_ptr<const nxrt_model_ir>& model) {
  const nxrt_model_ir& src = *model;
  auto out = std::make_shared<nxrt_model_ir>();
  out->opsets = src.opsets;
  out->path = src.path;
  out->ir_version = src.ir_version;
  out->digest = src.digest;
  out->compiled = src.compiled;
  out->optimized = src.optimized;
  out->optimizer_log = src.optimizer_log;
  out->origin = model->origin ? model->origin : model;
  for (auto& v : src.values) out->values.push_back(std::make_unique<nxrt_value>(*v));
  auto map = [&](const nxrt_value* v) { return v ? out->values[v->id].get() : nullptr; };
  for (auto& n : src.nodes) {
    auto c = std::make_unique<nxrt_node>(*n);
    for (auto& v : c->inputs) v = map(v);
    for (auto& v : c->outputs) v = map(v);
    out->nodes.push_back(std::move(c));
  }
  for (auto* v : src.inputs) out->inputs.push_back(map(v));
  for (auto* v : src.outputs) out->outputs.push_back(map(v));
  return out;
}

}  // namespace nxrt
