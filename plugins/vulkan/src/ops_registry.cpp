// The registration index: every op family of the Vulkan plugin, one line
// each. An op is added in its family file (ops_<family>.cpp); a new family
// file adds one declaration and one entry here.
#include "op_kernel.hpp"

#include <map>

namespace nxrt::vk {

std::vector<OpKernel> elementwise_ops();    // ops_elementwise.cpp: unary activations/math, broadcasting binary
std::vector<OpKernel> cast_ops();           // ops_cast.cpp: Cast, CastLike
std::vector<OpKernel> matmul_ops();         // ops_matmul.cpp: MatMul, Gemm
std::vector<OpKernel> conv_ops();           // ops_conv.cpp: Conv
std::vector<OpKernel> pool_ops();           // ops_pool.cpp: MaxPool, AveragePool
std::vector<OpKernel> reduce_ops();         // ops_reduce.cpp: Reduce*, GlobalAveragePool, GlobalMaxPool
std::vector<OpKernel> normalization_ops();  // ops_normalization.cpp: BatchNormalization, LayerNormalization
std::vector<OpKernel> softmax_ops();        // ops_softmax.cpp: Softmax, LogSoftmax
std::vector<OpKernel> data_movement_ops();  // ops_data_movement.cpp: Transpose, Concat, Gather, Slice, Expand
std::vector<OpKernel> view_ops();           // ops_views.cpp: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout, Shape

namespace {

using Family = std::vector<OpKernel> (*)();
constexpr Family kFamilies[] = {
    elementwise_ops, cast_ops, matmul_ops, conv_ops, pool_ops, reduce_ops,
    normalization_ops, softmax_ops, data_movement_ops, view_ops,
};

struct Registry {
  std::vector<OpKernel> kernels;
  std::map<std::string, const OpKernel*> by_op;
};

const Registry& registry() {
  static const Registry r = [] {
    Registry r;
    for (Family f : kFamilies)
      for (auto& k : f()) r.kernels.push_back(std::move(k));
    for (const auto& k : r.kernels) {
      if (!k.infer || !k.emit || (k.opset.since > 1 && !k.opset.refusal))
        sdk::fail(NXRT_INTERNAL, "Vulkan kernel for {} lacks a shape function, an emitter or an opset refusal", k.names.at(0));
      for (const auto& name : k.names)
        if (!r.by_op.emplace(name, &k).second) sdk::fail(NXRT_INTERNAL, "two Vulkan kernels for {}", name);
    }
    return r;
  }();
  return r;
}

}  // namespace

const OpKernel* find_kernel(const std::string& op) {
  auto it = registry().by_op.find(op);
  return it == registry().by_op.end() ? nullptr : it->second;
}

std::vector<std::string> kernel_ops() {
  std::vector<std::string> v;
  for (auto& [op, k] : registry().by_op) v.push_back(op);
  return v;
}

}  // namespace nxrt::vk
