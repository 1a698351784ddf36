// What the machine we run on offers: ISA level (from CPUID bits, never from
// family/model), core count, memory and the marketing name.
#pragma once
#include <cstdint>
#include <string>

namespace nxrt::cpu {

enum class Isa { generic = 0, avx2 = 1, avx512 = 2 };

struct CpuInfo {
  std::string model_name;  // /proc/cpuinfo "model name", or "x86-64 CPU"
  std::string vendor;      // /proc/cpuinfo "vendor_id"
  uint64_t memory_bytes = 0;
  int hardware_threads = 1;
  bool avx2 = false;     // AVX2 + FMA
  bool avx512f = false;  // AVX-512 F
  bool avx512bf16 = false;  // AVX-512 BF16 (VDPBF16PS; the cpu.precision=bf16 GEMM)
  // The 8-bit kernels' extensions (detected; a kernel also checks active_isa()):
  bool avx512bw = false;    // BW with VL and DQ: byte and word lanes, masks
  bool avx512vnni = false;  // vpdpbusd, vpdpwssd
  bool avx512vbmi = false;  // byte permutes (vpermb, vpermt2b)
  Isa isa = Isa::generic;
  std::string isa_name() const;  // "avx512f", "avx2", "generic"
};

// Detected once; thread-safe.
const CpuInfo& cpu_info();

// The ISA the kernels use: the detected one, optionally capped by the
// environment variable NXRT_CPU_ISA=generic|avx2|avx512 (for testing fallbacks).
Isa active_isa();

// AVX-512 in use (active_isa()) with BW, VL and DQ: the 8-bit kernels' common requirement,
// which add VNNI or VBMI from cpu_info() where they need them. Read once.
bool avx512bw_active();

}  // namespace nxrt::cpu
