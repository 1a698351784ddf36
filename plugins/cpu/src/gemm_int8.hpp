// 8-bit GEMM on packed int16 pairs, the engine of QConv and QMatMul (qlinear.hpp).
//
// Both operands hold 8-bit values minus their zero points, widened to int16 (|v| <= 255 for
// zero points in the type's range), two consecutive k in one 32-bit word (low half k even).
// A word times a word is what vpmaddwd computes per lane: two exact products summed in int32,
// so the sums, added in wrapping int32, equal the reference loops' (integer_linalg.hpp) mod
// 2^32 whatever the order. No zero-point correction terms: the subtraction is done in packing.
//
// Layouts (64-byte aligned, KP = ceil(K / 2) words per row or column):
//   packed A ("rows", broadcast): tiles of kQMR rows; tile t at t * kQMR * KP holds [KP][kQMR].
//             Rows past M and the odd k past K are zero.
//   B slice ("columns", vectors): panels of kQNR columns; [kcp][kQNR] words, columns past N
//             zero. Constant B (QMatMul's weights) is packed once, panel p at p * kQNR * KP;
//             QConv packs its im2col panels per run, per K block, into scratch.
// The micro-kernel (AVX2: 6 x 16 in 12 accumulators; generic C++) accumulates a tile into an
// int32 block that stays in L1/L2 across K blocks; after the last one the store applies the
// QOutput (bias, scale, zero point, clamp) and writes y, vectorised on AVX2.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "qlinear.hpp"
#include "scratch.hpp"
#include "thread_pool.hpp"

namespace nxrt::cpu {

constexpr int64_t kQMR = 6;
constexpr int64_t kQNR = 16;
constexpr int64_t kQKC = 256;       // pairs per K block: a B slice is 16 KB, an A slice 6 KB
constexpr int64_t kQNcPanels = 8;   // panels per block of the int32 accumulators

inline int64_t q_pairs(int64_t K) { return (K + 1) / 2; }
inline int64_t q_tiles(int64_t M) { return (M + kQMR - 1) / kQMR; }
inline int64_t q_panels(int64_t N) { return (N + kQNR - 1) / kQNR; }
inline uint32_t q_pair(int32_t lo, int32_t hi) { return uint32_t(uint16_t(int16_t(lo))) | uint32_t(uint16_t(int16_t(hi))) << 16; }

// A zero point keeps (v - zp) of any 8-bit v within int16 (the type's range does, with room).
inline bool q_zero_point_ok(int32_t zp) { return zp >= -32000 && zp <= 32000; }

// A(m, k) = a[m * lda + k] - zp[zp_per_row ? m : 0], packed as above into dst
// (q_tiles(M) * kQMR * q_pairs(K) words).
template <typename T>
void q_pack_a(const T* a, int64_t lda, const int32_t* zp, bool zp_per_row, int64_t M, int64_t K, uint32_t* dst);
// B(k, n) = b[k * ldb + n] - zp[n], all panels (q_panels(N) * kQNR * q_pairs(K) words).
template <typename T>
void q_pack_b(const T* b, int64_t ldb, const int32_t* zp, int64_t K, int64_t N, uint32_t* dst);

// QOutput with every per-channel vector expanded to its channel count (the store's view).
struct QEpilogue {
  QType type = QType::I32;
  std::vector<int32_t> bias;   // empty: none
  std::vector<double> scale;   // one per channel (not I32)
  std::vector<float> float_bias;  // empty: none
  int32_t zero_point = 0, lo = 0, hi = 0;
  float flo = 0.f, fhi = 0.f;
  float q_scale = 0.f;  // QOutput::q_scale
  // The 8-bit outputs' float shortcut (q_fast_path): per channel the value before rounding is
  // v * fast_m + fast_b, within fast_lim's margin of the exact one (see q_fast_path). Empty:
  // the store takes the exact path for every vector.
  std::vector<float> fast_m, fast_b, fast_lim;
  // The clamp before rounding: [flo, fhi] / q_scale within +-400, and, unless fast_two_clamps,
  // the integer clamp after it minus the zero point (the rounded value + zero point is the byte).
  float fast_lo = 0.f, fast_hi = 0.f;
  bool fast_two_clamps = false;  // an integer output whose [lo, hi] misses the saturation range
};
// Expands `out` for `channels` channels; throws std::invalid_argument on vectors of another size.
QEpilogue q_epilogue(const QOutput& out, int64_t channels);
// Sets e's fast_* for UINT8 / INT8 outputs whose scales lie in the range the bound holds for.
// The exact store computes, per accumulator v, a value before rounding in double and float
// steps (double(v) * scale, float, + float_bias, / q_scale); the shortcut computes it as
// fma(float(v), scale / q_scale, float_bias / q_scale) in float. Each is within 2^-24 relative
// per step of the real value Q, so they differ by at most 2^-24 (6 |Q| + 4 |float_bias /
// q_scale|) (1 + 2^-20); with |Q| <= 402 that is under tol = 2^-20 (402 + |b|). Where the
// fast value is more than tol from every half-integer, both round to the same integer; a
// vector with a lane closer takes the exact path. Values are clamped to +-400 before
// rounding: any integer beyond +-384 saturates every 8-bit type whatever its zero point.
void q_fast_path(QEpilogue& e);

// acc[kQMR][kQNR] = (load ? acc : 0) + sum over kcp pairs of A tile (stride kQMR) x B slice (stride kQNR).
using QTileFn = void (*)(int64_t kcp, const uint32_t* a, const uint32_t* b, int32_t* acc, bool load);
// Rows [r0, r1) x columns [0, cols) of acc (row stride kQNR) through the epilogue to
// y[(row - r0) * ldy + j] (elements of ep.type from `y`); the channel of (row, j) is
// by_row ? ch0 + row - r0 : ch0 + j.
using QStoreFn = void (*)(const QEpilogue& ep, const int32_t* acc, int64_t r0, int64_t r1, int64_t cols, bool by_row,
                          int64_t ch0, void* y, int64_t ldy);

// Up to kQTileGroup row tiles t, t+1, ... (A at a + i * a_next) against one B slice, into
// acc[i]; q_tile_group_*(nt) is the function for nt (1..kQTileGroup) tiles.
constexpr int kQTileGroup = 3;
using QTileGroupFn = void (*)(int64_t kcp, const uint32_t* a, int64_t a_next, const uint32_t* b, int32_t* const* acc,
                              bool load);

QTileFn q_tile_generic();
QTileFn q_tile_avx2();  // null when not compiled for x86
QTileFn q_tile_vnni();  // null unless this CPU has AVX-512 BW + VNNI
QTileGroupFn q_tile_group_vnni(int nt);
QTileGroupFn q_tile_group_active(int nt);  // null: tiles one at a time
QStoreFn q_store_generic();
QStoreFn q_store_avx2();  // null when not compiled for x86
QStoreFn q_store_avx512();  // null unless this CPU has AVX-512 BW, DQ and VL
// QStoreFn over `panels` blocks of kQNR columns side by side in y (block j's rows at acc + j *
// kQMR * kQNR, the last `cols` wide); by_row when panels > 1. Rows [r0, r1) may span row tiles:
// row r is row r % kQMR of the tile at acc + (r / kQMR) * tile_stride (one call for a column of
// tiles of the wide kernels).
using QStorePanelsFn = void (*)(const QEpilogue& ep, const int32_t* acc, int64_t tile_stride, int64_t r0, int64_t r1,
                                int64_t panels, int64_t cols, bool by_row, int64_t ch0, void* y, int64_t ldy);
QStorePanelsFn q_store_panels_avx512();  // the same condition
// store_panels (by_row, kQWide panels at most) with panel j's 16 accumulator columns
// filtered by keep[j] (bit c: column c is an output): the kept ones written in order from
// column col_at[j] of each row of y. Rows [r0, r1) may span row tiles: row r is row r % kQMR
// of the tile at acc + (r / kQMR) * tile_stride (one call for a whole column of tiles).
using QStoreKeptFn = void (*)(const QEpilogue& ep, const int32_t* acc, int64_t tile_stride, int64_t r0, int64_t r1,
                              int64_t panels, const uint16_t* keep, const int64_t* col_at, int64_t ch0, void* y,
                              int64_t ldy);
QStoreKeptFn q_store_kept_avx512();  // the same condition
// A B panel's columns as runs of evenly spaced source elements: run r covers columns
// [col[r], col[r + 1]) and reads column j at offset off[r] + (j - col[r]) * stride; columns
// from col[n] on are zero. pack_runs writes pairs [k0, k0 + kc) of such a panel (tap k at
// base + koff[k], K taps) to dst ([kc][kQNR] words): from an int16 source whose zero point is
// already subtracted (stride 1 or 2), or (pack_runs8) from 8-bit x in place minus zp.
// pack_runs may read (not use) up to kQRunSlack int16 before and after the taps it packs, so
// its source needs that much readable memory around it (AVX2 has no masked 16-bit loads);
// pack_runs8 reads only the taps.
struct QPanelRuns {
  int n = 0;
  int stride = 1;
  int col[kQNR + 1] = {};
  int64_t off[kQNR] = {};
};
// Each run's lanes as a mask over one read of the source row (stride 1: 16 lanes, bit j for
// column j; stride 2: 32 lanes, the even ones), and where that read starts (at[r] + lane):
// the masked-load packers' (AVX-512) view of the runs.
inline void q_run_masks(const QPanelRuns& runs, uint32_t* mask, int64_t* at) {
  const bool s2 = runs.stride == 2;
  for (int r = 0; r < runs.n; ++r) {
    const int c0 = runs.col[r], c1 = runs.col[r + 1];
    mask[r] = s2 ? uint32_t(((1ull << (2 * c1)) - (1ull << (2 * c0))) & 0x55555555u) : ((1u << (c1 - c0)) - 1u) << c0;
    at[r] = runs.off[r] - int64_t(c0) * runs.stride;
  }
}
using QPackRunsFn = void (*)(const int16_t* base, const int64_t* koff, int64_t K, const QPanelRuns& runs, int64_t k0,
                             int64_t kc, uint32_t* dst);
using QPackRuns8Fn = void (*)(const void* base, bool is_signed, int32_t zp, const int64_t* koff, int64_t K,
                              const QPanelRuns& runs, int64_t k0, int64_t kc, uint32_t* dst);
constexpr int64_t kQRunSlack = 32;
QPackRunsFn q_pack_runs_generic();
QPackRunsFn q_pack_runs_avx2();    // null when not compiled for x86
QPackRunsFn q_pack_runs_avx512();  // null unless this CPU has AVX-512 BW
QPackRunsFn q_pack_runs_active();
QPackRuns8Fn q_pack_runs8_generic();
QPackRuns8Fn q_pack_runs8_avx512();
QPackRuns8Fn q_pack_runs8_active();

// ---- u8 x s8 quads (gemm_int8_vnni8.cpp): vpdpbusd, 64 multiply-adds per zmm.
// The same layouts with one 32-bit word per 4 consecutive k (byte i = k % 4; K padded with
// zeros to q_quads(K) words): one operand u8 (x + 128 when x is int8), the other s8 (w - 128
// when w is uint8). vpdpbusd sums the 4 exact products into the wrapping int32 accumulator,
// so sum x'w' is exact mod 2^32, and (x_zp' = x_zp [+ 128], w_zp' = w_zp [- 128])
//   sum (x - x_zp)(w - w_zp) = sum x'w' - x_zp' sum_k w' + K x_zp' w_zp' - w_zp' sum_k x'
// whose middle terms are per weight channel: folded into the epilogue's bias at construction;
// the last (QZpTerm, only for non-symmetric weights) is applied to each tile before its store.
// Padding taps hold x_zp' (x' - x_zp' = 0, as the reference's), k past K holds x' = w' = 0.
inline int64_t q_quads(int64_t K) { return (K + 3) / 4; }
// The vpdpbusd micro-kernel is one row tile against up to kQWide B slices (6 x 64 in 24
// accumulators): per quad step kQWide vector loads and 6 broadcasts feed 24 vpdpbusd, where
// the int16 pairs' 18 x 16 tiles load a broadcast per multiply (nxrt_cpu_int8_bench's
// micro-kernel line: ~99% of the vpdpbusd peak on Zen 5, where that 18 x 16 shape on quads ran
// 78%). K blocks of at most kQKCWide quads keep the kQWide slices (36 KB) in L1 while every
// row tile reads them.
constexpr int kQWide = 4;
constexpr int64_t kQKCWide = 144;
// acc (panel j's kQMR x kQNR block at acc + j * kQMR * kQNR) = (load ? acc : 0) + kcq quads
// of the A tile (stride kQMR) x B slices b[0 .. nv) (stride kQNR each); the A words the next
// call reads (a_next, as many) are prefetched meanwhile: large convs' weights stream from
// memory (ResNet's 512-channel layers: 2.4 MB each).
using QTileWideFn = void (*)(int64_t kcq, const uint32_t* a, const uint32_t* const* b, int32_t* acc, bool load,
                             const uint32_t* a_next);
// nv in 1..kQWide; a_signed: A is the s8 operand (conv: weights), else B is (matmul).
QTileWideFn q_tile_wide_dpbusd(int nv, bool a_signed);  // null unless AVX-512 VNNI and active_isa() >= avx512
// The same tile over int16 pairs (q_pack_a's and q_pack_b's words, kcq counting pairs) by
// vpdpwssd: the 8-bit Winograd's products (conv_int8_winograd.hpp), whose operands need 16 bits.
QTileWideFn q_tile_wide_dpwssd(int nv);  // null as q_tile_wide_dpbusd
// The same tile with B read where it lies, no packing: quad step k's NV vectors are the NV x
// 16 consecutive words at b + boff[k] (unaligned), for u8 B (A the s8 weights). QConv's
// stride-1 channel quads: the channel-interleaved copy of x is already [quad][row][Wp] words,
// so a run of output pixels at pitch Wp (the padding columns computed and dropped) is one.
using QTileDirectFn = void (*)(int64_t kcq, const uint32_t* a, const uint32_t* b, const int64_t* boff, int32_t* acc,
                               bool load, const uint32_t* a_next);
QTileDirectFn q_tile_direct_dpbusd(int nv);  // nv in 1..kQWide; null as q_tile_wide_dpbusd
// A last panel of at most kQNarrowWide columns (ResNet's 7x7 planes leave 1 of 16, 14x14 4)
// runs apart, so its empty columns cost nothing: the A tile's words are read as vectors (16
// words: quads k .. k + 2, row by row) against the column's quads expanded to match (word i
// of a group of 8 quads = quad i / 6, q_expand_narrow), and each row's lanes summed at the end.
constexpr int kQNarrowWide = 4;
inline int64_t q_narrow_words(int64_t kcq) { return (kcq + 7) / 8 * 48; }  // per column
// bx[c * q_narrow_words(kcq) + g * 48 + i] = slice[(8 g + i / 6) * kQNR + c] (0 past kcq), c < cols.
void q_expand_narrow(const uint32_t* slice, int64_t kcq, int cols, uint32_t* bx);
// lanes (cols x 48 int32, 64-byte aligned) = (load ? lanes : 0) + kcq quads of the A tile x
// columns [0, cols): the products of row r in lanes i % 6 == r. With acc: the lanes' row
// sums to acc[r * kQNR + c] (done once, after the last K block).
using QTileNarrowFn = void (*)(int64_t kcq, const uint32_t* a, const uint32_t* bx, int cols, int32_t* lanes, bool load,
                               int32_t* acc);
QTileNarrowFn q_tile_narrow_dpbusd(bool a_signed);  // null as q_tile_wide_dpbusd
// A(m, k) = a[m * lda + k] + add as bytes (add: 0, 128 or -128, else std::invalid_argument),
// packed as q_pack_a's tiles of quads.
template <typename T>
void q_pack_a_quads(const T* a, int64_t lda, int32_t add, int64_t M, int64_t K, uint32_t* dst);
// B(k, n) = b[k * ldb + n] + add as bytes, packed as q_pack_b's panels of quads.
template <typename T>
void q_pack_b_quads(const T* b, int64_t ldb, int32_t add, int64_t K, int64_t N, uint32_t* dst);
// ep.bias[c] += K * x_zp' * w_zp'[c] - x_zp' * sum_k w'(c, k) (wrapping; an empty bias becomes
// one), w'(c, k) from wq; w_zp' (the weights' zero points after the shift) empty: all 0.
template <typename WQ>
void q_fold_quad_correction(QEpilogue& ep, int32_t x_zp, const std::vector<int32_t>& w_zp, int64_t channels, WQ&& wq,
                            int64_t K) {
  if (ep.bias.empty()) ep.bias.assign(size_t(channels), 0);
  for (int64_t c = 0; c < channels; ++c) {
    uint32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += uint32_t(wq(c, k));
    const uint32_t wz = w_zp.empty() ? 0u : uint32_t(w_zp[size_t(c)]);
    ep.bias[size_t(c)] = int32_t(uint32_t(ep.bias[size_t(c)]) + uint32_t(K) * uint32_t(x_zp) * wz - uint32_t(x_zp) * sum);
  }
}
// The term of the weights' zero points, - w_zp'[c] * sum_k x'(k) per output, applied to the
// tile before its store: conv (row_zp: w_zp' per row, the channel; the sums are the B panels'
// column sums, taken as they are packed), matmul (row_sums: per row of A; col_zp: w_zp' per column).
struct QZpTerm {
  const int32_t* row_zp = nullptr;
  const int32_t* row_sums = nullptr;
  const int32_t* col_zp = nullptr;
};
// sums[j] += the 4 bytes (u8) of slice words j, over kc quads of a [kc][kQNR] slice.
using QQuadColSumsFn = void (*)(int64_t kc, const uint32_t* b, int32_t* sums);
QQuadColSumsFn q_quad_col_sums();
// A quad panel from u8 x (runs as QPanelRuns, byte offsets, any stride): quads [q0, q0 + qc) of
// K taps at base + koff[k].
using QPackQuadsFn = void (*)(const uint8_t* base, const int64_t* koff, int64_t K, const QPanelRuns& runs, int64_t q0,
                              int64_t qc, uint32_t* dst);
QPackQuadsFn q_pack_quads_generic();
// AVX-512 BW (masked loads) when the dpbusd kernels run, AVX2 when the vpmaddubsw ones do:
// that one may read (not use) up to kQRunSlack bytes before and after the taps it packs.
QPackQuadsFn q_pack_quads_active();
bool q_pack_quads_reads_slack();
// The channel quads (QConv's weights in channel-quad order, qlinear.hpp): x' copied as
// [C/4][Hp][Wp][4] bytes, so the 4 taps of a quad (4 channels at one kernel position) are one
// word, and a panel's quad row is 16 words at the run's stride: masked word loads, no byte
// interleave. base + koff[4 q] is quad q's word at pixel offset 0; runs count pixels (words).
QPackQuadsFn q_pack_channel_quads();  // null unless the vpdpbusd kernels run
// dst[4 w + i] = src[i * plane + w] ^ flip, w in [0, n), i in [0, 4): four channel rows as quads.
void q_interleave_channels4(const uint8_t* src, int64_t plane, int64_t n, uint8_t flip, uint8_t* dst);

// ---- u8 x s8 quads on AVX2 (gemm_int8_u8s8_avx2.cpp), for QConv where VNNI is absent.
// vpmaddubsw multiplies 32 u8 x s8 byte pairs and adds each pair into int16 with saturation;
// vpmaddwd by ones widens the int16 to int32: 32 multiply-adds per two multiplies, as many as
// the int16 pairs' one vpmaddwd per 16, but with fewer other instructions around them (1.23x
// in L1 on Zen 3: nxrt_cpu_int8_bench). A pair sum is exact while |w0| + |w1| <= 128
// (255 * 128 < 32767), so the weights are split exactly, w = dense + rest: the packed A holds
// the dense part, whose pairs all keep the bound, and every quad whose weights break it adds a
// rest quad (the difference, within the bound too) from a sparse list per row tile and K block
// (QQuadRest). Convolution weights quantized to the full int8 range put 4-12% of the 3x3
// layers' steps in the rest (1x1: 18-35%), 7-bit (reduce_range) weights none.
// dense + rest = w for one quad word of 4 s8 weights: a pair over the bound halves into both.
inline void q_split_quad(uint32_t w, uint32_t& dense, uint32_t& rest) {
  dense = rest = 0;
  for (int p = 0; p < 2; ++p) {
    const int32_t w0 = int8_t(w >> (16 * p)), w1 = int8_t(w >> (16 * p + 8));
    const bool over = (w0 < 0 ? -w0 : w0) + (w1 < 0 ? -w1 : w1) > 128;
    const int32_t d0 = over ? w0 / 2 : w0, d1 = over ? w1 / 2 : w1;  // |w / 2| <= 64, |w - w / 2| <= 64
    dense |= (uint32_t(uint8_t(d0)) | uint32_t(uint8_t(d1)) << 8) << (16 * p);
    rest |= (uint32_t(uint8_t(w0 - d0)) | uint32_t(uint8_t(w1 - d1)) << 8) << (16 * p);
  }
}
// K blocks of q_gemm_rect: KP words in blocks of q_k_block(KP) (the last one shorter), at
// most kQKC each, as equal as they divide.
inline int64_t q_k_block(int64_t KP, int64_t most = kQKC) {
  const int64_t blocks = std::max<int64_t>(1, (KP + most - 1) / most);
  return std::max<int64_t>(1, (KP + blocks - 1) / blocks);
}
inline int64_t q_k_blocks(int64_t KP) { return std::max<int64_t>(1, (KP + q_k_block(KP) - 1) / q_k_block(KP)); }
// The rest of a packed A, by cell: cell c = t * q_k_blocks(KP) + b is row tile t's K block b.
// The kernel runs a tile's rows as two groups, rows [0, 4) and [4, 6), and each group has its
// own steps: a step holds one word pair (quad index, rest word) per row of the group, and a
// row with fewer rest quads in the block than the group's busiest row fills its pairs with
// (the block's first quad, 0), which add nothing. index[3 c] is the cell's first word in
// `entries`, index[3 c + 1] its steps of rows 0-3 (8 words each), index[3 c + 2] those of rows
// 4-5 (4 words each, after the others); index[3 cells] the words in all.
struct QQuadRest {
  const int32_t* index = nullptr;
  const uint32_t* entries = nullptr;
};
constexpr int64_t kQRestRowsA = 4;  // the first group's rows; the second has kQMR - kQRestRowsA
// Which taps vpmaddubsw pairs is free to choose: the weights are packed and im2col reads x in
// one tap order. Per full quad of taps, of the pairings ((0,1),(2,3)), ((0,2),(1,3)) and
// ((0,3),(1,2)) the one under which the fewest of the M rows break |w0| + |w1| <= 128
// (w(m, k) = w[m * K + k]): order[j] is the tap at position j (a permutation of [0, K)).
std::vector<int32_t> q_pair_order(const int8_t* w, int64_t M, int64_t K);
// Splits the packed A (q_pack_a_quads' tiles, K taps) in place (q_split_quad), returns the
// rest as QQuadRest's index and entries, and the rest's work in row steps (a group's step
// counts once per row of the group).
int64_t q_split_packed_quads(uint32_t* pa, int64_t M, int64_t K, std::vector<int32_t>& index,
                             std::vector<uint32_t>& entries);
// Whether the split quads beat the int16 pairs with `rest_rows` row steps of rest on top of
// `dense_steps` tile steps (kQMR row steps each). nxrt_cpu_int8_bench's micro-kernel line on
// Zen 3: a dense quad step costs 0.82 of two pair steps and a rest step ~1.2 dense ones, so
// they break even near 19% rest; 15% keeps a margin for the packing.
inline bool q_split_pays(int64_t rest_rows, int64_t dense_steps) {
  return double(rest_rows) * 100.0 <= 15.0 * double(kQMR) * double(dense_steps);
}
// acc = (load ? acc : 0) + kcq quads of A tile x B slice (u8 B, s8 A, stride kQMR / kQNR)
// + the cell's rest at `rest`: steps_a steps of rows 0-3, then steps_b of rows 4-5 (quad
// index q reads slice row q - k0).
using QTileRestFn = void (*)(int64_t kcq, const uint32_t* a, const uint32_t* b, int32_t* acc, bool load,
                             const uint32_t* rest, int64_t steps_a, int64_t steps_b, int64_t k0);
QTileRestFn q_tile_quads_avx2();  // null unless AVX2 runs and the VNNI kernels do not
// The same for a panel of at most kQNarrow columns (a conv's last, 7x7 planes: 1 of 16): the
// tile's rows in the vector, one broadcast column per product pair, so the 16-column kernel's
// empty columns cost nothing; acc columns [0, cols) only.
constexpr int64_t kQNarrow = 4;
using QTileRestNarrowFn = void (*)(int64_t kcq, const uint32_t* a, const uint32_t* b, int32_t* acc, bool load,
                                   const uint32_t* rest, int64_t steps_a, int64_t steps_b, int64_t k0, int64_t cols);
QTileRestNarrowFn q_tile_quads_narrow_avx2();  // the same condition
QPackQuadsFn q_pack_quads_avx2();  // the same condition
QQuadColSumsFn q_quad_col_sums_avx2();
// QConv's path: the dpbusd quads, or these.
inline bool q_conv_quads_available() { return q_tile_wide_dpbusd(1, true) || q_tile_quads_avx2(); }

QTileFn q_tile_active();  // from active_isa()
QStoreFn q_store_active();
// "avx512vnni-u8s8-6x64" (vpdpbusd quads), "avx512vnni-18x16", "avx2-6x16" or "generic"
// QConv's with q_conv_quads_available() (else q_kernel_name()'s).
const char* q_conv_kernel_name();
const char* q_kernel_name();

// One rectangle of C = A B: rows [row0, row1) of A (any rows: tiles are clipped to it) x
// panels [p0, p1). b_slice(p, k0p, kcp, scratch) returns panel p's pairs [k0p, k0p + kcp)
// ([kcp][kQNR] words), packing them into `scratch` (kQKC * kQNR words) when they are not
// prepacked. y_at(row, n0) is the y element offset of (row, column n0); ldy the row stride.
// by_row: the channel is the row (conv), else the column (matmul).
template <typename BSlice, typename YAt>
void q_gemm_rect(int64_t row0, int64_t row1, int64_t N, int64_t KP, const uint32_t* pa, int64_t p0, int64_t p1,
                 BSlice&& b_slice, const QEpilogue& ep, bool by_row, YAt&& y_at, int64_t ldy, void* y,
                 int quads = 0, const QZpTerm& zp_term = {}, const QQuadRest* rest = nullptr) {
  // quads: 0 the int16 pairs; 1 u8 x s8 quads with A signed; 2 with B signed (KP counts quads).
  // Quads run the wide vpdpbusd tiles, or without VNNI (A signed only) the AVX2 vpmaddubsw
  // tiles, A split with `rest` (q_split_packed_quads).
  const QTileFn tile = q_tile_active();
  const bool wide = quads && q_tile_wide_dpbusd(1, quads == 1);
  const QTileGroupFn group = quads ? nullptr : q_tile_group_active(kQTileGroup);
  const QTileRestFn tile_rest = quads == 1 && !wide ? q_tile_quads_avx2() : nullptr;
  const QTileRestNarrowFn tile_narrow = tile_rest ? q_tile_quads_narrow_avx2() : nullptr;
  if (quads && !wide && !(tile_rest && rest)) throw std::logic_error("q_gemm_rect: no kernel for these quads");
  const QStoreFn store = q_store_active();
  static const QStorePanelsFn store_panels = store == q_store_avx512() ? q_store_panels_avx512() : nullptr;
  const int64_t t0 = row0 / kQMR, t1 = (row1 + kQMR - 1) / kQMR;
  if (t0 >= t1 || p0 >= p1) return;
  const int64_t block_tiles = t1 - t0;
  static_assert(kQWide * kQKCWide >= kQKC && (kQNcPanels - kQWide - 1) * kQMR * kQNR >= kQNarrowWide * 48);
  const int64_t slices_words = (kQWide + 1) * kQKCWide * kQNR;  // a group's wide slices and a narrow one
  uint32_t* bscratch = reinterpret_cast<uint32_t*>(
      scratch_floats(kScratchB, size_t(slices_words + kQNarrowWide * q_narrow_words(kQKCWide))));
  const QTileNarrowFn narrow_fn = wide ? q_tile_narrow_dpbusd(quads == 1) : nullptr;
  int32_t* cbuf =
      reinterpret_cast<int32_t*>(scratch_floats(kScratchC, size_t(block_tiles * kQNcPanels * kQMR * kQNR)));
  const size_t esize = ep.type == QType::U8 || ep.type == QType::S8 ? 1 : 4;
  int32_t colsum[kQNcPanels][kQNR];  // zp_term.row_zp: the B panels' column sums over K
  const int64_t nc = wide ? kQWide : kQNcPanels;
  // K blocks of equal size: no short last block reloading the accumulators.
  const int64_t kcb = q_k_block(KP, wide ? kQKCWide : kQKC), kblocks = q_k_blocks(KP);
  for (int64_t g0 = p0, g1; g0 < p1; g0 = g1) {
    g1 = std::min(p1, g0 + nc);
    // A narrow last panel joins the wide group before it, which leaves the A tile in L1.
    if (narrow_fn && p1 - g1 == 1 && N - (p1 - 1) * kQNR <= kQNarrowWide) g1 = p1;
    // Tile t's rows x panel p from its accumulators (row stride kQNR) through the epilogue.
    auto store_tile = [&](int64_t t, int64_t p, int32_t* acc) {
      const int64_t n0 = p * kQNR, cols = std::min(kQNR, N - n0);
      const int32_t* csum = colsum[p - g0];
      const int64_t ra = std::max(row0, t * kQMR), rb = std::min(row1, (t + 1) * kQMR);
      for (int64_t row = ra; row < rb && (zp_term.row_zp || zp_term.row_sums); ++row) {
        int32_t* ar = acc + (row - t * kQMR) * kQNR;
        if (zp_term.row_zp)
          for (int64_t j = 0; j < kQNR; ++j)
            ar[j] = int32_t(uint32_t(ar[j]) - uint32_t(zp_term.row_zp[row]) * uint32_t(csum[j]));
        else
          for (int64_t j = 0; j < cols; ++j)
            ar[j] = int32_t(uint32_t(ar[j]) - uint32_t(zp_term.row_sums[row]) * uint32_t(zp_term.col_zp[n0 + j]));
      }
      store(ep, acc, ra - t * kQMR, rb - t * kQMR, cols, by_row, by_row ? ra : n0,
            static_cast<char*>(y) + size_t(y_at(ra, n0)) * esize, ldy);
    };
    for (int64_t k0 = 0; k0 < KP || k0 == 0; k0 += kcb) {
      const int64_t kc = std::min(kcb, KP - k0);
      const bool first = k0 == 0, final = k0 + kcb >= KP;
      auto slice = [&](int64_t p, uint32_t* scratch) {
        const uint32_t* bs = b_slice(p, k0, kc, scratch);
        if (zp_term.row_zp) {
          int32_t* csum = colsum[p - g0];
          if (first) std::fill(csum, csum + kQNR, 0);
          q_quad_col_sums()(kc, bs, csum);
        }
        return bs;
      };
      if (wide) {  // the group's slices once, then every row tile against all of them
        const uint32_t* bs[kQWide + 1];
        for (int64_t p = g0; p < g1; ++p) bs[p - g0] = slice(p, bscratch + (p - g0) * kQKCWide * kQNR);
        const int last_cols = int(std::min(kQNR, N - (g1 - 1) * kQNR));
        const bool narrow = narrow_fn && last_cols <= kQNarrowWide;  // the last panel apart
        const int nv = int(g1 - g0) - (narrow ? 1 : 0);
        uint32_t* bx = bscratch + slices_words;
        if (narrow) q_expand_narrow(bs[nv], kc, last_cols, bx);
        const QTileWideFn fn = nv ? q_tile_wide_dpbusd(nv, quads == 1) : nullptr;
        for (int64_t t = t0; t < t1; ++t) {
          int32_t* acc = cbuf + (t - t0) * kQNcPanels * kQMR * kQNR;
          // Next: tile t + 1, or the next K block's first tile.
          const int64_t tn = t + 1 < t1 ? t + 1 : t0, kn = t + 1 < t1 || final ? k0 : k0 + kcb;
          if (fn) fn(kc, pa + (t * KP + k0) * kQMR, bs, acc, !first, pa + (tn * KP + kn) * kQMR);
          if (narrow)  // its lanes after the group's accumulators (cbuf holds kQNcPanels)
            narrow_fn(kc, pa + (t * KP + k0) * kQMR, bx, last_cols, acc + (kQWide + 1) * kQMR * kQNR, !first,
                      final ? acc + nv * kQMR * kQNR : nullptr);
          if (!final || (store_panels && by_row && !zp_term.row_zp)) continue;
          for (int64_t p = g0; p < g1; ++p) store_tile(t, p, acc + (p - g0) * kQMR * kQNR);
        }
        // Every tile's rows across the group in one call (the store's constants set up once).
        if (final && store_panels && by_row && !zp_term.row_zp)
          store_panels(ep, cbuf, kQNcPanels * kQMR * kQNR, row0 - t0 * kQMR, row1 - t0 * kQMR, g1 - g0, last_cols,
                       true, row0, static_cast<char*>(y) + size_t(y_at(row0, g0 * kQNR)) * esize, ldy);
      } else {  // per panel, every row tile
        for (int64_t p = g0; p < g1; ++p) {
          const uint32_t* bs = slice(p, bscratch);
          const int64_t cols = std::min(kQNR, N - p * kQNR);
          auto acc_of = [&](int64_t t) { return cbuf + ((t - t0) * kQNcPanels + (p - g0)) * kQMR * kQNR; };
          int64_t t = t0;
          if (group)
            while (t < t1) {
              const int nt = int(std::min<int64_t>(kQTileGroup, t1 - t));
              int32_t* accs[kQTileGroup];
              for (int i = 0; i < nt; ++i) accs[i] = acc_of(t + i);
              (nt == kQTileGroup ? group : q_tile_group_active(nt))(kc, pa + (t * KP + k0) * kQMR, KP * kQMR, bs, accs,
                                                                    !first);
              if (final)
                for (int i = 0; i < nt; ++i) store_tile(t + i, p, accs[i]);
              t += nt;
            }
          for (; t < t1; ++t) {
            int32_t* acc = acc_of(t);
            if (tile_rest) {
              const int32_t* cell = rest->index + 3 * (t * kblocks + k0 / kcb);
              const uint32_t* re = rest->entries + cell[0];
              const uint32_t* at = pa + (t * KP + k0) * kQMR;
              if (cols <= kQNarrow) tile_narrow(kc, at, bs, acc, !first, re, cell[1], cell[2], k0, cols);
              else tile_rest(kc, at, bs, acc, !first, re, cell[1], cell[2], k0);
            } else {
              tile(kc, pa + (t * KP + k0) * kQMR, bs, acc, !first);
            }
            if (final) store_tile(t, p, acc);
          }
        }
      }
      if (KP == 0) break;
    }
  }
}

}  // namespace nxrt::cpu
