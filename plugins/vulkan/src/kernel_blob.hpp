// The Vulkan kernel blob (ABI 2.4 kernel cache): what a claimed group's Program needs to
// skip compile work, and what proves the blob belongs to the claim it is imported for.
//
// Layout (kBlobFormat 1, native byte order; every read bounds-checked by sdk::BlobReader):
//   "NXVKKB01", u32 format, u32 0
//   u64 claim digest (ops, attributes, opsets, value types and shapes, small constants)
//   string claim text ("MatMul+Relu; in float32[4,8] ...; out ..."), for reasons
//   u32 node count after fusion, per node: string op, i32 act, f32 act_a, f32 act_b
//   u8 planned (0: an input shape is dynamic, no pipeline list), u32 pipeline count,
//     per pipeline: u32 shader id, u64 SPIR-V digest, u32 spec count (<= 16), u32 spec[]
//   u64 driver pipeline-cache size, its bytes (as vkGetPipelineCacheData gave them)
//   u64 FNV-1a of every byte before it
#pragma once
#include "device_traits.hpp"
#include "pipeline_plan.hpp"

#include <nxrt_sdk/kernel_cache.hpp>

#include <optional>
#include <span>
#include <string>
#include <vector>

namespace nxrt::vk {

struct FusedNode {
  std::string op;
  int32_t act = -1;
  float act_a = 0, act_b = 0;
  friend bool operator==(const FusedNode&, const FusedNode&) = default;
};

// The compile choices of one claim on one device.
struct KernelChoices {
  uint64_t claim_digest = 0;
  std::string claim_text;
  std::vector<FusedNode> fused;                       // the group after prepare_group
  std::optional<std::vector<PipelineKey>> pipelines;  // plan_pipelines
};

// The claim's identity (digest and text) from the group as built from the claim's view.
KernelChoices identify(const IrGraph& claim);
// Adds the choices made for `prepared` (the group after prepare_group): fusion, pipelines.
void choose(KernelChoices& c, const IrGraph& prepared);

void write_blob(sdk::BlobWriter& w, const KernelChoices& c, std::span<const uint8_t> driver_cache);

struct ReadBlob {
  KernelChoices choices;
  std::span<const uint8_t> driver_cache;  // points into the blob
};
// Throws sdk::BlobRejected: UNSUPPORTED ("corrupt blob: ...") for anything malformed,
// RECOMPILE when a listed shader's SPIR-V differs from this build's. Shader ids are in
// range and spec counts bounded on return.
ReadBlob read_blob(std::span<const uint8_t> blob);

// Why a blob's choices cannot be used for a claim whose own choices are `here`, or
// nullopt when they are the same: another claim (digest), another fusion or another
// pipeline list.
std::optional<std::string> mismatch(const KernelChoices& blob, const KernelChoices& here);

}  // namespace nxrt::vk
