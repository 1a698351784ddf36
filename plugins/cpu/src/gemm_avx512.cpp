// AVX-512 GEMM micro-kernel: up to 8 rows x up to 48 columns (3 zmm) held in
// 24 accumulators; A broadcast from the packed [k][8] tile, B loaded from the
// packed [k][w] panel. Compiled with a target attribute (no -march flag), so
// it is only called after CPUID reports AVX-512 F.
#include "gemm.hpp"
#include "gemm_tile_avx512.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

namespace nxrt::cpu {
namespace {

#define NXRT_AVX512 __attribute__((target("avx512f,fma,avx2")))

// ROWS: B's row k is rows[k] + ldb (row pointers read in place: a convolution's phase
// planes), its last vector loaded under bmask (a row may end at the last valid column).
template <int MR, int NV, bool ROWS = false>
NXRT_AVX512 void tile(int64_t kc, const float* a, const float* b, int64_t ldb, __mmask16 bmask, float* c, int64_t ldc,
                      __mmask16 last, const GemmTileStore& st, const float* const* rows = nullptr) {
  __m512 r[MR][NV];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) r[m][v] = _mm512_setzero_ps();

  const float* ak = a;
  const float* bk = b;
  avx512::SlicePrefetch pf(st, kc);
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    pf.step();
    const float* br = ROWS ? rows[k] + ldb : bk;
    __m512 bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v)
      bv[v] = v == NV - 1 ? _mm512_maskz_loadu_ps(bmask, br + v * 16) : _mm512_loadu_ps(br + v * 16);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const __m512 av = _mm512_set1_ps(ak[m]);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) r[m][v] = _mm512_fmadd_ps(av, bv[v], r[m][v]);
    }
    ak += kGemmMR;
    if (!ROWS) bk += ldb;
  }

  avx512::store_tile<MR, NV>(r, c, ldc, last, st);
}

using TileT = void (*)(int64_t, const float*, const float*, int64_t, __mmask16, float*, int64_t, __mmask16,
                       const GemmTileStore&, const float* const*);

template <int NV>
constexpr TileT row_table[8] = {&tile<1, NV>, &tile<2, NV>, &tile<3, NV>, &tile<4, NV>,
                                &tile<5, NV>, &tile<6, NV>, &tile<7, NV>, &tile<8, NV>};

void tile_dispatch(int64_t kc, const float* a, const float* b, int64_t w, int64_t ldb, bool b_unpacked, float* c,
                   int64_t ldc, int64_t mr, int64_t ncols, const GemmTileStore& st) {
  const int nv = int(w / 16);
  const __mmask16 last = avx512::last_vector_mask(ncols, nv);
  TileT fn = nv == 3 ? row_table<3>[mr - 1] : nv == 2 ? row_table<2>[mr - 1] : row_table<1>[mr - 1];
  fn(kc, a, b, ldb, b_unpacked ? last : __mmask16(0xFFFF), c, ldc, last, st, nullptr);
}

template <int NV>
constexpr TileT rows_row_table[8] = {&tile<1, NV, true>, &tile<2, NV, true>, &tile<3, NV, true>,
                                     &tile<4, NV, true>, &tile<5, NV, true>, &tile<6, NV, true>,
                                     &tile<7, NV, true>, &tile<8, NV, true>};

// tile_dispatch for B given as row pointers (rows[k] + col: column 0 of this tile): the whole
// 8 x 48 tile in one pass, the last vector of a row loaded under the mask.
void rows_tile_dispatch(int64_t kc, const float* a, const float* const* rows, int64_t col, float* c, int64_t ldc,
                        int64_t mr, int64_t ncols, const GemmTileStore& st) {
  const int nv = int((ncols + 15) / 16);
  const __mmask16 last = avx512::last_vector_mask(ncols, nv);
  const TileT fn = nv == 3 ? rows_row_table<3>[mr - 1] : nv == 2 ? rows_row_table<2>[mr - 1] : rows_row_table<1>[mr - 1];
  fn(kc, a, nullptr, col, last, c, ldc, last, st, rows);
}

}  // namespace

GemmTileFn gemm_tile_avx512() { return &tile_dispatch; }
GemmRowsTileFn gemm_rows_tile_avx512() { return &rows_tile_dispatch; }

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
GemmTileFn gemm_tile_avx512() { return nullptr; }
GemmRowsTileFn gemm_rows_tile_avx512() { return nullptr; }
}  // namespace nxrt::cpu
#endif
