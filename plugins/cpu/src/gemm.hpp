// Single-precision GEMM on packed operands.
//
// Layouts (both 64-byte aligned):
//   packed A: ceil(M/8) tiles of 8 rows; tile t holds [K][8] (row m of the
//             tile at column m), rows past M are zero. alpha is folded in.
//   packed B: ceil(N/48) panels; panel p starts at p*48*K and holds [K][w]
//             with w = 48, or for the last panel N-p*48 rounded up to 16
//             (padding columns are zero).
// Constant operands (weights) are packed once at kernel creation; runtime
// operands are packed per call into per-thread scratch.
// The micro-kernel computes an 8x48 tile in 24 AVX-512 accumulators, or as
// 4x24 blocks in 12 AVX2 accumulators, or in a generic C++ fallback, chosen
// at run time from CPUID bits.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "thread_pool.hpp"

namespace nxrt::cpu {

constexpr int64_t kGemmMR = 8;
constexpr int64_t kGemmNR = 48;
constexpr int64_t kGemmKC = 256;
// AVX2's 4x24 blocks re-read the B slice once per row half and row tile: at 128 it
// stays in a 32 KB L1 (nxrt_cpu_gemm_peak: 3-5% more than at 256 on Zen 3).
constexpr int64_t kGemmKcAvx2 = 128;
constexpr int64_t kGemmNcPanels = 8;  // panels per L2 block of C

inline int64_t gemm_tiles(int64_t M) { return (M + kGemmMR - 1) / kGemmMR; }
inline int64_t gemm_panels(int64_t N) { return (N + kGemmNR - 1) / kGemmNR; }
inline int64_t gemm_panel_width(int64_t N, int64_t p) {
  int64_t cols = N - p * kGemmNR;
  if (cols >= kGemmNR) return kGemmNR;
  return (cols + 15) / 16 * 16;
}
inline size_t packed_a_floats(int64_t M, int64_t K) { return size_t(gemm_tiles(M) * kGemmMR * K); }
inline size_t packed_b_floats(int64_t K, int64_t N) { return size_t(gemm_panels(N) * kGemmNR * K); }

// A(m, k) = trans ? a[k*lda + m] : a[m*lda + k], multiplied by alpha.
void pack_a(const float* a, int64_t lda, bool trans, int64_t M, int64_t K, float alpha, float* dst);
// pack_a split over the pool by row tiles.
void pack_a_parallel(const float* a, int64_t lda, bool trans, int64_t M, int64_t K, float alpha, float* dst,
                     ThreadPool* pool);
// B(k, n) = trans ? b[n*ldb + k] : b[k*ldb + n]. Packs panels [p0, p1) (p1 < 0: all).
void pack_b(const float* b, int64_t ldb, bool trans, int64_t K, int64_t N, float* dst, int64_t p0 = 0,
            int64_t p1 = -1);
// pack_b over all panels, split over the pool.
void pack_b_parallel(const float* b, int64_t ldb, bool trans, int64_t K, int64_t N, float* dst, ThreadPool* pool);

struct GemmEpilogue {
  const float* row_bias = nullptr;  // M values added to each row (conv bias)
  const float* col_bias = nullptr;  // N values added to each column (Gemm bias)
  bool accumulate = false;          // add to the existing C instead of overwriting
  const float* residual = nullptr;  // [M][ldr] added to the result (fused residual Add)
  int64_t ldr = 0;
  bool clamp = false;               // then clamp to [lo, hi] (fused Relu / Clip); NaN stays NaN
  float lo = 0.f, hi = 0.f;
  bool hardswish = false;           // then x * clamp(x / 6 + 1/2, 0, 1) (fused HardSwish)
};

// C[M,N] (row stride ldc) = act((accumulate ? C : 0) + row_bias + col_bias + A*B + residual),
// act: the clamp and / or HardSwish of `ep`.
void gemm_packed(int64_t M, int64_t N, int64_t K, const float* packed_a, const float* packed_b, float* c,
                 int64_t ldc, const GemmEpilogue& ep, ThreadPool* pool);
// Same, single-threaded, for callers that parallelise over something else.
void gemm_packed_serial(int64_t M, int64_t N, int64_t K, const float* packed_a, const float* packed_b, float* c,
                        int64_t ldc, const GemmEpilogue& ep);
// Thread i of t's share of gemm_packed's product, single-threaded, as gemm_packed splits a
// packed B with at least two panels per thread: contiguous panel ranges equal in work, cut at
// row tiles. For callers whose threads each pack their own A. Returns how many rectangles
// (rows [m0, m1) x columns [n0, n1) of C) it wrote into `done`, at most 3.
struct GemmRegion {
  int64_t m0, m1, n0, n1;
};
int gemm_packed_share(int64_t M, int64_t N, int64_t K, const float* packed_a, const float* packed_b, float* c,
                      int64_t ldc, const GemmEpilogue& ep, int t, int64_t i, GemmRegion done[3]);
// Same with B unpacked: B(k, n) = b[k*ldb + n] (row-major, any alignment). The
// micro-kernel reads B rows in place, so no packing pass (1x1 convolutions).
void gemm_packed_a(int64_t M, int64_t N, int64_t K, const float* packed_a, const float* b, int64_t ldb, float* c,
                   int64_t ldc, const GemmEpilogue& ep, ThreadPool* pool);

// A row-major or transposed activation matrix to pack for one product: A(m, k) = alpha *
// (trans ? a[k*lda + m] : a[m*lda + k]), packed as float32 or (bf16) as gemm_bf16.hpp pairs.
struct GemmPackA {
  const float* a = nullptr;
  int64_t lda = 0;
  bool trans = false;
  float alpha = 1.f;
  bool bf16 = false;
};
// C[M,N] = epilogue(A * B) for a packed B (float32 from pack_b, or bf16 from pack_b_bf16 when
// A.bf16), packing A first. When the threads split B's panels and the packed A is at most 2 MB,
// each thread packs all of A into its own scratch instead of one shared copy packed in halves:
// no second pool round trip, and no thread reads tiles another core just wrote.
void gemm_pack_a_and_multiply(int64_t M, int64_t N, int64_t K, const GemmPackA& A, const float* packed_b, float* c,
                              int64_t ldc, const GemmEpilogue& ep, ThreadPool* pool);

// The batches of a batched GEMM (MatMul): one(batch, pool) for each, spread one batch per
// task when there are at least as many as threads and each is under 2^24 multiply-adds (one
// thread each, pool null), else one after another, each split over the pool.
template <typename F>
void for_each_gemm_batch(ThreadPool* pool, int64_t nbatch, double batch_work, F&& one) {
  if (pool && nbatch >= pool->threads() && batch_work < double(1 << 24)) {
    parallel_for(pool, nbatch, [&](int64_t o) { one(o, nullptr); });
  } else {
    for (int64_t o = 0; o < nbatch; ++o) one(o, pool);
  }
}

// Element offset of output batch o (row-major over the broadcast batch dims `obatch`) in one
// operand of a batched GEMM whose own batch dims `dims` (right-aligned against obatch; a 1
// broadcasts) step by `strides` elements: MatMul's contiguous operands and the views kernel's
// strided ones.
inline int64_t gemm_batch_offset(std::span<const int64_t> dims, std::span<const int64_t> strides,
                                 std::span<const int64_t> obatch, int64_t o) {
  int64_t off = 0;
  const size_t vb = dims.size(), yb = obatch.size();
  for (size_t i = yb; i-- > 0;) {
    const int64_t idx = o % obatch[i];
    o /= obatch[i];
    if (i + vb >= yb && dims[i + vb - yb] != 1) off += idx * strides[i + vb - yb];
  }
  return off;
}

// Plain row-major SGEMM: C = alpha * op(A) * op(B) + beta * C.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc, ThreadPool* pool);

// --- internal: one micro-tile, dispatched by ISA --------------------------
// What a tile adds and applies when it stores C. Pointers are already offset
// to the tile (or null).
struct GemmTileStore {
  const float* row_bias = nullptr;
  const float* col_bias = nullptr;
  const float* residual = nullptr;  // row stride ldr
  int64_t ldr = 0;
  bool accumulate = false;
  bool clamp = false;
  float lo = 0.f, hi = 0.f;
  bool hardswish = false;
  // Cache lines [0, prefetch_lines) from `prefetch` to fetch into L2 while the
  // tile computes (the next B slice, or A's block when A is the stream; see gemm_rect),
  // spread over the k steps.
  const char* prefetch = nullptr;
  int64_t prefetch_lines = 0;
  // The lines are read once (A streamed against one panel): fetched non-temporally, so
  // they are not kept in L2 and L3 over data that is read again (AVX-512 kernels).
  bool prefetch_nta = false;
};
// Computes rows [0, mr) x columns [0, ncols) of an 8 x w tile over kc steps.
// a: packed A at the k offset (stride 8); b: B at the k offset with row
// stride ldb: a packed panel (ldb == w, padding columns zero) or, when
// b_unpacked, rows of a plain matrix that may end at column ncols (the last
// vector is then loaded under a mask).
using GemmTileFn = void (*)(int64_t kc, const float* a, const float* b, int64_t w, int64_t ldb, bool b_unpacked,
                            float* c, int64_t ldc, int64_t mr, int64_t ncols, const GemmTileStore& st);
GemmTileFn gemm_tile_generic();
GemmTileFn gemm_tile_avx512();  // null when not compiled for x86
GemmTileFn gemm_tile_avx2();    // null when not compiled for x86
GemmTileFn gemm_tile_active();
// Columns [0, cols) (cols <= 4: a last panel's) of rows [0, rows) in `tiles` row tiles over kc
// steps: a at the first tile's k offset, tiles a_stride floats apart; b at the k offset with
// row stride ldb (packed or plain); the epilogue of st, row_bias / residual at row 0. The
// float32 micro-kernels' results, bit for bit (gemm_narrow.cpp).
using GemmNarrowFn = void (*)(int64_t kc, const float* a, int64_t a_stride, int64_t tiles, const float* b,
                              int64_t ldb, float* c, int64_t ldc, int64_t rows, int64_t cols, const GemmTileStore& st);
GemmNarrowFn gemm_narrow_avx2();  // null when not compiled for x86
// The K block the driver runs micro-kernel fn with: kGemmKcAvx2 for AVX2's, else kGemmKC.
inline int64_t gemm_kc_for(GemmTileFn fn) { return fn == gemm_tile_avx2() ? kGemmKcAvx2 : kGemmKC; }
// The micro-kernel a CPU of `isa` runs: gemm_tile_active() is gemm_tile_for(active_isa()).
GemmTileFn gemm_tile_for(int isa);
const char* gemm_kernel_name_for(int isa);  // "avx512f-8x48", "avx2-4x24", "generic"
const char* gemm_kernel_name();
// gemm_packed with another micro-kernel of the same tile shape and packed layouts (the bf16
// one: gemm_bf16.hpp).
void gemm_packed_with(GemmTileFn fn, int64_t M, int64_t N, int64_t K, const float* packed_a, const float* packed_b,
                      float* c, int64_t ldc, const GemmEpilogue& ep, ThreadPool* pool);
// The same tile with B given as row pointers, B(k, n) = rows[k][col + n], read in place
// (a convolution's phase planes: no im2col copy). AVX2 and AVX-512 have it (null elsewhere:
// the generic one would be slower than packing).
using GemmRowsTileFn = void (*)(int64_t kc, const float* a, const float* const* rows, int64_t col, float* c,
                                int64_t ldc, int64_t mr, int64_t ncols, const GemmTileStore& st);
GemmRowsTileFn gemm_rows_tile_avx2();
GemmRowsTileFn gemm_rows_tile_avx512();
// The rows tile of the active ISA, or null (then gemm_rows_serial must not be called).
GemmRowsTileFn gemm_rows_tile_active();
// C[M, N] (row stride ldc) = epilogue(A * B) with B(k, n) = rows[k][col0 + n] for n < N
// (each row readable up to there), on the calling thread. 48-column panels outside, K
// blocks (equal, <= 160) inside: a slice of kc rows is read by every row tile from L1, the packed A
// (the weights) from L2. Needs gemm_rows_tile_active(); the epilogue's residual is not
// supported (it would need B's column layout).
void gemm_rows_serial(int64_t M, int64_t N, int64_t K, const float* packed_a, const float* const* rows, int64_t col0,
                      float* c, int64_t ldc, const GemmEpilogue& ep);
// The same tiles with A given in place as pixel pointers and one offset table,
// A(m, k) = arows[m][aoff[k]] (a convolution's output pixels: arows[m] where pixel m's window
// starts in a padded input, aoff[k] where tap k reads from there), B a packed panel w wide:
// all rows [0, M) of columns [0, ncols) over kc steps, in the ISA's row tiles, st.prefetch's
// lines shared out over them (gemm_row_tile_store). One call a panel rather than a tile:
// a tile of 16 k steps (an expand conv's) spent ~7% of its time in the dispatch hop.
// AVX2 and AVX-512 have it (null elsewhere).
using GemmPixelsPanelFn = void (*)(int64_t kc, const float* const* arows, const int32_t* aoff, const float* b,
                                   int64_t w, float* c, int64_t ldc, int64_t M, int64_t ncols, const GemmTileStore& st);
GemmPixelsPanelFn gemm_pixels_panel_avx2();
GemmPixelsPanelFn gemm_pixels_panel_avx512();
GemmPixelsPanelFn gemm_pixels_panel_active();
// The store of row tile t (of `tiles`, first row m0) of a panel call: its even share of st's
// prefetch lines, row bias and residual at its first row.
inline GemmTileStore gemm_row_tile_store(const GemmTileStore& st, int64_t t, int64_t tiles, int64_t m0) {
  GemmTileStore s = st;
  const int64_t lines = st.prefetch ? st.prefetch_lines : 0, share = (lines + tiles - 1) / tiles;
  const int64_t from = std::min(lines, t * share);
  s.prefetch = st.prefetch ? st.prefetch + 64 * from : nullptr;
  s.prefetch_lines = std::min(share, lines - from);
  if (s.row_bias) s.row_bias += m0;
  if (s.residual) s.residual += m0 * s.ldr;
  return s;
}
// The pixel tile 6 rows x 64 columns (4 vectors), B in 64-wide panels (pack_b64): products
// whose columns come in whole 64s (64-512 output channels), where 48-wide panels leave a
// 16- or 32-wide one whose k steps spend 8 broadcasts on 8 or 16 multiply-adds, and 8 x 48
// spends 8 broadcasts on 24 where 6 x 64 spends 6. AVX-512 (null elsewhere).
constexpr int64_t kGemmPixels64MR = 6;
GemmPixelsPanelFn gemm_pixels64_panel_avx512();
inline int64_t gemm_panels64(int64_t N) { return (N + 63) / 64; }
inline size_t packed_b64_floats(int64_t K, int64_t N) { return size_t(gemm_panels64(N) * 64 * K); }
// B = W^T in panels of 64 columns (panel p at dst + p 64 K, [k][64]) for W [n][k] given by
// `at` (at(n, k)), columns past N zero.
template <typename At>
void pack_b64(int64_t K, int64_t N, At at, float* dst) {
  for (int64_t p = 0; p < gemm_panels64(N); ++p)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < 64; ++j) {
        const int64_t n = p * 64 + j;
        dst[(p * K + k) * 64 + j] = n < N ? at(n, k) : 0.f;
      }
}
// C[M, N] (row stride ldc) = epilogue(A * B), A as gemm_pixels_serial's, B from pack_b64, on
// the calling thread: panels outside, K blocks (<= 160, 40 KB of B in L1) inside, each row
// tile fetching a share of the next slice into L2. Needs gemm_pixels64_panel_avx512().
void gemm_pixels64_serial(int64_t M, int64_t N, int64_t K, const float* const* arows, const int32_t* aoff,
                          const float* b64, float* c, int64_t ldc, const GemmEpilogue& ep);
// The pixel-pointer GEMM's B in 48-wide panels but the last one 64 wide, for N = 48 q + 16
// (64, 112, 160, ..., 256): pack_b's panels would end in a 16-wide one, whose tile spends 8
// broadcasts on 8 multiply-adds; the 6 x 64 tile takes the last 64 columns instead. Whether
// N is such and this CPU runs it (AVX-512 active); the floats (N K); the packing (B(k, n) as
// pack_b's: trans ? b[n ldb + k] : b[k ldb + n]); the product, as gemm_pixels_serial's.
bool gemm_pixels_tail64(int64_t N);
inline size_t packed_b_tail64_floats(int64_t K, int64_t N) { return size_t(K * N); }
void pack_b_tail64(const float* b, int64_t ldb, bool trans, int64_t K, int64_t N, float* dst);
void gemm_pixels_tail64_serial(int64_t M, int64_t N, int64_t K, const float* const* arows, const int32_t* aoff,
                               const float* packed_b, float* c, int64_t ldc, const GemmEpilogue& ep);
// Which layout the pixel-pointer GEMM's B takes for N columns, from N and the CPU alone, so
// that packing and product agree and a packed blob's layout follows from its name
// (gemm_pixels_layout_tag: "" or "_tail64"): tail64 where gemm_pixels_tail64(N), else
// pack_b's 48-wide panels.
enum class PixelsLayout { panels48, tail64 };
PixelsLayout gemm_pixels_layout(int64_t N);
const char* gemm_pixels_layout_tag(PixelsLayout l);
size_t gemm_pixels_packed_floats(PixelsLayout l, int64_t K, int64_t N);
// B(k, n) = trans ? b[n ldb + k] : b[k ldb + n], packed for layout l.
void gemm_pixels_pack(PixelsLayout l, const float* b, int64_t ldb, bool trans, int64_t K, int64_t N, float* dst);
void gemm_pixels_run(PixelsLayout l, int64_t M, int64_t N, int64_t K, const float* const* arows, const int32_t* aoff,
                     const float* packed_b, float* c, int64_t ldc, const GemmEpilogue& ep);
// C[M, N] (row stride ldc) = epilogue(A * B) with A(m, k) = arows[m][aoff[k]] (M pointers, K
// offsets) and B packed (pack_b's panels), on the calling thread: panels outside, K blocks
// (equal, <= 160; <= 128 on AVX2) inside, every row tile of a block reading the B slice from L1. Needs
// gemm_pixels_panel_active(); no residual.
void gemm_pixels_serial(int64_t M, int64_t N, int64_t K, const float* const* arows, const int32_t* aoff,
                        const float* packed_b, float* c, int64_t ldc, const GemmEpilogue& ep);

// One tile (mr <= 8 rows) of pack_a for a row-major A, rows lda apart, into
// its [K][8] layout (rows past mr zero). pack_a uses it when the active ISA
// is AVX2 or AVX-512; null when not compiled for x86.
// 8 rows of a (mr of them real, the rest 0) as dst[k * ldd + m] (ldd kGemmMR: a pack_a tile).
using GemmPackAFn = void (*)(const float* a, int64_t lda, int64_t mr, int64_t K, float alpha, float* dst, int64_t ldd);
GemmPackAFn gemm_pack_a_avx2();

}  // namespace nxrt::cpu
