// The last column panel of a GEMM when it holds at most 4 columns (N % 48 in 1..4: 196 =
// 14 x 14 pixels, 49 = 7 x 7, Winograd's 196 tiles): the 8 x 48 micro-kernels compute a whole
// 16-column vector there, 8 broadcasts and 8 FMAs a k step per row tile for 1..4 useful
// columns, which cost ~10% of a 112 x 196 x 480 product (MobileNetV3's 14x14 1x1 convs).
// Here the 8 rows of a row tile are the lanes (packed A's [k][8] is one 8-float load) and
// each column's B value is broadcast: per k step and row tile one load and cols FMAs, up to 4
// row tiles at once so that 4..16 independent chains hide the FMA latency.
//
// Each C element is one FMA chain over k in order and the store applies the epilogue in the
// micro-kernels' order (row bias, column bias, old C, residual, clamp, HardSwish), so a
// column comes out bit for bit the same whichever kernel (or thread split) computes it.
#include "gemm.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

#include "hard_swish.hpp"

namespace nxrt::cpu {
namespace {

#define NXRT_NARROW __attribute__((target("avx2,fma")))

// epilogue(x) for C element (row m, column j), as store_tile does it.
NXRT_NARROW inline float narrow_epilogue(float x, int64_t m, int64_t j, const float* cr, const float* rr,
                                         const GemmTileStore& st) {
  if (st.row_bias) x += st.row_bias[m];
  if (st.col_bias) x += st.col_bias[j];
  if (st.accumulate) x += cr[j];
  if (rr) x += rr[j];
  if (st.clamp) {  // max(lo, x), then min(hi, .): NaN stays NaN, as with the vector max / min
    x = st.lo > x ? st.lo : x;
    x = st.hi < x ? st.hi : x;
  }
  if (st.hardswish) x = hard_swish_fused(x);
  return x;
}

// RT row tiles (a: the first, a_stride floats apart) x NC columns of B (row k at b + k * ldb).
// rows: rows of C in these tiles (the last may be partial).
// One body per instance (not up to 8 inlined into narrow_cols' switch).
template <int RT, int NC>
NXRT_NARROW __attribute__((noinline)) void narrow_block(int64_t kc, const float* a, int64_t a_stride, const float* b,
                                                        int64_t ldb, float* c, int64_t ldc, int64_t rows,
                                                        const GemmTileStore& st) {
  __m256 acc[RT][NC];
#pragma GCC unroll 8
  for (int t = 0; t < RT; ++t)
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j) acc[t][j] = _mm256_setzero_ps();
  const float* ap[RT];
#pragma GCC unroll 8
  for (int t = 0; t < RT; ++t) ap[t] = a + t * a_stride;
  for (int64_t k = 0; k < kc; ++k) {
    __m256 bv[NC];
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j) bv[j] = _mm256_broadcast_ss(b + k * ldb + j);
#pragma GCC unroll 8
    for (int t = 0; t < RT; ++t) {
      const __m256 av = _mm256_loadu_ps(ap[t] + k * kGemmMR);
#pragma GCC unroll 4
      for (int j = 0; j < NC; ++j) acc[t][j] = _mm256_fmadd_ps(av, bv[j], acc[t][j]);
    }
  }
  // The accumulators to memory in one unrolled pass. Read with a run-time tile index below,
  // GCC kept them in memory and stored every one of them at each k step (8 stack stores a step
  // for 8 tiles of 1 column): a 128 x 97 x 128 product's 1-column panel took 0.8-1.1 us on
  // top of its 96 columns' 14, now 0.6-0.8.
  alignas(32) float v[RT][NC][kGemmMR];
#pragma GCC unroll 8
  for (int t = 0; t < RT; ++t)
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j) _mm256_store_ps(v[t][j], acc[t][j]);
  const bool plain = !st.row_bias && !st.col_bias && !st.accumulate && !st.residual && !st.clamp && !st.hardswish;
  for (int t = 0; t < RT; ++t) {
    const int64_t m0 = t * kGemmMR, mr = std::min<int64_t>(kGemmMR, rows - m0);
    for (int64_t m = 0; m < mr; ++m) {
      float* cr = c + (m0 + m) * ldc;
      if (plain) {  // no epilogue (Winograd's products)
        for (int j = 0; j < NC; ++j) cr[j] = v[t][j][m];
        continue;
      }
      const float* rr = st.residual ? st.residual + (m0 + m) * st.ldr : nullptr;
      for (int j = 0; j < NC; ++j) cr[j] = narrow_epilogue(v[t][j][m], m0 + m, j, cr, rr, st);
    }
  }
}

// Row tiles in blocks of RTM (8 for 1 column, 6 for 2, else 4): 8..16 independent FMA chains
// a k step (4 tiles of 1 column gave 4, fewer than the FMA latency hides).
template <int NC>
NXRT_NARROW void narrow_cols(int64_t kc, const float* a, int64_t a_stride, int64_t tiles, const float* b, int64_t ldb,
                             float* c, int64_t ldc, int64_t rows, const GemmTileStore& st) {
  constexpr int64_t RTM = NC == 1 ? 8 : NC == 2 ? 6 : 4;
  for (int64_t t0 = 0; t0 < tiles; t0 += RTM) {
    GemmTileStore s = st;
    const int64_t m0 = t0 * kGemmMR;
    if (s.row_bias) s.row_bias += m0;
    if (s.residual) s.residual += m0 * s.ldr;
    const float* at = a + t0 * a_stride;
    float* ct = c + m0 * ldc;
    switch (std::min<int64_t>(RTM, tiles - t0)) {
      case 1: narrow_block<1, NC>(kc, at, a_stride, b, ldb, ct, ldc, rows - m0, s); break;
      case 2: narrow_block<2, NC>(kc, at, a_stride, b, ldb, ct, ldc, rows - m0, s); break;
      case 3: narrow_block<3, NC>(kc, at, a_stride, b, ldb, ct, ldc, rows - m0, s); break;
      case 4: narrow_block<4, NC>(kc, at, a_stride, b, ldb, ct, ldc, rows - m0, s); break;
      case 5: narrow_block<(RTM >= 5 ? 5 : 1), NC>(kc, at, a_stride, b, ldb, ct, ldc, rows - m0, s); break;
      case 6: narrow_block<(RTM >= 6 ? 6 : 1), NC>(kc, at, a_stride, b, ldb, ct, ldc, rows - m0, s); break;
      case 7: narrow_block<(RTM >= 7 ? 7 : 1), NC>(kc, at, a_stride, b, ldb, ct, ldc, rows - m0, s); break;
      default: narrow_block<(RTM >= 8 ? 8 : 1), NC>(kc, at, a_stride, b, ldb, ct, ldc, rows - m0, s); break;
    }
  }
}

NXRT_NARROW void narrow_dispatch(int64_t kc, const float* a, int64_t a_stride, int64_t tiles, const float* b,
                                 int64_t ldb, float* c, int64_t ldc, int64_t rows, int64_t cols,
                                 const GemmTileStore& st) {
  switch (cols) {
    case 1: narrow_cols<1>(kc, a, a_stride, tiles, b, ldb, c, ldc, rows, st); break;
    case 2: narrow_cols<2>(kc, a, a_stride, tiles, b, ldb, c, ldc, rows, st); break;
    case 3: narrow_cols<3>(kc, a, a_stride, tiles, b, ldb, c, ldc, rows, st); break;
    default: narrow_cols<4>(kc, a, a_stride, tiles, b, ldb, c, ldc, rows, st); break;
  }
}

}  // namespace

GemmNarrowFn gemm_narrow_avx2() { return &narrow_dispatch; }

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
GemmNarrowFn gemm_narrow_avx2() { return nullptr; }
}  // namespace nxrt::cpu
#endif
