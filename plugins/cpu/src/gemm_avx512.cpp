// AVX-512 GEMM micro-kernel: up to 8 rows x up to 48 columns (3 zmm), or 6 x 64 (4 zmm), held
// in 24 accumulators; A broadcast from the packed [k][8] tile (or read in place through pixel
// pointers), B loaded from the packed [k][w] panel (or read in place through row pointers).
// Compiled with a target attribute (no -march flag), so it is only called after CPUID
// reports AVX-512 F.
#include "gemm.hpp"
#include "gemm_tile_avx512.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

namespace nxrt::cpu {
namespace {

#define NXRT_AVX512 __attribute__((target("avx512f,fma,avx2")))

// Where the operands come from: packed A and B (or B plain, rows ldb apart); B as row
// pointers rows[k] + ldb (a convolution's phase planes read in place), its last vector loaded
// under bmask; or A as pixel pointers, A(m, k) = arows[m][aoff[k]] (a convolution's output
// pixels read in place from a padded input) with B packed.
enum class Src { packed, b_rows, a_pixels };

template <int MR, int NV, Src SRC = Src::packed>
NXRT_AVX512 void tile(int64_t kc, const float* a, const float* b, int64_t ldb, __mmask16 bmask, float* c, int64_t ldc,
                      __mmask16 last, const GemmTileStore& st, const float* const* rows = nullptr,
                      const int32_t* aoff = nullptr) {
  __m512 r[MR][NV];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) r[m][v] = _mm512_setzero_ps();
  // The pixel pointers in registers for the whole k loop.
  const float* ap[MR];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) ap[m] = SRC == Src::a_pixels ? rows[m] : nullptr;

  const float* ak = a;
  const float* bk = b;
  avx512::SlicePrefetch pf(st, kc);
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    pf.step();
    const float* br = SRC == Src::b_rows ? rows[k] + ldb : bk;
    __m512 bv[NV];
    // Pixel tiles read B packed (no mask), one NV * 16-float row a step: fewer registers
    // for the 8 pixel pointers.
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      bv[v] = v == NV - 1 && SRC != Src::a_pixels ? _mm512_maskz_loadu_ps(bmask, br + v * 16)
                                                  : _mm512_loadu_ps(br + v * 16);
    const int64_t o = SRC == Src::a_pixels ? aoff[k] : 0;
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const __m512 av = _mm512_set1_ps(SRC == Src::a_pixels ? ap[m][o] : ak[m]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) r[m][v] = _mm512_fmadd_ps(av, bv[v], r[m][v]);
    }
    ak += kGemmMR;
    if (SRC == Src::a_pixels) bk += NV * 16;
    else if (SRC != Src::b_rows) bk += ldb;
  }

  avx512::store_tile<MR, NV>(r, c, ldc, last, st);
}

using TileT = void (*)(int64_t, const float*, const float*, int64_t, __mmask16, float*, int64_t, __mmask16,
                       const GemmTileStore&, const float* const*, const int32_t*);

template <int NV>
constexpr TileT row_table[8] = {&tile<1, NV>, &tile<2, NV>, &tile<3, NV>, &tile<4, NV>,
                                &tile<5, NV>, &tile<6, NV>, &tile<7, NV>, &tile<8, NV>};

void tile_dispatch(int64_t kc, const float* a, const float* b, int64_t w, int64_t ldb, bool b_unpacked, float* c,
                   int64_t ldc, int64_t mr, int64_t ncols, const GemmTileStore& st) {
  const int nv = int(w / 16);
  const __mmask16 last = avx512::last_vector_mask(ncols, nv);
  TileT fn = nv == 3 ? row_table<3>[mr - 1] : nv == 2 ? row_table<2>[mr - 1] : row_table<1>[mr - 1];
  fn(kc, a, b, ldb, b_unpacked ? last : __mmask16(0xFFFF), c, ldc, last, st, nullptr, nullptr);
}

template <int NV>
constexpr TileT rows_row_table[8] = {&tile<1, NV, Src::b_rows>, &tile<2, NV, Src::b_rows>, &tile<3, NV, Src::b_rows>,
                                     &tile<4, NV, Src::b_rows>, &tile<5, NV, Src::b_rows>, &tile<6, NV, Src::b_rows>,
                                     &tile<7, NV, Src::b_rows>, &tile<8, NV, Src::b_rows>};

// tile_dispatch for B given as row pointers (rows[k] + col: column 0 of this tile): the whole
// 8 x 48 tile in one pass, the last vector of a row loaded under the mask.
void rows_tile_dispatch(int64_t kc, const float* a, const float* const* rows, int64_t col, float* c, int64_t ldc,
                        int64_t mr, int64_t ncols, const GemmTileStore& st) {
  const int nv = int((ncols + 15) / 16);
  const __mmask16 last = avx512::last_vector_mask(ncols, nv);
  const TileT fn = nv == 3 ? rows_row_table<3>[mr - 1] : nv == 2 ? rows_row_table<2>[mr - 1] : rows_row_table<1>[mr - 1];
  fn(kc, a, nullptr, col, last, c, ldc, last, st, rows, nullptr);
}

template <int NV>
constexpr TileT pixels_row_table[8] = {&tile<1, NV, Src::a_pixels>, &tile<2, NV, Src::a_pixels>,
                                       &tile<3, NV, Src::a_pixels>, &tile<4, NV, Src::a_pixels>,
                                       &tile<5, NV, Src::a_pixels>, &tile<6, NV, Src::a_pixels>,
                                       &tile<7, NV, Src::a_pixels>, &tile<8, NV, Src::a_pixels>};

// The 6 x 64 pixel tile (24 accumulators, as 8 x 48): B one [k][64] panel.
constexpr TileT pixels64_row_table[kGemmPixels64MR] = {
    &tile<1, 4, Src::a_pixels>, &tile<2, 4, Src::a_pixels>, &tile<3, 4, Src::a_pixels>,
    &tile<4, 4, Src::a_pixels>, &tile<5, 4, Src::a_pixels>, &tile<6, 4, Src::a_pixels>};

// All M rows of a pixel panel (A as pixel pointers, arows[m][aoff[k]]; B packed, NV * 16
// wide): whole MR-row tiles called directly, the last partial one from `partial`. The
// tiles step through B at their compile-time width and load it whole, so TileT's ldb and B
// mask are passed as 0.
template <int MR, int NV>
void pixels_panel(int64_t kc, const float* const* arows, const int32_t* aoff, const float* b, float* c, int64_t ldc,
                  int64_t M, int64_t ncols, const GemmTileStore& st, const TileT* partial) {
  const __mmask16 last = avx512::last_vector_mask(ncols, NV);
  const int64_t tiles = (M + MR - 1) / MR;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t m0 = t * MR;
    const GemmTileStore s = gemm_row_tile_store(st, t, tiles, m0);
    if (M - m0 >= MR)
      tile<MR, NV, Src::a_pixels>(kc, nullptr, b, 0, __mmask16(0), c + m0 * ldc, ldc, last, s, arows + m0, aoff);
    else
      partial[M - m0 - 1](kc, nullptr, b, 0, __mmask16(0), c + m0 * ldc, ldc, last, s, arows + m0, aoff);
  }
}

void pixels_panel_dispatch(int64_t kc, const float* const* arows, const int32_t* aoff, const float* b, int64_t w,
                           float* c, int64_t ldc, int64_t M, int64_t ncols, const GemmTileStore& st) {
  const int nv = int(w / 16);
  if (nv == 3) pixels_panel<kGemmMR, 3>(kc, arows, aoff, b, c, ldc, M, ncols, st, pixels_row_table<3>);
  else if (nv == 2) pixels_panel<kGemmMR, 2>(kc, arows, aoff, b, c, ldc, M, ncols, st, pixels_row_table<2>);
  else pixels_panel<kGemmMR, 1>(kc, arows, aoff, b, c, ldc, M, ncols, st, pixels_row_table<1>);
}

void pixels64_panel_dispatch(int64_t kc, const float* const* arows, const int32_t* aoff, const float* b, int64_t w,
                             float* c, int64_t ldc, int64_t M, int64_t ncols, const GemmTileStore& st) {
  (void)w;  // always 64
  pixels_panel<kGemmPixels64MR, 4>(kc, arows, aoff, b, c, ldc, M, ncols, st, pixels64_row_table);
}

}  // namespace

GemmTileFn gemm_tile_avx512() { return &tile_dispatch; }
GemmRowsTileFn gemm_rows_tile_avx512() { return &rows_tile_dispatch; }
GemmPixelsPanelFn gemm_pixels_panel_avx512() { return &pixels_panel_dispatch; }
GemmPixelsPanelFn gemm_pixels64_panel_avx512() { return &pixels64_panel_dispatch; }

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
GemmTileFn gemm_tile_avx512() { return nullptr; }
GemmRowsTileFn gemm_rows_tile_avx512() { return nullptr; }
GemmPixelsPanelFn gemm_pixels_panel_avx512() { return nullptr; }
GemmPixelsPanelFn gemm_pixels64_panel_avx512() { return nullptr; }
}  // namespace nxrt::cpu
#endif
