// The pipelines a claimed group will use, listed without a device: the group's shapes
// inferred from its static input shapes and its nodes emitted against a PipelinePlan,
// which records each (shader, specialization constants) instead of compiling it. Offline
// sessions and kernel export write the list into the kernel blob; import checks it
// against the list this device would make and creates those pipelines eagerly.
#pragma once
#include "ops.hpp"

#include <optional>
#include <vector>

namespace nxrt::vk {

struct PipelineKey {
  Shader shader = Shader::count;
  std::vector<uint32_t> spec;
  friend bool operator==(const PipelineKey&, const PipelineKey&) = default;
};

class PipelinePlan : public PipelineSource {
 public:
  // Records the key (once, in first-use order); the returned Pipeline has no handles.
  const Pipeline& pipeline(Shader s, std::span<const uint32_t> spec) override;
  const std::vector<PipelineKey>& keys() const { return keys_; }

 private:
  std::vector<PipelineKey> keys_;
  Pipeline none_;
};

// The pipelines of `g` (a group after prepare_group) for the static shapes of its inputs,
// in first-use order; nullopt when an input's shape is not static (tile choices and so
// the pipelines depend on the run's shapes) or shape inference rejects them.
std::optional<std::vector<PipelineKey>> plan_pipelines(const IrGraph& g);

// The embedded SPIR-V of a shader (shaders.cpp); empty for an out-of-range id.
std::span<const uint32_t> shader_spirv(Shader s);
// FNV-1a of a shader's SPIR-V words: a blob records it so a plugin build whose shaders
// changed (same version) does not reuse another build's choices.
uint64_t shader_digest(Shader s);

// "matmul{64,64,64,8,8,8,0}" for reasons and logs.
std::string describe(const PipelineKey& k);
const char* shader_name(Shader s);

}  // namespace nxrt::vk
