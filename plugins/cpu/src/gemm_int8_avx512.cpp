// AVX-512 VNNI kernel of the 8-bit GEMM (gemm_int8.hpp): vpdpwssd multiplies the int16 pairs
// and adds them to the int32 accumulator in one instruction (wrapping, not the saturating
// vpdpwssds), 16 columns (a whole panel) per zmm. One call computes kQTileGroup row tiles
// against the same B slice (6 accumulators each), so every B vector loaded feeds 6 x
// kQTileGroup multiply-adds and the A pairs come as embedded broadcasts. Target attribute;
// used only when CPUID reports AVX-512 F/BW and VNNI and the ISA is not capped below avx512.
#include "gemm_int8.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

namespace nxrt::cpu {
namespace {

#define NXRT_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

template <int NT>
NXRT_VNNI void tiles_vnni(int64_t kcp, const uint32_t* a, int64_t a_next, const uint32_t* b, int32_t* const* acc,
                          bool load) {
  __m512i c[NT][kQMR];
#pragma GCC unroll 3
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 6
    for (int m = 0; m < kQMR; ++m) c[t][m] = load ? _mm512_loadu_si512(acc[t] + m * kQNR) : _mm512_setzero_si512();
  // One pointer per tile, so each broadcast is a constant offset from it.
  const uint32_t* at[NT];
  for (int t = 0; t < NT; ++t) at[t] = a + t * a_next;
  for (int64_t k = 0; k < kcp; ++k) {
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kQNR), _MM_HINT_T0);
    const __m512i bv = _mm512_load_si512(b);
#pragma GCC unroll 3
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 6
      for (int m = 0; m < kQMR; ++m) c[t][m] = _mm512_dpwssd_epi32(c[t][m], _mm512_set1_epi32(int(at[t][m])), bv);
      at[t] += kQMR;
    }
    b += kQNR;
  }
#pragma GCC unroll 3
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 6
    for (int m = 0; m < kQMR; ++m) _mm512_storeu_si512(acc[t] + m * kQNR, c[t][m]);
}

void tile_vnni(int64_t kcp, const uint32_t* a, const uint32_t* b, int32_t* acc, bool load) {
  int32_t* const accs[1] = {acc};
  tiles_vnni<1>(kcp, a, 0, b, accs, load);
}

#define NXRT_BW __attribute__((target("avx512f,avx512bw,avx512vl")))

// Each run's columns by a masked 16-lane load (masked-off lanes are not read), the two k
// rows interleaved into pairs.
NXRT_BW void pack_runs_avx512(const int16_t* base, const int64_t* koff, int64_t K, const QPanelRuns& runs, int64_t k0,
                              int64_t kc, uint32_t* dst) {
  __mmask16 mask[kQNR];
  for (int r = 0; r < runs.n; ++r)
    mask[r] = __mmask16(((1u << (runs.col[r + 1] - runs.col[r])) - 1u) << runs.col[r]);
  for (int64_t i = 0; i < kc; ++i) {
    const int64_t ka = 2 * (k0 + i);
    const int16_t* r0 = base + koff[ka];
    const int16_t* r1 = ka + 1 < K ? base + koff[ka + 1] : nullptr;
    __m256i v0 = _mm256_setzero_si256(), v1 = _mm256_setzero_si256();
    for (int r = 0; r < runs.n; ++r) {
      const int64_t at = runs.off[r] - runs.col[r];
      v0 = _mm256_or_si256(v0, _mm256_maskz_loadu_epi16(mask[r], r0 + at));
      if (r1) v1 = _mm256_or_si256(v1, _mm256_maskz_loadu_epi16(mask[r], r1 + at));
    }
    // unpacklo/hi pair columns 0-3 | 8-11 and 4-7 | 12-15; the lane permutes put them in order.
    const __m256i lo = _mm256_unpacklo_epi16(v0, v1), hi = _mm256_unpackhi_epi16(v0, v1);
    __m256i* d = reinterpret_cast<__m256i*>(dst + i * kQNR);
    _mm256_store_si256(d, _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_store_si256(d + 1, _mm256_permute2x128_si256(lo, hi, 0x31));
  }
}

}  // namespace

QPackRunsFn q_pack_runs_avx512() { return __builtin_cpu_supports("avx512bw") ? &pack_runs_avx512 : nullptr; }

QTileFn q_tile_vnni() { return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni") ? &tile_vnni : nullptr; }
QTileGroupFn q_tile_group_vnni(int nt) {
  static constexpr QTileGroupFn by_count[] = {nullptr, &tiles_vnni<1>, &tiles_vnni<2>, &tiles_vnni<3>};
  static_assert(kQTileGroup == 3);
  return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni") ? by_count[nt] : nullptr;
}

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
QTileFn q_tile_vnni() { return nullptr; }
QTileGroupFn q_tile_group_vnni(int) { return nullptr; }
QPackRunsFn q_pack_runs_avx512() { return nullptr; }
}  // namespace nxrt::cpu
#endif
