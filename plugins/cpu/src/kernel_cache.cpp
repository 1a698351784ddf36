#include "kernel_cache.hpp"

#include <map>
#include <nxrt_sdk/prepacked.hpp>

#include "gemm.hpp"

namespace nxrt::cpu {

std::optional<Isa> isa_from_name(const std::string& name) {
  if (name == "avx512f") return Isa::avx512;
  if (name == "avx2") return Isa::avx2;
  if (name == "generic") return Isa::generic;
  return std::nullopt;
}

const char* isa_label(Isa isa) { return isa == Isa::avx512 ? "avx512f" : isa == Isa::avx2 ? "avx2" : "generic"; }

namespace {

// The GEMM micro-kernel a CPU of `isa` runs (gemm_tile_active's choice).
const char* gemm_kernel_for(Isa isa) { return gemm_kernel_name_for(int(isa)); }

// "cpu V; k=v; k=v" -> {"": "cpu V", k: v...}; nullopt when it is not that shape.
std::optional<std::map<std::string, std::string>> parse(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t at = 0;
  bool first = true;
  while (at <= text.size()) {
    size_t end = text.find("; ", at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    if (first) {
      if (item.rfind("cpu ", 0) != 0 || item.size() <= 4) return std::nullopt;
      out[""] = item.substr(4);
      first = false;
    } else {
      const size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0 || out.count(item.substr(0, eq))) return std::nullopt;
      out[item.substr(0, eq)] = item.substr(eq + 1);
    }
    at = end + 2;
  }
  for (const char* key : {"format", "isa", "gemm", "layout", "conv"})
    if (!out.count(key)) return std::nullopt;
  return out;
}

}  // namespace

std::string cpu_fingerprint(Isa isa) {
  return fmt::format("cpu {}; format={}; isa={}; gemm={}; layout=mr{},nr{},kc{},w16; conv=a-tiles+wino4x4", kCpuPluginVersion,
                     sdk::kPrepackedFormat, isa_label(isa), gemm_kernel_for(isa), kGemmMR, kGemmNR, kGemmKC);
}

sdk::CacheJudgement judge_cpu_fingerprint(const std::string& stored, const std::string& own) {
  if (stored == own) return {};
  const auto s = parse(stored), o = parse(own);
  if (!s) return {NXRT_CACHE_UNSUPPORTED, fmt::format("'{}' is not a CPU plugin fingerprint", stored.substr(0, 120))};
  if (!o) return {NXRT_CACHE_RECOMPILE, fmt::format("this session's fingerprint '{}' does not parse", own)};
  auto& sv = *s;
  auto& ov = *o;
  if (sv.at("") != ov.at(""))
    return {NXRT_CACHE_RECOMPILE, fmt::format("compiled by CPU plugin {}, this is CPU plugin {}", sv.at(""), ov.at(""))};
  for (const char* key : {"format", "layout", "conv"})
    if (sv.at(key) != ov.at(key))
      return {NXRT_CACHE_RECOMPILE,
              fmt::format("packed with {} {}, this build packs {} {}", key, sv.at(key), key, ov.at(key))};
  if (sv.size() != ov.size()) return {NXRT_CACHE_RECOMPILE, fmt::format("compiled for '{}', this session is '{}'", stored, own)};
  for (auto& [k, v] : sv)
    if (k != "isa" && k != "gemm" && (!ov.count(k) || ov.at(k) != v))
      return {NXRT_CACHE_RECOMPILE, fmt::format("compiled with {}={}, this session has {}", k, v, ov.count(k) ? ov.at(k) : "none")};
  return {NXRT_CACHE_USABLE,
          fmt::format("packed for ISA {} (GEMM kernel {}), this CPU runs {} (GEMM kernel {}): the packed layout is the "
                      "same and kernels are picked here at run time",
                      sv.at("isa"), sv.at("gemm"), ov.at("isa"), ov.at("gemm"))};
}

}  // namespace nxrt::cpu
