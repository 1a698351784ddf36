// The CUDA plugin's side of the ABI 2.4 compiled-kernel cache, without a device: the
// session fingerprint (what the kernels' code and choices depend on), the verdict on
// another session's fingerprint, and the kernel blob (generated code per architecture,
// chosen cuBLASLt/cuDNN algorithms), written and read with every read bounds-checked.
// Host C++ only (unit-tested); the plugin (plugin.cpp, executor.cpp) uses it.
#pragma once
#include "ir.hpp"
#include "nvrtc.hpp"

#include <nxrt_sdk/kernel_cache.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace nxrt::cuda {

// Version of the kernel blob layout below; part of the fingerprint.
constexpr uint32_t kBlobFormat = 1;

// What a session's kernels depend on. Versions are text ("13.0", "none" for a library
// that did not load); arch is the compute capability * 10.
struct FingerprintFields {
  std::string plugin_version;
  int arch = 0;
  std::string cudart, nvrtc, cublaslt, cudnn;
  bool tf32 = false, cudnn_conv = true;
  std::string name;  // the device's name, for people (never judged)
};
std::string fingerprint_text(const FingerprintFields& f);

// Kernels compiled by a session whose fingerprint was `compiled`, for a session whose
// fingerprint is `here`: OPTIMAL when architecture, versions and code-changing options
// agree; USABLE when only the algorithm libraries differ (choices made again at the first
// run) or the code is for a lower architecture (its PTX is JIT-compiled); RECOMPILE for a
// higher architecture, another plugin version, CUDA runtime or option; UNSUPPORTED for
// text that is not this plugin's fingerprint (or another blob format).
sdk::CacheJudgement judge_fingerprint(const std::string& compiled, const std::string& here);

// "9.0" (cuda.compute_capability) -> 90; -1 when it is not MAJOR.MINOR.
int parse_compute_capability(const std::string& s);

// The SM architecture an ELF cubin is for (e_machine EM_CUDA, e_flags), or -1 when the
// bytes are not a CUDA ELF.
int cubin_arch(std::span<const uint8_t> cubin);

// A digest of a claim's IR as kernel_create builds it (ops, attributes, value types and
// static shapes, small constants): a blob made for another claim is not taken.
uint64_t claim_digest(const IrGraph& g);

// A claim's IR made ready to run: every node checked, activations folded into their
// producers, element-wise chains fused (when `chains`) and their generated source.
struct PreparedGroup {
  IrGraph g;
  uint64_t claim = 0;  // claim_digest of the IR before any fusion
  std::string source;  // chain_source of g ("" when nothing is generated)
};
// Throws sdk::Error (NXRT_UNSUPPORTED) for a node the plugin does not compute.
PreparedGroup prepare_group(IrGraph g, bool chains);

// The digest of a generated source kept in blobs (0 for "").
uint64_t source_digest(const std::string& source);

// One algorithm choice: the plugin's key for a GEMM or convolution shape and the library's
// answer as its bytes (cublasLtMatmulHeuristicResult_t, cudnnConvolutionFwdAlgoPerf_t).
struct AlgoChoice {
  std::vector<int64_t> key;
  std::vector<uint8_t> result;
};

struct KernelBlob {
  uint64_t claim = 0;   // claim_digest of the claim
  uint64_t source = 0;  // digest of the generated source (0: the kernel generates nothing)
  CompiledCode code;    // arch 0 when there is no code
  std::string cublaslt, cudnn;  // versions the choices were made with
  std::vector<AlgoChoice> gemm, conv;
};

void write_kernel_blob(sdk::BlobWriter& w, const KernelBlob& b);
// Throws sdk::BlobRejected (UNSUPPORTED: not a CUDA blob, another format, a failed
// checksum, truncated or malformed).
KernelBlob read_kernel_blob(std::span<const uint8_t> blob);

}  // namespace nxrt::cuda
