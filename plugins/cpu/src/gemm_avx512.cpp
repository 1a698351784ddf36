// AVX-512 GEMM micro-kernel: up to 8 rows x up to 48 columns (3 zmm) held in
// 24 accumulators; A broadcast from the packed [k][8] tile, B loaded from the
// packed [k][w] panel. Compiled with a target attribute (no -march flag), so
// it is only called after CPUID reports AVX-512 F.
#include "gemm.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

namespace nxrt::cpu {
namespace {

#define NXRT_AVX512 __attribute__((target("avx512f,fma,avx2")))

template <int MR, int NV>
NXRT_AVX512 void tile(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, __mmask16 last,
                      const float* row_bias, const float* col_bias, bool accumulate) {
  __m512 r[MR][NV];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) r[m][v] = _mm512_setzero_ps();

  const float* ak = a;
  const float* bk = b;
  int64_t k = 0;
#pragma GCC unroll 2
  for (; k < kc; ++k) {
    __m512 bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_load_ps(bk + v * 16);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const __m512 av = _mm512_set1_ps(ak[m]);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) r[m][v] = _mm512_fmadd_ps(av, bv[v], r[m][v]);
    }
    ak += kGemmMR;
    bk += NV * 16;
  }

  __m512 cbv[NV];
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v) cbv[v] = _mm512_setzero_ps();
  if (col_bias) {
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v)
      cbv[v] = _mm512_maskz_loadu_ps(v == NV - 1 ? last : __mmask16(0xFFFF), col_bias + v * 16);
  }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
    float* cr = c + m * ldc;
    const __m512 rb = _mm512_set1_ps(row_bias ? row_bias[m] : 0.f);
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      const __mmask16 mk = v == NV - 1 ? last : __mmask16(0xFFFF);
      __m512 x = _mm512_add_ps(r[m][v], rb);
      if (col_bias) x = _mm512_add_ps(x, cbv[v]);
      if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mk, cr + v * 16));
      _mm512_mask_storeu_ps(cr + v * 16, mk, x);
    }
  }
}

using TileT = void (*)(int64_t, const float*, const float*, float*, int64_t, __mmask16, const float*, const float*,
                       bool);

template <int NV>
constexpr TileT row_table[8] = {&tile<1, NV>, &tile<2, NV>, &tile<3, NV>, &tile<4, NV>,
                                &tile<5, NV>, &tile<6, NV>, &tile<7, NV>, &tile<8, NV>};

void tile_dispatch(int64_t kc, const float* a, const float* b, int64_t w, float* c, int64_t ldc, int64_t mr,
                   int64_t ncols, const float* row_bias, const float* col_bias, bool accumulate) {
  const int nv = int(w / 16);
  const int64_t tail = ncols - int64_t(nv - 1) * 16;  // 1..16 valid lanes in the last vector
  const __mmask16 last = __mmask16(tail >= 16 ? 0xFFFF : (1u << tail) - 1u);
  TileT fn = nv == 3 ? row_table<3>[mr - 1] : nv == 2 ? row_table<2>[mr - 1] : row_table<1>[mr - 1];
  fn(kc, a, b, c, ldc, last, row_bias, col_bias, accumulate);
}

}  // namespace

GemmTileFn gemm_tile_avx512() { return &tile_dispatch; }

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
GemmTileFn gemm_tile_avx512() { return nullptr; }
}  // namespace nxrt::cpu
#endif
