// AVX2 + FMA GEMM micro-kernel for the same packed layout as the AVX-512 one
// (A tiles of 8 rows, B panels up to 48 columns). With 16 ymm registers an
// 8 x 48 tile does not fit, so the tile is walked as 4 x 24 blocks: 12
// accumulators, 3 B vectors and one broadcast of A per k step (12 FMAs for 7
// loads). Compiled with a target attribute (no -march flag), so it is only
// called after CPUID reports AVX2 and FMA.
#include "gemm.hpp"
#include "hard_swish.hpp"
#include "simd.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

namespace nxrt::cpu {
namespace {

#define NXRT_AVX2 __attribute__((target("avx2,fma")))

constexpr int64_t kPrefetchRows = 16;

// Where the operands come from (as the AVX-512 kernel): packed A and B (or B plain); B as
// row pointers rows[k] + ldb (a convolution's phase planes read in place); or A as pixel
// pointers, A(m, k) = rows[m][aoff[k]] (a convolution's output pixels read in place from a
// padded input) with B packed.
enum class Src { packed, b_rows, a_pixels };

// Rows [0, MR) x NV vectors of 8 columns; the last vector holds `tail` (1..8)
// valid columns. MASKED_B: B is a plain matrix whose rows may end at the last
// valid column, so its last vector is loaded under the mask.
template <int MR, int NV, bool MASKED_B, Src SRC = Src::packed>
NXRT_AVX2 void block(int64_t kc, const float* a, const float* b, int64_t ldb, int64_t tail, float* c, int64_t ldc,
                     const GemmTileStore& st, const float* const* rows = nullptr, const int32_t* aoff = nullptr) {
  constexpr bool ROWS = SRC == Src::b_rows;
  const float* ap[MR];  // the pixel pointers, in registers for the whole k loop
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) ap[m] = SRC == Src::a_pixels ? rows[m] : nullptr;
  __m256 r[MR][NV];
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 6
    for (int v = 0; v < NV; ++v) r[m][v] = _mm256_setzero_ps();
  const __m256i tmask = avx2_lane_mask(tail);

  const float* ak = a;
  const float* bk = b;
  // The next B slice (gemm_rect), one line every pf_every k steps, as the AVX-512 kernel. The
  // k loop runs in chunks of pf_every steps with the line fetched between them, so the inner
  // loop carries no prefetch counter (in L1, nxrt_cpu_gemm_peak's micro-kernel line: ~84% of
  // peak with a counter tested every step).
  const char* pf = st.prefetch;
  const char* pf_end = pf + 64 * std::min(st.prefetch_lines, kc);
  const int64_t pf_every = st.prefetch_lines > 0 ? std::max<int64_t>(1, kc / st.prefetch_lines) : kc;
  for (int64_t k0 = 0; k0 < kc; k0 += pf_every) {
    const int64_t k1 = std::min(kc, k0 + pf_every);
#pragma GCC unroll 4
    for (int64_t k = k0; k < k1; ++k) {
      const float* br = ROWS ? rows[k] + ldb : bk;
      if (SRC == Src::packed) {
        // Weights stream from memory on a panel's first pass: fetch 16 rows ahead (8..32 measured alike).
        _mm_prefetch(reinterpret_cast<const char*>(bk + kPrefetchRows * ldb), _MM_HINT_T0);
        if (NV > 1) _mm_prefetch(reinterpret_cast<const char*>(bk + kPrefetchRows * ldb + 16), _MM_HINT_T0);
      }
      __m256 bv[NV];
#pragma GCC unroll 6
      for (int v = 0; v < NV; ++v)
        bv[v] = MASKED_B && v == NV - 1 ? _mm256_maskload_ps(br + v * 8, tmask) : _mm256_loadu_ps(br + v * 8);
      const int64_t o = SRC == Src::a_pixels ? aoff[k] : 0;
#pragma GCC unroll 4
      for (int m = 0; m < MR; ++m) {
        const __m256 av = _mm256_broadcast_ss(SRC == Src::a_pixels ? ap[m] + o : ak + m);
#pragma GCC unroll 6
        for (int v = 0; v < NV; ++v) r[m][v] = _mm256_fmadd_ps(av, bv[v], r[m][v]);
      }
      ak += kGemmMR;
      if (!ROWS) bk += ldb;
    }
    if (pf < pf_end) {
      _mm_prefetch(pf, _MM_HINT_T1);
      pf += 64;
    }
  }

  const __m256 lo = _mm256_set1_ps(st.lo), hi = _mm256_set1_ps(st.hi);
  if (tail == 8 && !st.col_bias && !st.residual && !st.hardswish) {
    // The common store (whole vectors; the sum so far, a row bias and a clamp at most): plain
    // loads and stores and no per-vector tests. In L1 (nxrt_cpu_gemm_peak's micro-kernel
    // line) the general store below cost ~5% of a kc = 128 block.
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) {
      float* cr = c + m * ldc;
      if (st.row_bias) {
        const __m256 rb = _mm256_set1_ps(st.row_bias[m]);
#pragma GCC unroll 6
        for (int v = 0; v < NV; ++v) r[m][v] = _mm256_add_ps(r[m][v], rb);
      }
      if (st.accumulate)
#pragma GCC unroll 6
        for (int v = 0; v < NV; ++v) r[m][v] = _mm256_add_ps(r[m][v], _mm256_loadu_ps(cr + v * 8));
      if (st.clamp)
#pragma GCC unroll 6
        for (int v = 0; v < NV; ++v) r[m][v] = _mm256_min_ps(hi, _mm256_max_ps(lo, r[m][v]));
#pragma GCC unroll 6
      for (int v = 0; v < NV; ++v) _mm256_storeu_ps(cr + v * 8, r[m][v]);
    }
    return;
  }
  const __m256i full = _mm256_set1_epi32(-1);
  __m256 cbv[NV];
#pragma GCC unroll 6
  for (int v = 0; v < NV; ++v)
    cbv[v] = st.col_bias ? _mm256_maskload_ps(st.col_bias + v * 8, v == NV - 1 ? tmask : full) : _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) {
    float* cr = c + m * ldc;
    const float* rr = st.residual ? st.residual + m * st.ldr : nullptr;
#pragma GCC unroll 6
    for (int v = 0; v < NV; ++v) {
      const bool partial = v == NV - 1 && tail < 8;
      const __m256i mk = v == NV - 1 ? tmask : full;
      __m256 x = st.row_bias ? _mm256_add_ps(r[m][v], _mm256_set1_ps(st.row_bias[m])) : r[m][v];
      if (st.col_bias) x = _mm256_add_ps(x, cbv[v]);
      if (st.accumulate) x = _mm256_add_ps(x, _mm256_maskload_ps(cr + v * 8, mk));
      if (rr) x = _mm256_add_ps(x, _mm256_maskload_ps(rr + v * 8, mk));
      // max/min return their second operand when either is NaN: NaN propagates.
      if (st.clamp) x = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
      if (st.hardswish) x = hard_swish_avx2(x);
      if (partial)
        avx2_store_first(cr + v * 8, x, tail);  // no vmaskmovps store: microcoded on AMD
      else
        _mm256_storeu_ps(cr + v * 8, x);
    }
  }
}

using BlockFn = void (*)(int64_t, const float*, const float*, int64_t, int64_t, float*, int64_t,
                         const GemmTileStore&, const float* const*, const int32_t*);

template <int NV, bool MB>
constexpr BlockFn row_table[4] = {&block<1, NV, MB>, &block<2, NV, MB>, &block<3, NV, MB>, &block<4, NV, MB>};

template <bool MB>
BlockFn pick(int64_t rows, int64_t nv) {
  return nv == 3 ? row_table<3, MB>[rows - 1] : nv == 2 ? row_table<2, MB>[rows - 1] : row_table<1, MB>[rows - 1];
}

// One row (a matrix-vector product: a batch-1 classifier's Gemm): the whole 48-column panel in
// one pass, 6 accumulators, so B (from memory, read once) is one sequential stream instead of
// two strided passes of 24 columns.
template <bool MB>
constexpr BlockFn one_row_table[6] = {&block<1, 1, MB>, &block<1, 2, MB>, &block<1, 3, MB>,
                                      &block<1, 4, MB>, &block<1, 5, MB>, &block<1, 6, MB>};

// The 8 x 48 tile walked as 4 x 24 blocks, row halves outside and 24-column blocks inside (the
// kc x 48 slice of B, kc = 128: 24 KB, is read from L1 by the second row half):
// block(r0, c0, rows, nv, tail, s) with the store's biases and residual moved to the block and
// the tile's share of the next slice's prefetch kept by the first block only (prefetch: false,
// by none).
template <typename Block>
void for_each_block(int64_t mr, int64_t ncols, const GemmTileStore& st, bool prefetch, Block&& block) {
  for (int64_t r0 = 0; r0 < mr; r0 += 4) {
    const int64_t rows = std::min<int64_t>(4, mr - r0);
    for (int64_t c0 = 0; c0 < ncols; c0 += 24) {
      const int64_t cols = std::min<int64_t>(24, ncols - c0), nv = (cols + 7) / 8, tail = cols - (nv - 1) * 8;
      GemmTileStore s = st;
      if (!prefetch || r0 + c0 != 0) s.prefetch_lines = 0;
      if (s.row_bias) s.row_bias += r0;
      if (s.col_bias) s.col_bias += c0;
      if (s.residual) s.residual += r0 * s.ldr + c0;
      block(r0, c0, rows, nv, tail, s);
    }
  }
}

void tile_dispatch(int64_t kc, const float* a, const float* b, int64_t /*w*/, int64_t ldb, bool b_unpacked, float* c,
                   int64_t ldc, int64_t mr, int64_t ncols, const GemmTileStore& st) {
  if (mr == 1) {
    const int64_t nv = (ncols + 7) / 8, tail = ncols - (nv - 1) * 8;
    BlockFn fn = b_unpacked && tail < 8 ? one_row_table<true>[nv - 1] : one_row_table<false>[nv - 1];
    fn(kc, a, b, ldb, tail, c, ldc, st, nullptr, nullptr);
    return;
  }
  for_each_block(mr, ncols, st, true,
                 [&](int64_t r0, int64_t c0, int64_t rows, int64_t nv, int64_t tail, const GemmTileStore& s) {
                   const BlockFn fn = b_unpacked && tail < 8 ? pick<true>(rows, nv) : pick<false>(rows, nv);
                   fn(kc, a + r0, b + c0, ldb, tail, c + r0 * ldc + c0, ldc, s, nullptr, nullptr);
                 });
}

template <int NV, bool MB>
constexpr BlockFn rows_row_table[4] = {&block<1, NV, MB, Src::b_rows>, &block<2, NV, MB, Src::b_rows>,
                                       &block<3, NV, MB, Src::b_rows>, &block<4, NV, MB, Src::b_rows>};

// tile_dispatch for B given as row pointers (rows[k] + col: column 0 of this tile): the same
// 4 x 24 blocks; the last vector of a row is loaded under a mask (a row may end there).
void rows_tile_dispatch(int64_t kc, const float* a, const float* const* rows, int64_t col, float* c, int64_t ldc,
                        int64_t mr, int64_t ncols, const GemmTileStore& st) {
  for_each_block(mr, ncols, st, false,
                 [&](int64_t r0, int64_t c0, int64_t nrows, int64_t nv, int64_t tail, const GemmTileStore& s) {
                   const bool mb = tail < 8;
                   const BlockFn fn = nv == 3   ? (mb ? rows_row_table<3, true> : rows_row_table<3, false>)[nrows - 1]
                                      : nv == 2 ? (mb ? rows_row_table<2, true> : rows_row_table<2, false>)[nrows - 1]
                                                : (mb ? rows_row_table<1, true> : rows_row_table<1, false>)[nrows - 1];
                   fn(kc, a + r0, nullptr, col + c0, tail, c + r0 * ldc + c0, ldc, s, rows, nullptr);
                 });
}

template <int NV>
constexpr BlockFn pixels_row_table[4] = {&block<1, NV, false, Src::a_pixels>, &block<2, NV, false, Src::a_pixels>,
                                         &block<3, NV, false, Src::a_pixels>, &block<4, NV, false, Src::a_pixels>};

// All M rows of a pixel panel (A as pixel pointers, arows[m][aoff[k]]; B packed, w wide):
// 8-row tiles of the same 4 x 24 blocks.
void pixels_panel_dispatch(int64_t kc, const float* const* arows, const int32_t* aoff, const float* b, int64_t w,
                           float* c, int64_t ldc, int64_t M, int64_t ncols, const GemmTileStore& st) {
  const int64_t tiles = (M + kGemmMR - 1) / kGemmMR;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t m0 = t * kGemmMR;
    for_each_block(std::min(kGemmMR, M - m0), ncols, gemm_row_tile_store(st, t, tiles, m0), true,
                   [&](int64_t r0, int64_t c0, int64_t nrows, int64_t nv, int64_t tail, const GemmTileStore& s) {
                     const BlockFn fn = nv == 3   ? pixels_row_table<3>[nrows - 1]
                                        : nv == 2 ? pixels_row_table<2>[nrows - 1]
                                                  : pixels_row_table<1>[nrows - 1];
                     fn(kc, nullptr, b + c0, w, tail, c + (m0 + r0) * ldc + c0, ldc, s, arows + m0 + r0, aoff);
                   });
  }
}


// One tile of pack_a (row-major A): 8 x 8 blocks transposed in registers
// instead of 64 scalar stores 32 bytes apart; the same products alpha * a. With ldd = the
// panel width it packs 8 columns of a transposed B (pack_b).
NXRT_AVX2 void pack_a_tile(const float* a, int64_t lda, int64_t mr, int64_t K, float alpha, float* dst, int64_t ldd) {
  const __m256 al = _mm256_set1_ps(alpha);
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 r[8];
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) r[m] = m < mr ? _mm256_mul_ps(al, _mm256_loadu_ps(a + m * lda + k)) : _mm256_setzero_ps();
    avx2_transpose8x8(r);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(dst + (k + j) * ldd, r[j]);
  }
  for (; k < K; ++k)
    for (int64_t m = 0; m < 8; ++m) dst[k * ldd + m] = m < mr ? alpha * a[m * lda + k] : 0.f;
}

}  // namespace

GemmTileFn gemm_tile_avx2() { return &tile_dispatch; }
GemmRowsTileFn gemm_rows_tile_avx2() { return &rows_tile_dispatch; }
GemmPixelsPanelFn gemm_pixels_panel_avx2() { return &pixels_panel_dispatch; }
GemmPackAFn gemm_pack_a_avx2() { return &pack_a_tile; }

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
GemmTileFn gemm_tile_avx2() { return nullptr; }
GemmRowsTileFn gemm_rows_tile_avx2() { return nullptr; }
GemmPixelsPanelFn gemm_pixels_panel_avx2() { return nullptr; }
GemmPackAFn gemm_pack_a_avx2() { return nullptr; }
}  // namespace nxrt::cpu
#endif
