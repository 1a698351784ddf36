// AVX-512 BF16 GEMM micro-kernel (gemm_bf16.hpp): up to 8 rows x 48 columns in 24
// accumulators, each VDPBF16PS adding two k steps (a bf16 pair of A broadcast to every lane,
// against 16 columns' pairs of B). Also the A tile packing: 8 rows x 16 k rounded to bf16
// and transposed pair-wise. Compiled with a target attribute, called only after CPUID
// reports AVX-512 BF16.
#include <cstring>

#include "cpu_info.hpp"
#include "gemm_bf16.hpp"
#include "gemm_tile_avx512.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

namespace nxrt::cpu {
namespace {

#define NXRT_BF16 __attribute__((target("avx512f,avx512bf16,avx512vl,avx512bw,fma,avx2")))

template <int MR, int NV>
NXRT_BF16 void tile(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, __mmask16 last,
                    const GemmTileStore& st) {
  __m512 r[MR][NV];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) r[m][v] = _mm512_setzero_ps();
  // A pair of A is one 4-byte slot: broadcast as a 32-bit integer.
  const float* ak = a;
  const float* bk = b;
  avx512::SlicePrefetch pf(st, kc);  // the next B slice into L2, as the fp32 kernel does
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    pf.step();
    __m512bh bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(bk + v * 16);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      int32_t pair;
      std::memcpy(&pair, ak + m, sizeof pair);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) r[m][v] = _mm512_dpbf16_ps(r[m][v], av, bv[v]);
    }
    ak += kGemmMR;
    bk += ldb;
  }

  avx512::store_tile<MR, NV>(r, c, ldc, last, st);
}

using TileT = void (*)(int64_t, const float*, const float*, int64_t, float*, int64_t, __mmask16, const GemmTileStore&);

template <int NV>
constexpr TileT row_table[8] = {&tile<1, NV>, &tile<2, NV>, &tile<3, NV>, &tile<4, NV>,
                                &tile<5, NV>, &tile<6, NV>, &tile<7, NV>, &tile<8, NV>};

void tile_dispatch(int64_t kc, const float* a, const float* b, int64_t w, int64_t ldb, bool /*b_unpacked*/, float* c,
                   int64_t ldc, int64_t mr, int64_t ncols, const GemmTileStore& st) {
  const int nv = int(w / 16);
  const __mmask16 last = avx512::last_vector_mask(ncols, nv);
  const TileT fn = nv == 3 ? row_table<3>[mr - 1] : nv == 2 ? row_table<2>[mr - 1] : row_table<1>[mr - 1];
  fn(kc, a, b, ldb, c, ldc, last, st);
}

// 8 rows x 16 k of a row-major A (rows past mr zero) as 8 slots of bf16 pairs per k pair:
// each row's 16 values rounded into 8 pairs, then the 8 x 8 pair matrix transposed.
NXRT_BF16 void pack_a_tile(const float* a, int64_t lda, int64_t mr, int64_t K, float alpha, float* dst) {
  const __m512 al = _mm512_set1_ps(alpha);
  const int64_t K16 = K / 16 * 16;
  for (int64_t k = 0; k < K16; k += 16) {
    __m256 r[8];
    for (int m = 0; m < 8; ++m)
      r[m] = m < mr ? _mm256_castsi256_ps((__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(al, _mm512_loadu_ps(a + m * lda + k))))
                    : _mm256_setzero_ps();
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    float* d = dst + (k / 2) * kGemmMR;  // 8 pairs of k, 8 slots each
    _mm256_storeu_ps(d + 0 * 8, _mm256_permute2f128_ps(s0, s4, 0x20));
    _mm256_storeu_ps(d + 1 * 8, _mm256_permute2f128_ps(s1, s5, 0x20));
    _mm256_storeu_ps(d + 2 * 8, _mm256_permute2f128_ps(s2, s6, 0x20));
    _mm256_storeu_ps(d + 3 * 8, _mm256_permute2f128_ps(s3, s7, 0x20));
    _mm256_storeu_ps(d + 4 * 8, _mm256_permute2f128_ps(s0, s4, 0x31));
    _mm256_storeu_ps(d + 5 * 8, _mm256_permute2f128_ps(s1, s5, 0x31));
    _mm256_storeu_ps(d + 6 * 8, _mm256_permute2f128_ps(s2, s6, 0x31));
    _mm256_storeu_ps(d + 7 * 8, _mm256_permute2f128_ps(s3, s7, 0x31));
  }
  for (int64_t kp = K16 / 2; kp < bf16_pairs(K); ++kp)
    for (int64_t m = 0; m < kGemmMR; ++m) {
      const int64_t k = 2 * kp;
      const bool row = m < mr;
      store_bf16_pair(dst + kp * kGemmMR + m, row ? to_bf16(alpha * a[m * lda + k]) : 0,
                      row && k + 1 < K ? to_bf16(alpha * a[m * lda + k + 1]) : 0);
    }
}

}  // namespace

GemmTileFn gemm_tile_bf16() { return gemm_bf16_supported() ? &tile_dispatch : nullptr; }
GemmPackABf16Fn gemm_pack_a_bf16_tile() { return gemm_bf16_supported() ? &pack_a_tile : nullptr; }

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
GemmTileFn gemm_tile_bf16() { return nullptr; }
GemmPackABf16Fn gemm_pack_a_bf16_tile() { return nullptr; }
}  // namespace nxrt::cpu
#endif
