// The CPU plugin's side of the compiled-kernel cache (ABI 2.4): the session fingerprint (what
// a prepacked buffer depends on) and the judgement of a stored one.
//
// What the packed buffers depend on: the plugin version, the prepacked blob format, and the
// packed layouts (GEMM MR/NR/KC and panel rounding, conv weights as per-group GEMM A tiles).
// None of that depends on the ISA: the micro-kernel is picked at run time from CPUID bits
// and reads the same layout on every x86-64 CPU. So a blob from a CPU with another ISA is
// USABLE (correct; the reason says which kernels each side runs), another layout, format or
// plugin version is RECOMPILE, and text that is not a CPU fingerprint is UNSUPPORTED.
#pragma once
#include <nxrt_sdk/kernel_cache.hpp>

#include <optional>
#include <string>

#include "cpu_info.hpp"

namespace nxrt::cpu {

inline constexpr const char* kCpuPluginVersion = "0.3.0";

// The ISA named as the CPU device reports it ("avx512f", "avx2", "generic"); nullopt for a
// name this build does not know (it cannot pack for it).
std::optional<Isa> isa_from_name(const std::string& name);
const char* isa_label(Isa isa);

// One line: "cpu 0.3.0; format=1; isa=avx2; gemm=generic; layout=mr8,nr48,kc256,w16; conv=a-tiles".
std::string cpu_fingerprint(Isa isa);

// The verdict on kernels compiled by a session whose fingerprint was `stored`, here `own`.
sdk::CacheJudgement judge_cpu_fingerprint(const std::string& stored, const std::string& own);

}  // namespace nxrt::cpu
