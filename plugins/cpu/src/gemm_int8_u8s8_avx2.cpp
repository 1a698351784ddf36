// The u8 x s8 quad path of the 8-bit GEMM on AVX2 (gemm_int8.hpp): the weights split into a
// dense part for vpmaddubsw and a sparse rest, the 6 x 16 micro-kernel that adds both, the
// im2col packer of quad panels and the panels' column sums. Target attributes; the kernels are
// handed out only when CPUID reports AVX2 and the AVX-512 VNNI ones do not run.
#include <algorithm>
#include <cstdlib>
#include <limits>

#include "cpu_info.hpp"
#include "gemm_int8.hpp"
#include "simd.hpp"

namespace nxrt::cpu {

std::vector<int32_t> q_pair_order(const int8_t* w, int64_t M, int64_t K) {
  static constexpr int kPairings[3][4] = {{0, 1, 2, 3}, {0, 2, 1, 3}, {0, 3, 1, 2}};
  std::vector<int32_t> order(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) order[size_t(k)] = int32_t(k);
  for (int64_t q = 0; 4 * q + 4 <= K; ++q) {
    int64_t breaks[3] = {};
    for (int64_t m = 0; m < M; ++m) {
      const int8_t* t = w + m * K + 4 * q;
      for (int p = 0; p < 3; ++p) {
        auto pair_over = [&](int a, int b) { return std::abs(int(t[a])) + std::abs(int(t[b])) > 128; };
        const int* o = kPairings[p];
        breaks[p] += pair_over(o[0], o[1]) || pair_over(o[2], o[3]);
      }
    }
    const int best = int(std::min_element(breaks, breaks + 3) - breaks);
    for (int i = 0; i < 4; ++i) order[size_t(4 * q + i)] = int32_t(4 * q + kPairings[best][i]);
  }
  return order;
}

int64_t q_split_packed_quads(uint32_t* pa, int64_t M, int64_t K, std::vector<int32_t>& index,
                             std::vector<uint32_t>& entries) {
  const int64_t KQ = q_quads(K), tiles = q_tiles(M), kcb = q_k_block(KQ), blocks = q_k_blocks(KQ);
  index.assign(size_t(3 * tiles * blocks + 1), 0);
  entries.clear();
  std::vector<uint32_t> row_rest[kQMR];  // per row of the tile: (quad, rest) pairs of the block
  int64_t rest_rows = 0;
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t q0 = blk * kcb, q1 = std::min(KQ, q0 + kcb), cell = t * blocks + blk;
      for (int64_t i = 0; i < kQMR; ++i) {
        row_rest[i].clear();
        uint32_t* w = pa + t * kQMR * KQ + i;  // quad q of row i at w[q * kQMR]
        for (int64_t q = q0; q < q1; ++q) {
          uint32_t dense, rest;
          q_split_quad(w[q * kQMR], dense, rest);
          w[q * kQMR] = dense;
          if (rest) row_rest[i].insert(row_rest[i].end(), {uint32_t(q), rest});
        }
      }
      index[size_t(3 * cell)] = int32_t(entries.size());
      for (int g = 0; g < 2; ++g) {  // rows [0, 4), then [4, 6)
        const int64_t r0 = g ? kQRestRowsA : 0, r1 = g ? kQMR : kQRestRowsA;
        size_t busiest = 0;
        for (int64_t i = r0; i < r1; ++i) busiest = std::max(busiest, row_rest[i].size() / 2);
        for (size_t j = 0; j < busiest; ++j)
          for (int64_t i = r0; i < r1; ++i) {
            const bool has = 2 * j < row_rest[i].size();
            entries.push_back(has ? row_rest[i][2 * j] : uint32_t(q0));
            entries.push_back(has ? row_rest[i][2 * j + 1] : 0u);
          }
        index[size_t(3 * cell + 1 + g)] = int32_t(busiest);
        rest_rows += int64_t(busiest) * (r1 - r0);
      }
    }
  // The index holds int32 word offsets: a rest past them (~10^10 weights) is never worth it.
  if (entries.size() > size_t(std::numeric_limits<int32_t>::max())) return std::numeric_limits<int64_t>::max() / (2 * kQMR);
  index.back() = int32_t(entries.size());
  return rest_rows;
}

}  // namespace nxrt::cpu

#if defined(__x86_64__)
#include <immintrin.h>

namespace nxrt::cpu {
namespace {

#define NXRT_AVX2 __attribute__((target("avx2,fma")))

// c + the 4 products of each 32-bit lane's bytes, u8 of u by s8 of s: vpmaddubsw sums pairs
// into int16 (exact while the s8 pair keeps |w0| + |w1| <= 128), vpmaddwd by ones the pairs.
NXRT_AVX2 inline __m256i add_quad_products(__m256i c, __m256i u, __m256i s, __m256i ones) {
  return _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones));
}

// R rows of the tile (4, then 2: 8 accumulators, 2 B vectors, the ones and 2 temporaries fit
// the 16 registers; 6 rows spill), their rest steps after the dense quads.
template <int R>
NXRT_AVX2 inline void rows_quads(int64_t kcq, const uint32_t* a, const uint32_t* b, int32_t* acc, bool load,
                                 const uint32_t* rest, int64_t steps, int64_t k0) {
  __m256i c[R][2];
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
  for (int m = 0; m < R; ++m)
    for (int v = 0; v < 2; ++v)
      c[m][v] = load ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + m * kQNR + v * 8)) : _mm256_setzero_si256();
  const uint32_t* bk = b;
#pragma GCC unroll 2
  for (int64_t k = 0; k < kcq; ++k) {
    _mm_prefetch(reinterpret_cast<const char*>(bk + 8 * kQNR), _MM_HINT_T0);
    const __m256i b0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(bk));
    const __m256i b1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(bk + 8));
#pragma GCC unroll 4
    for (int m = 0; m < R; ++m) {
      const __m256i av = _mm256_set1_epi32(int(a[m]));
      c[m][0] = add_quad_products(c[m][0], b0, av, ones);
      c[m][1] = add_quad_products(c[m][1], b1, av, ones);
    }
    a += kQMR;
    bk += kQNR;
  }
  for (int64_t j = 0; j < steps; ++j, rest += 2 * R) {
#pragma GCC unroll 4
    for (int m = 0; m < R; ++m) {
      const uint32_t* bq = b + (int64_t(rest[2 * m]) - k0) * kQNR;
      const __m256i av = _mm256_set1_epi32(int(rest[2 * m + 1]));
      c[m][0] = add_quad_products(c[m][0], _mm256_load_si256(reinterpret_cast<const __m256i*>(bq)), av, ones);
      c[m][1] = add_quad_products(c[m][1], _mm256_load_si256(reinterpret_cast<const __m256i*>(bq + 8)), av, ones);
    }
  }
#pragma GCC unroll 4
  for (int m = 0; m < R; ++m)
    for (int v = 0; v < 2; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + m * kQNR + v * 8), c[m][v]);
}

NXRT_AVX2 void tile_quads_avx2(int64_t kcq, const uint32_t* a, const uint32_t* b, int32_t* acc, bool load,
                               const uint32_t* rest, int64_t steps_a, int64_t steps_b, int64_t k0) {
  static_assert(kQMR == 6 && kQRestRowsA == 4);
  rows_quads<4>(kcq, a, b, acc, load, rest, steps_a, k0);
  rows_quads<2>(kcq, a + 4, b, acc + 4 * kQNR, load, rest + 8 * steps_a, steps_b, k0);
}

// NC columns of the slice against the tile: a vector holds the 6 rows' quads of one k quad
// (lanes 6, 7 masked off), each column's quad of x broadcast. The rest: per step of a row
// group, its rows' words and each row's x quad read at its own quad index.
template <int NC>
NXRT_AVX2 void narrow_quads(int64_t kcq, const uint32_t* a, const uint32_t* b, int32_t* acc, bool load,
                            const uint32_t* rest, int64_t steps_a, int64_t steps_b, int64_t k0) {
  static_assert(kQMR == 6);
  const __m256i ones = _mm256_set1_epi16(1), rows = avx2_lane_mask(kQMR);
  __m256i c[NC];
  for (int j = 0; j < NC; ++j)
    c[j] = load ? _mm256_setr_epi32(acc[j], acc[kQNR + j], acc[2 * kQNR + j], acc[3 * kQNR + j], acc[4 * kQNR + j],
                                    acc[5 * kQNR + j], 0, 0)
                : _mm256_setzero_si256();
  const uint32_t* bk = b;
#pragma GCC unroll 2
  for (int64_t k = 0; k < kcq; ++k) {
    const __m256i av = _mm256_maskload_epi32(reinterpret_cast<const int*>(a), rows);
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j)
      c[j] = add_quad_products(c[j], _mm256_set1_epi32(int(bk[j])), av, ones);
    a += kQMR;
    bk += kQNR;
  }
  // The rest: rows 0-3 (lanes 4, 5 zero), then rows 4-5 (lanes 0-3 zero).
  for (int g = 0; g < 2; ++g) {
    const int64_t steps = g ? steps_b : steps_a, r0 = g ? kQRestRowsA : 0, rows_in = g ? kQMR - kQRestRowsA : kQRestRowsA;
    for (int64_t s = 0; s < steps; ++s, rest += 2 * rows_in) {
      alignas(32) uint32_t w[8] = {}, xq[NC][8] = {};
      for (int64_t i = 0; i < rows_in; ++i) {
        w[r0 + i] = rest[2 * i + 1];
        const uint32_t* x = b + (int64_t(rest[2 * i]) - k0) * kQNR;
        for (int j = 0; j < NC; ++j) xq[j][r0 + i] = x[j];
      }
      const __m256i av = _mm256_load_si256(reinterpret_cast<const __m256i*>(w));
#pragma GCC unroll 4
      for (int j = 0; j < NC; ++j) {
        c[j] = add_quad_products(c[j], _mm256_load_si256(reinterpret_cast<const __m256i*>(xq[j])), av, ones);
      }
    }
  }
  alignas(32) int32_t out[8];
  for (int j = 0; j < NC; ++j) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(out), c[j]);
    for (int m = 0; m < kQMR; ++m) acc[m * kQNR + j] = out[m];
  }
}

NXRT_AVX2 void tile_quads_narrow_avx2(int64_t kcq, const uint32_t* a, const uint32_t* b, int32_t* acc, bool load,
                                      const uint32_t* rest, int64_t steps_a, int64_t steps_b, int64_t k0, int64_t cols) {
  static_assert(kQNarrow == 4);
  switch (cols) {
    case 1: narrow_quads<1>(kcq, a, b, acc, load, rest, steps_a, steps_b, k0); break;
    case 2: narrow_quads<2>(kcq, a, b, acc, load, rest, steps_a, steps_b, k0); break;
    case 3: narrow_quads<3>(kcq, a, b, acc, load, rest, steps_a, steps_b, k0); break;
    default: narrow_quads<4>(kcq, a, b, acc, load, rest, steps_a, steps_b, k0); break;
  }
}

// One tap row's 16 columns: 16 bytes at stride 1, or the even bytes of 32 at stride 2.
template <bool S2>
NXRT_AVX2 inline __m128i load16(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if (!S2) return v;
  const __m128i ff = _mm_set1_epi16(0xff);
  return _mm_packus_epi16(_mm_and_si128(v, ff), _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)), ff));
}

// As pack_runs_body (gemm_int8_avx2.cpp) on bytes: each run's vector loaded from its column 0
// address and blended in, so loads span up to 30 bytes before and 31 after the runs' taps.
template <bool S2>
NXRT_AVX2 void pack_quads_body(const uint8_t* base, const int64_t* koff, int64_t K, const QPanelRuns& runs, int64_t q0,
                               int64_t qc, uint32_t* dst) {
  __m128i mask[kQNR];
  int64_t at[kQNR];
  const __m128i iota = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int r = 0; r < runs.n; ++r) {
    const int c0 = runs.col[r], c1 = runs.col[r + 1];
    mask[r] = _mm_andnot_si128(_mm_cmpgt_epi8(_mm_set1_epi8(char(c0)), iota), _mm_cmpgt_epi8(_mm_set1_epi8(char(c1)), iota));
    at[r] = runs.off[r] - int64_t(c0) * (S2 ? 2 : 1);
  }
  const bool whole = runs.n == 1 && runs.col[1] == kQNR;
  for (int64_t i = 0; i < qc; ++i) {
    const int64_t k = 4 * (q0 + i);
    __m128i row[4];
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      row[t] = _mm_setzero_si128();
      if (k + t >= K) continue;  // taps past K: 0
      const uint8_t* src = base + koff[k + t];
      if (whole) row[t] = load16<S2>(src + at[0]);
      else
        for (int r = 0; r < runs.n; ++r) row[t] = _mm_blendv_epi8(row[t], load16<S2>(src + at[r]), mask[r]);
    }
    store_byte_quads(row, dst + i * kQNR);
  }
}

NXRT_AVX2 void pack_quads_avx2(const uint8_t* base, const int64_t* koff, int64_t K, const QPanelRuns& runs, int64_t q0,
                               int64_t qc, uint32_t* dst) {
  if (runs.stride == 1) pack_quads_body<false>(base, koff, K, runs, q0, qc, dst);
  else if (runs.stride == 2) pack_quads_body<true>(base, koff, K, runs, q0, qc, dst);
  else q_pack_quads_generic()(base, koff, K, runs, q0, qc, dst);
}

// The 4 bytes of each word summed: vpmaddubsw by ones (pairs), vpmaddwd by ones (quads).
NXRT_AVX2 void quad_col_sums_avx2(int64_t kc, const uint32_t* b, int32_t* sums) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  __m256i s0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums));
  __m256i s1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + 8));
  for (int64_t i = 0; i < kc; ++i, b += kQNR) {
    const __m256i v0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i v1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 8));
    s0 = add_quad_products(s0, v0, ones8, ones16);
    s1 = add_quad_products(s1, v1, ones8, ones16);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums), s0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + 8), s1);
}

bool runs_avx2_quads() {
  static const bool ok = active_isa() >= Isa::avx2 && !q_tile_wide_dpbusd(1, true);
  return ok;
}

}  // namespace

QTileRestFn q_tile_quads_avx2() { return runs_avx2_quads() ? &tile_quads_avx2 : nullptr; }
QTileRestNarrowFn q_tile_quads_narrow_avx2() { return runs_avx2_quads() ? &tile_quads_narrow_avx2 : nullptr; }
QPackQuadsFn q_pack_quads_avx2() { return runs_avx2_quads() ? &pack_quads_avx2 : nullptr; }
QQuadColSumsFn q_quad_col_sums_avx2() { return runs_avx2_quads() ? &quad_col_sums_avx2 : nullptr; }

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
QTileRestFn q_tile_quads_avx2() { return nullptr; }
QTileRestNarrowFn q_tile_quads_narrow_avx2() { return nullptr; }
QPackQuadsFn q_pack_quads_avx2() { return nullptr; }
QQuadColSumsFn q_quad_col_sums_avx2() { return nullptr; }
}  // namespace nxrt::cpu
#endif
