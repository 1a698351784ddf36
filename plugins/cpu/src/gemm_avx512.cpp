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
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      bv[v] = v == NV - 1 ? _mm512_maskz_loadu_ps(bmask, br + v * 16) : _mm512_loadu_ps(br + v * 16);
    const int64_t o = SRC == Src::a_pixels ? aoff[k] : 0;
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const __m512 av = _mm512_set1_ps(SRC == Src::a_pixels ? ap[m][o] : ak[m]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) r[m][v] = _mm512_fmadd_ps(av, bv[v], r[m][v]);
    }
    ak += kGemmMR;
    if (SRC != Src::b_rows) bk += ldb;
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

// tile_dispatch for A given as pixel pointers (arows[m][aoff[k]]) and a packed B panel w wide.
void pixels_tile_dispatch(int64_t kc, const float* const* arows, const int32_t* aoff, const float* b, int64_t w,
                          float* c, int64_t ldc, int64_t mr, int64_t ncols, const GemmTileStore& st) {
  const int nv = int(w / 16);
  const __mmask16 last = avx512::last_vector_mask(ncols, nv);
  const TileT fn = nv == 3 ? pixels_row_table<3>[mr - 1] : nv == 2 ? pixels_row_table<2>[mr - 1] : pixels_row_table<1>[mr - 1];
  fn(kc, nullptr, b, w, __mmask16(0xFFFF), c, ldc, last, st, arows, aoff);
}

// The 6 x 64 pixel tile (24 accumulators, as 8 x 48): mr <= kGemmPixels64MR, B one [k][64] panel.
constexpr TileT pixels64_row_table[kGemmPixels64MR] = {
    &tile<1, 4, Src::a_pixels>, &tile<2, 4, Src::a_pixels>, &tile<3, 4, Src::a_pixels>,
    &tile<4, 4, Src::a_pixels>, &tile<5, 4, Src::a_pixels>, &tile<6, 4, Src::a_pixels>};

void pixels64_tile_dispatch(int64_t kc, const float* const* arows, const int32_t* aoff, const float* b, int64_t w,
                            float* c, int64_t ldc, int64_t mr, int64_t ncols, const GemmTileStore& st) {
  const __mmask16 last = avx512::last_vector_mask(ncols, 4);
  pixels64_row_table[mr - 1](kc, nullptr, b, w, __mmask16(0xFFFF), c, ldc, last, st, arows, aoff);
}

}  // namespace

GemmTileFn gemm_tile_avx512() { return &tile_dispatch; }
GemmRowsTileFn gemm_rows_tile_avx512() { return &rows_tile_dispatch; }
GemmPixelsTileFn gemm_pixels_tile_avx512() { return &pixels_tile_dispatch; }
GemmPixelsTileFn gemm_pixels64_tile_avx512() { return &pixels64_tile_dispatch; }

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
GemmTileFn gemm_tile_avx512() { return nullptr; }
GemmRowsTileFn gemm_rows_tile_avx512() { return nullptr; }
GemmPixelsTileFn gemm_pixels_tile_avx512() { return nullptr; }
GemmPixelsTileFn gemm_pixels64_tile_avx512() { return nullptr; }
}  // namespace nxrt::cpu
#endif
