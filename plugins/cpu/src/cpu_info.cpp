#include "cpu_info.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

namespace nxrt::cpu {

std::string CpuInfo::isa_name() const {
  switch (isa) {
    case Isa::avx512: return "avx512f";
    case Isa::avx2: return "avx2";
    default: return "generic";
  }
}

static std::string cpuinfo_field(const std::string& key) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto v = line.substr(colon + 1);
    auto b = v.find_first_not_of(" \t");
    return b == std::string::npos ? std::string() : v.substr(b);
  }
  return {};
}

static CpuInfo detect() {
  CpuInfo c;
  c.model_name = cpuinfo_field("model name");
  if (c.model_name.empty()) c.model_name = "x86-64 CPU";
  c.vendor = cpuinfo_field("vendor_id");
  if (c.vendor.empty()) c.vendor = "unknown";
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) c.memory_bytes = uint64_t(pages) * uint64_t(page);
  unsigned hw = std::thread::hardware_concurrency();
  c.hardware_threads = hw ? int(hw) : 1;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  c.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  c.avx512f = __builtin_cpu_supports("avx512f");
  c.avx512bf16 = c.avx512f && __builtin_cpu_supports("avx512bf16");
  c.avx512bw = c.avx512f && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq");
  c.avx512vnni = c.avx512f && __builtin_cpu_supports("avx512vnni");
  c.avx512vbmi = c.avx512f && __builtin_cpu_supports("avx512vbmi");
#endif
  c.isa = c.avx512f ? Isa::avx512 : c.avx2 ? Isa::avx2 : Isa::generic;
  return c;
}

const CpuInfo& cpu_info() {
  static const CpuInfo info = detect();
  return info;
}

Isa active_isa() {
  static const Isa isa = [] {
    Isa best = cpu_info().isa;
    const char* e = std::getenv("NXRT_CPU_ISA");
    if (!e) return best;
    Isa want = best;
    if (!std::strcmp(e, "generic")) want = Isa::generic;
    else if (!std::strcmp(e, "avx2")) want = Isa::avx2;
    return int(want) < int(best) ? want : best;
  }();
  return isa;
}

bool avx512bw_active() {
  static const bool ok = active_isa() >= Isa::avx512 && cpu_info().avx512bw;
  return ok;
}

}  // namespace nxrt::cpu
