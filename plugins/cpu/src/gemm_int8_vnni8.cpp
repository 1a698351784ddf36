// The u8 x s8 quad path of the 8-bit GEMM (gemm_int8.hpp): packing of quads (4 consecutive k
// as the 4 bytes of a word) and the AVX-512 VNNI vpdpbusd micro-kernels, 4 u8 x s8 products
// summed per int32 lane (wrapping, not the saturating vpdpbusds): 64 multiply-adds per zmm.
// One row tile of 6 against up to kQWide B slices of 16 columns (6 x 64). Target attributes;
// used only when CPUID reports AVX-512 F/BW and VNNI and the ISA is not capped below avx512.
#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "cpu_info.hpp"
#include "gemm_int8.hpp"
#include "simd.hpp"

namespace nxrt::cpu {

template <typename T>
void q_pack_a_quads(const T* a, int64_t lda, int32_t add, int64_t M, int64_t K, uint32_t* dst) {
  // A row's quads are its bytes read as words (little endian); + 128 mod 256 flips bit 7.
  static_assert(std::endian::native == std::endian::little);
  const uint32_t flip = (add & 0xff) == 0x80 ? 0x80808080u : 0u;
  if ((add & 0xff) != 0 && !flip) throw std::invalid_argument("q_pack_a_quads: add must be 0 or +-128");
  const int64_t KQ = q_quads(K), full = K / 4, tiles = q_tiles(M);
  for (int64_t t = 0; t < tiles; ++t) {
    uint32_t* d = dst + t * kQMR * KQ;
    for (int64_t r = 0; r < kQMR; ++r) {
      const int64_t m = t * kQMR + r;
      if (m >= M) {
        for (int64_t q = 0; q < KQ; ++q) d[q * kQMR + r] = 0;
        continue;
      }
      const T* src = a + m * lda;
      for (int64_t q = 0; q < full; ++q) {
        uint32_t w;
        std::memcpy(&w, src + 4 * q, 4);
        d[q * kQMR + r] = w ^ flip;
      }
      if (full < KQ) {
        uint32_t w = 0;
        for (int64_t b = 0; 4 * full + b < K; ++b) w |= uint32_t(uint8_t(int32_t(src[4 * full + b]) + add)) << (8 * b);
        d[full * kQMR + r] = w;
      }
    }
  }
}

template <typename T>
void q_pack_b_quads(const T* b, int64_t ldb, int32_t add, int64_t K, int64_t N, uint32_t* dst) {
  const int64_t KQ = q_quads(K), panels = q_panels(N);
  for (int64_t p = 0; p < panels; ++p) {
    uint32_t* d = dst + p * kQNR * KQ;
    const int64_t n0 = p * kQNR, cols = std::min(kQNR, N - n0);
    for (int64_t q = 0; q < KQ; ++q)
      for (int64_t j = 0; j < kQNR; ++j) {
        uint32_t w = 0;
        if (j < cols)
          for (int64_t i = 0; i < 4 && 4 * q + i < K; ++i)
            w |= uint32_t(uint8_t(int32_t(b[(4 * q + i) * ldb + n0 + j]) + add)) << (8 * i);
        d[q * kQNR + j] = w;
      }
  }
}

#define NXRT_Q_PACK(T)                                                                            \
  template void q_pack_a_quads<T>(const T*, int64_t, int32_t, int64_t, int64_t, uint32_t*);       \
  template void q_pack_b_quads<T>(const T*, int64_t, int32_t, int64_t, int64_t, uint32_t*);
NXRT_Q_PACK(uint8_t)
NXRT_Q_PACK(int8_t)
#undef NXRT_Q_PACK

namespace {

// Any stride, column by column; taps past K and columns past the runs are 0.
void pack_quads_generic(const uint8_t* base, const int64_t* koff, int64_t K, const QPanelRuns& runs, int64_t q0,
                        int64_t qc, uint32_t* dst) {
  for (int64_t i = 0; i < qc; ++i) {
    uint32_t* d = dst + i * kQNR;
    for (int64_t j = 0; j < kQNR; ++j) d[j] = 0;
    for (int b = 0; b < 4; ++b) {
      const int64_t k = 4 * (q0 + i) + b;
      if (k >= K) break;
      const uint8_t* row = base + koff[k];
      for (int r = 0; r < runs.n; ++r)
        for (int j = runs.col[r]; j < runs.col[r + 1]; ++j)
          d[j] |= uint32_t(row[runs.off[r] + int64_t(j - runs.col[r]) * runs.stride]) << (8 * b);
    }
  }
}

void quad_col_sums_generic(int64_t kc, const uint32_t* b, int32_t* sums) {
  for (int64_t i = 0; i < kc; ++i, b += kQNR)
    for (int64_t j = 0; j < kQNR; ++j)
      sums[j] += int32_t((b[j] & 0xff) + (b[j] >> 8 & 0xff) + (b[j] >> 16 & 0xff) + (b[j] >> 24));
}

// Any stride, word by word.
[[maybe_unused]] void pack_channel_quads_generic(const uint8_t* base, const int64_t* koff, int64_t,
                                                 const QPanelRuns& runs, int64_t q0, int64_t qc, uint32_t* dst) {
  for (int64_t i = 0; i < qc; ++i) {
    uint32_t* d = dst + i * kQNR;
    const uint8_t* p = base + koff[4 * (q0 + i)];
    for (int64_t j = 0; j < kQNR; ++j) d[j] = 0;
    for (int r = 0; r < runs.n; ++r)
      for (int j = runs.col[r]; j < runs.col[r + 1]; ++j)
        std::memcpy(d + j, p + 4 * (runs.off[r] + int64_t(j - runs.col[r]) * runs.stride), 4);
  }
}

// q_expand_narrow, word by word.
[[maybe_unused]] void expand_narrow_generic(const uint32_t* slice, int64_t kcq, int cols, uint32_t* bx) {
  const int64_t words = q_narrow_words(kcq);
  for (int c = 0; c < cols; ++c, bx += words)
    for (int64_t i = 0; i < words; ++i) {
      const int64_t q = i / 48 * 8 + i % 48 / 6;
      bx[i] = q < kcq ? slice[q * kQNR + c] : 0u;
    }
}

// q_interleave_channels4, byte by byte.
[[maybe_unused]] void interleave_channels4_generic(const uint8_t* src, int64_t plane, int64_t n, uint8_t flip,
                                                   uint8_t* dst) {
  for (int64_t w = 0; w < n; ++w)
    for (int i = 0; i < 4; ++i) dst[4 * w + i] = uint8_t(src[i * plane + w] ^ flip);
}

}  // namespace

QPackQuadsFn q_pack_quads_generic() { return &pack_quads_generic; }

}  // namespace nxrt::cpu

#if defined(__x86_64__)
// GCC 12's AVX-512 headers pass an "undefined" vector to the masked builtins (see gemm_int8_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace nxrt::cpu {
namespace {

#define NXRT_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

// A_SIGNED: the broadcast A word is the s8 operand, B the u8 vectors; else A is u8 and B s8.
// NV B vectors of one row tile per quad step, b_at(k, j) the j-th: each step loads NV vectors
// and broadcasts 6 A words for 6 NV vpdpbusd. PAIRS: the words are int16 pairs and the
// product vpdpwssd (32 multiply-adds a zmm at vpdpbusd's rate: q_tile_wide_dpwssd).
template <int NV, bool A_SIGNED, typename BAt, bool PAIRS = false>
NXRT_VNNI __attribute__((always_inline)) inline void tile_wide_body(int64_t kcq, const uint32_t* a, BAt&& b_at,
                                                                    int32_t* acc, bool load, const uint32_t* a_next) {
  __m512i c[kQMR][NV];
#pragma GCC unroll 6
  for (int m = 0; m < kQMR; ++m)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      c[m][j] = load ? _mm512_loadu_si512(acc + (j * kQMR + m) * kQNR) : _mm512_setzero_si512();
  for (int64_t k = 0; k < kcq; ++k) {
    _mm_prefetch(reinterpret_cast<const char*>(a_next + k * kQMR), _MM_HINT_T0);
    __m512i bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) bv[j] = b_at(k, j);
#pragma GCC unroll 6
    for (int m = 0; m < kQMR; ++m) {
      const __m512i av = _mm512_set1_epi32(int(a[m]));
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j)
        c[m][j] = PAIRS      ? _mm512_dpwssd_epi32(c[m][j], bv[j], av)
                  : A_SIGNED ? _mm512_dpbusd_epi32(c[m][j], bv[j], av)
                             : _mm512_dpbusd_epi32(c[m][j], av, bv[j]);
    }
    a += kQMR;
  }
#pragma GCC unroll 6
  for (int m = 0; m < kQMR; ++m)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) _mm512_storeu_si512(acc + (j * kQMR + m) * kQNR, c[m][j]);
}

// NV packed B slices ([kcq][kQNR] words each).
struct PackedSlices {
  const uint32_t* const* b;
  NXRT_VNNI __m512i operator()(int64_t k, int j) const { return _mm512_load_si512(b[j] + k * kQNR); }
};
template <int NV, bool A_SIGNED>
NXRT_VNNI void tile_wide(int64_t kcq, const uint32_t* a, const uint32_t* const* b, int32_t* acc, bool load,
                         const uint32_t* a_next) {
  const uint32_t* bp[NV];
  for (int j = 0; j < NV; ++j) bp[j] = b[j];
  tile_wide_body<NV, A_SIGNED>(kcq, a, PackedSlices{bp}, acc, load, a_next);
}

// One B slice (the 8-bit Winograd on 14x14 maps: 16 tiles): per pair step one vector load
// against 6 broadcasts. In L1 (a harness of 128 pairs): the generic body 0.212 ns a vpdpwssd
// (2+ slices 0.140), 12 accumulators (even and odd pairs apart, summed at the end: wrapping
// int32, the same sums) 0.215, with the broadcasts folded into vpdpwssd's memory operand 0.207
// (standalone tests), both 0.164 here. GCC keeps the broadcasts apart, hence the asm.
#define NXRT_DPW(ACC, B, I) \
  __asm__("vpdpwssd %[w]%{1to16%}, %[b], %[c]" : [c] "+v"(ACC) : [b] "v"(B), [w] "m"(a[I]))
// The 6 rows of one pair step: A words I .. I + 5 against B vector B.
#define NXRT_DPW_ROWS(A0, A1, A2, A3, A4, A5, B, I) \
  do {                                              \
    NXRT_DPW(A0, B, (I));                           \
    NXRT_DPW(A1, B, (I) + 1);                       \
    NXRT_DPW(A2, B, (I) + 2);                       \
    NXRT_DPW(A3, B, (I) + 3);                       \
    NXRT_DPW(A4, B, (I) + 4);                       \
    NXRT_DPW(A5, B, (I) + 5);                       \
  } while (0)
NXRT_VNNI void tile_pairs_one(int64_t kcp, const uint32_t* a, const uint32_t* b, int32_t* acc, bool load,
                              const uint32_t* a_next) {
  __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  __m512i d0 = c0, d1 = c0, d2 = c0, d3 = c0, d4 = c0, d5 = c0;
  if (load) {
    c0 = _mm512_loadu_si512(acc);
    c1 = _mm512_loadu_si512(acc + kQNR);
    c2 = _mm512_loadu_si512(acc + 2 * kQNR);
    c3 = _mm512_loadu_si512(acc + 3 * kQNR);
    c4 = _mm512_loadu_si512(acc + 4 * kQNR);
    c5 = _mm512_loadu_si512(acc + 5 * kQNR);
  }
  int64_t k = 0;
  for (; k + 1 < kcp; k += 2) {
    _mm_prefetch(reinterpret_cast<const char*>(a_next + k * kQMR), _MM_HINT_T0);
    const __m512i b0 = _mm512_load_si512(b + k * kQNR), b1 = _mm512_load_si512(b + (k + 1) * kQNR);
    NXRT_DPW_ROWS(c0, c1, c2, c3, c4, c5, b0, k * kQMR);
    NXRT_DPW_ROWS(d0, d1, d2, d3, d4, d5, b1, (k + 1) * kQMR);
  }
  if (k < kcp) {
    const __m512i b0 = _mm512_load_si512(b + k * kQNR);
    NXRT_DPW_ROWS(c0, c1, c2, c3, c4, c5, b0, k * kQMR);
  }
  _mm512_storeu_si512(acc, _mm512_add_epi32(c0, d0));
  _mm512_storeu_si512(acc + kQNR, _mm512_add_epi32(c1, d1));
  _mm512_storeu_si512(acc + 2 * kQNR, _mm512_add_epi32(c2, d2));
  _mm512_storeu_si512(acc + 3 * kQNR, _mm512_add_epi32(c3, d3));
  _mm512_storeu_si512(acc + 4 * kQNR, _mm512_add_epi32(c4, d4));
  _mm512_storeu_si512(acc + 5 * kQNR, _mm512_add_epi32(c5, d5));
}
#undef NXRT_DPW_ROWS
#undef NXRT_DPW

template <int NV>
NXRT_VNNI void tile_wide_pairs(int64_t kcp, const uint32_t* a, const uint32_t* const* b, int32_t* acc, bool load,
                               const uint32_t* a_next) {
  if constexpr (NV == 1) {
    tile_pairs_one(kcp, a, b[0], acc, load, a_next);
  } else {
    const uint32_t* bp[NV];
    for (int j = 0; j < NV; ++j) bp[j] = b[j];
    tile_wide_body<NV, true, PackedSlices, true>(kcp, a, PackedSlices{bp}, acc, load, a_next);
  }
}

// NV x 16 consecutive words of the source at b + boff[k] (q_tile_direct_dpbusd).
struct WordsInPlace {
  const uint32_t* b;
  const int64_t* boff;
  NXRT_VNNI __m512i operator()(int64_t k, int j) const { return _mm512_loadu_si512(b + boff[k] + j * kQNR); }
};
template <int NV>
NXRT_VNNI void tile_direct(int64_t kcq, const uint32_t* a, const uint32_t* b, const int64_t* boff, int32_t* acc,
                           bool load, const uint32_t* a_next) {
  tile_wide_body<NV, true>(kcq, a, WordsInPlace{b, boff}, acc, load, a_next);
}

#define NXRT_BW __attribute__((target("avx512f,avx512bw,avx512vl")))

// One tap row's 16 columns (0 past the runs); NR: the run count when 1 or 2, else 0 (n).
template <bool S2, int NR>
NXRT_BW __attribute__((always_inline)) inline __m128i quad_row(const uint8_t* src, int n, const __mmask32* mask,
                                                               const int64_t* at) {
  const int runs = NR ? NR : n;
  if (!S2) {
    __m128i v = _mm_maskz_loadu_epi8(__mmask16(mask[0]), src + at[0]);
    for (int r = 1; r < runs; ++r) v = _mm_or_si128(v, _mm_maskz_loadu_epi8(__mmask16(mask[r]), src + at[r]));
    return v;
  }
  __m256i w = _mm256_maskz_loadu_epi8(mask[0], src + at[0]);
  for (int r = 1; r < runs; ++r) w = _mm256_or_si256(w, _mm256_maskz_loadu_epi8(mask[r], src + at[r]));
  return _mm256_cvtepi16_epi8(w);  // the low (even) byte of each word
}

// Four tap rows interleaved into 16 quads per k quad.
template <bool S2, int NR>
NXRT_BW void pack_quads_runs(const uint8_t* base, const int64_t* koff, int64_t K, int n, const __mmask32* mask,
                             const int64_t* at, int64_t q0, int64_t qc, uint32_t* dst) {
  for (int64_t i = 0; i < qc; ++i) {
    const int64_t k = 4 * (q0 + i);
    __m128i r[4];
#pragma GCC unroll 4
    for (int b = 0; b < 4; ++b)  // taps past K: 0
      r[b] = k + b < K ? quad_row<S2, NR>(base + koff[k + b], n, mask, at) : _mm_setzero_si128();
    store_byte_quads(r, dst + i * kQNR);
  }
}

// Runs at stride 1 (16 bytes by masked loads) or 2 (the even bytes of 32, by vpmovwb);
// masked-off lanes are not read.
NXRT_BW void pack_quads_avx512(const uint8_t* base, const int64_t* koff, int64_t K, const QPanelRuns& runs, int64_t q0,
                               int64_t qc, uint32_t* dst) {
  if ((runs.stride != 1 && runs.stride != 2) || runs.n == 0) {
    pack_quads_generic(base, koff, K, runs, q0, qc, dst);
    return;
  }
  const bool s2 = runs.stride == 2;
  __mmask32 mask[kQNR];
  int64_t at[kQNR];
  q_run_masks(runs, mask, at);
  const int n = runs.n;
  if (s2) {
    if (n == 1) pack_quads_runs<true, 1>(base, koff, K, n, mask, at, q0, qc, dst);
    else if (n == 2) pack_quads_runs<true, 2>(base, koff, K, n, mask, at, q0, qc, dst);
    else pack_quads_runs<true, 0>(base, koff, K, n, mask, at, q0, qc, dst);
  } else {
    if (n == 1) pack_quads_runs<false, 1>(base, koff, K, n, mask, at, q0, qc, dst);
    else if (n == 2) pack_quads_runs<false, 2>(base, koff, K, n, mask, at, q0, qc, dst);
    else pack_quads_runs<false, 0>(base, koff, K, n, mask, at, q0, qc, dst);
  }
}

// vpdpbusd against ones: the 4 bytes of each word summed into its lane.
NXRT_VNNI void quad_col_sums_vnni(int64_t kc, const uint32_t* b, int32_t* sums) {
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i s = _mm512_loadu_si512(sums);
  for (int64_t i = 0; i < kc; ++i) s = _mm512_dpbusd_epi32(s, _mm512_loadu_si512(b + i * kQNR), ones);
  _mm512_storeu_si512(sums, s);
}

// Per group of 8 quads: the A tile's 48 words as 3 vectors (masked past kcq: the next tile's
// words are not read) against each column's 3 expanded vectors; at the end lane i of the 3
// accumulators (word 16 v + i of the group) belongs to row (16 v + i) % 6.
template <bool A_SIGNED, int NC>
NXRT_VNNI void tile_narrow_cols(int64_t kcq, const uint32_t* a, const uint32_t* bx, int32_t* lanes, bool load,
                                int32_t* acc) {
  __m512i c[NC][3];
  for (int j = 0; j < NC; ++j)
    for (int v = 0; v < 3; ++v) c[j][v] = load ? _mm512_load_si512(lanes + 48 * j + 16 * v) : _mm512_setzero_si512();
  const int64_t groups = (kcq + 7) / 8, words = q_narrow_words(kcq), tail = kcq * kQMR - (groups - 1) * 48;
  for (int64_t g = 0; g < groups; ++g) {
    __m512i av[3];
    if (g + 1 < groups) {
      for (int v = 0; v < 3; ++v) av[v] = _mm512_loadu_si512(a + g * 48 + 16 * v);
    } else {
      for (int v = 0; v < 3; ++v) {
        const int64_t n = std::clamp<int64_t>(tail - 16 * v, 0, 16);
        av[v] = _mm512_maskz_loadu_epi32(__mmask16(n >= 16 ? 0xffff : (1u << n) - 1u), a + g * 48 + 16 * v);
      }
    }
    const uint32_t* b = bx + g * 48;
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j)
#pragma GCC unroll 3
      for (int v = 0; v < 3; ++v) {
        const __m512i bv = _mm512_load_si512(b + j * words + 16 * v);
        c[j][v] = A_SIGNED ? _mm512_dpbusd_epi32(c[j][v], bv, av[v]) : _mm512_dpbusd_epi32(c[j][v], av[v], bv);
      }
  }
  for (int j = 0; j < NC; ++j)
    for (int v = 0; v < 3; ++v) _mm512_store_si512(lanes + 48 * j + 16 * v, c[j][v]);
  if (!acc) return;
  for (int j = 0; j < NC; ++j)
    for (int r = 0; r < kQMR; ++r) {
      uint32_t sum = 0;
      for (int i = r; i < 48; i += kQMR) sum += uint32_t(lanes[48 * j + i]);
      acc[r * kQNR + j] = int32_t(sum);
    }
}

template <bool A_SIGNED>
void tile_narrow(int64_t kcq, const uint32_t* a, const uint32_t* bx, int cols, int32_t* lanes, bool load,
                 int32_t* acc) {
  static_assert(kQNarrowWide == 4);
  switch (cols) {
    case 1: tile_narrow_cols<A_SIGNED, 1>(kcq, a, bx, lanes, load, acc); break;
    case 2: tile_narrow_cols<A_SIGNED, 2>(kcq, a, bx, lanes, load, acc); break;
    case 3: tile_narrow_cols<A_SIGNED, 3>(kcq, a, bx, lanes, load, acc); break;
    default: tile_narrow_cols<A_SIGNED, 4>(kcq, a, bx, lanes, load, acc); break;
  }
}

// Per group of 8 quads and column: the 8 words gathered (stride kQNR), spread over 48 lanes.
NXRT_BW void expand_narrow_avx512(const uint32_t* slice, int64_t kcq, int cols, uint32_t* bx) {
  const int64_t groups = (kcq + 7) / 8, words = q_narrow_words(kcq);
  const __m256i rows = _mm256_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112);
  const __m512i spread[3] = {_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2),
                             _mm512_setr_epi32(2, 2, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 5, 5),
                             _mm512_setr_epi32(5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7)};
  for (int c = 0; c < cols; ++c, bx += words)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t n = std::min<int64_t>(8, kcq - 8 * g);
      const __m256i x = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), __mmask8((1u << n) - 1u), rows,
                                                     reinterpret_cast<const int*>(slice + 8 * g * kQNR + c), 4);
      const __m512i x8 = _mm512_castsi256_si512(x);
      for (int v = 0; v < 3; ++v) _mm512_store_si512(bx + g * 48 + 16 * v, _mm512_permutexvar_epi32(spread[v], x8));
    }
}

// 16 columns at a time (the last ones by masked loads) interleaved by store_byte_quads.
NXRT_BW void interleave_channels4_avx512(const uint8_t* src, int64_t plane, int64_t n, uint8_t flip, uint8_t* dst) {
  const __m128i f = _mm_set1_epi8(char(flip));
  for (int64_t w = 0; w < n; w += 16) {
    const __mmask16 m = n - w >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - w)) - 1u);
    __m128i r[4];
    // (Whole vectors by plain loads: on Zen 5 the masked form costs more where x is not in L1.)
    for (int i = 0; i < 4; ++i)
      r[i] = _mm_xor_si128(m == 0xffff ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * plane + w))
                                       : _mm_maskz_loadu_epi8(m, src + i * plane + w),
                           f);
    if (m == 0xffff) {
      store_byte_quads(r, reinterpret_cast<uint32_t*>(dst + 4 * w));
    } else {
      alignas(16) uint32_t quads[16];
      store_byte_quads(r, quads);
      std::memcpy(dst + 4 * w, quads, size_t(4 * (n - w)));
    }
  }
}

// Channel quads at stride 1 (16 words by a masked load per run) or 2 (the even words of 32,
// by a two-source permute); masked-off lanes are not read.
NXRT_BW void pack_channel_quads_avx512(const uint8_t* base, const int64_t* koff, int64_t K, const QPanelRuns& runs,
                                       int64_t q0, int64_t qc, uint32_t* dst) {
  if ((runs.stride != 1 && runs.stride != 2) || runs.n == 0) {
    pack_channel_quads_generic(base, koff, K, runs, q0, qc, dst);
    return;
  }
  const bool s2 = runs.stride == 2;
  const int n = runs.n;
  __mmask32 mask[kQNR];
  int64_t at[kQNR];  // bytes
  for (int r = 0; r < n; ++r) {
    const int c0 = runs.col[r], c1 = runs.col[r + 1];
    mask[r] = s2 ? __mmask32(((1ull << (2 * c1)) - (1ull << (2 * c0))) & 0x55555555u)
                 : __mmask32(((1u << (c1 - c0)) - 1u) << c0);
    at[r] = 4 * (runs.off[r] - int64_t(c0) * runs.stride);
  }
  const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  for (int64_t i = 0; i < qc; ++i) {
    const uint8_t* p = base + koff[4 * (q0 + i)];
    __m512i v;
    if (!s2) {
      v = _mm512_maskz_loadu_epi32(__mmask16(mask[0]), p + at[0]);
      for (int r = 1; r < n; ++r) v = _mm512_or_si512(v, _mm512_maskz_loadu_epi32(__mmask16(mask[r]), p + at[r]));
    } else {
      __m512i lo = _mm512_maskz_loadu_epi32(__mmask16(mask[0]), p + at[0]);
      __m512i hi = _mm512_maskz_loadu_epi32(__mmask16(mask[0] >> 16), p + at[0] + 64);
      for (int r = 1; r < n; ++r) {
        lo = _mm512_or_si512(lo, _mm512_maskz_loadu_epi32(__mmask16(mask[r]), p + at[r]));
        hi = _mm512_or_si512(hi, _mm512_maskz_loadu_epi32(__mmask16(mask[r] >> 16), p + at[r] + 64));
      }
      v = _mm512_permutex2var_epi32(lo, evens, hi);
    }
    _mm512_store_si512(dst + i * kQNR, v);
  }
}

bool has_vnni() {
  static const bool ok = avx512bw_active() && cpu_info().avx512vnni;
  return ok;
}

}  // namespace

QTileWideFn q_tile_wide_dpbusd(int nv, bool a_signed) {
  static constexpr QTileWideFn by_count[2][5] = {
      {nullptr, &tile_wide<1, false>, &tile_wide<2, false>, &tile_wide<3, false>, &tile_wide<4, false>},
      {nullptr, &tile_wide<1, true>, &tile_wide<2, true>, &tile_wide<3, true>, &tile_wide<4, true>}};
  static_assert(kQWide == 4);
  return has_vnni() ? by_count[a_signed][nv] : nullptr;
}

QTileWideFn q_tile_wide_dpwssd(int nv) {
  static constexpr QTileWideFn by_count[5] = {nullptr, &tile_wide_pairs<1>, &tile_wide_pairs<2>, &tile_wide_pairs<3>,
                                              &tile_wide_pairs<4>};
  return has_vnni() ? by_count[nv] : nullptr;
}

QTileDirectFn q_tile_direct_dpbusd(int nv) {
  static constexpr QTileDirectFn by_count[5] = {nullptr, &tile_direct<1>, &tile_direct<2>, &tile_direct<3>,
                                                &tile_direct<4>};
  return has_vnni() ? by_count[nv] : nullptr;
}

QTileNarrowFn q_tile_narrow_dpbusd(bool a_signed) {
  if (!has_vnni()) return nullptr;
  return a_signed ? &tile_narrow<true> : &tile_narrow<false>;
}

QPackQuadsFn q_pack_quads_active() {
  if (has_vnni()) return &pack_quads_avx512;
  const QPackQuadsFn f = q_pack_quads_avx2();
  return f ? f : &pack_quads_generic;
}
bool q_pack_quads_reads_slack() { return !has_vnni() && q_pack_quads_avx2(); }
QPackQuadsFn q_pack_channel_quads() { return has_vnni() ? &pack_channel_quads_avx512 : nullptr; }
// The channel quads run only where the vpdpbusd kernels do (AVX-512 BW among them); the
// generic loops keep these two defined for any caller.
void q_interleave_channels4(const uint8_t* src, int64_t plane, int64_t n, uint8_t flip, uint8_t* dst) {
  static const bool bw = cpu_info().avx512bw;
  if (bw) interleave_channels4_avx512(src, plane, n, flip, dst);
  else interleave_channels4_generic(src, plane, n, flip, dst);
}
void q_expand_narrow(const uint32_t* slice, int64_t kcq, int cols, uint32_t* bx) {
  static const bool bw = cpu_info().avx512bw;
  if (bw) expand_narrow_avx512(slice, kcq, cols, bx);
  else expand_narrow_generic(slice, kcq, cols, bx);
}
QQuadColSumsFn q_quad_col_sums() {
  if (has_vnni()) return &quad_col_sums_vnni;
  const QQuadColSumsFn f = q_quad_col_sums_avx2();
  return f ? f : &quad_col_sums_generic;
}

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
QTileWideFn q_tile_wide_dpbusd(int, bool) { return nullptr; }
QTileDirectFn q_tile_direct_dpbusd(int) { return nullptr; }
QTileWideFn q_tile_wide_dpwssd(int) { return nullptr; }
QTileNarrowFn q_tile_narrow_dpbusd(bool) { return nullptr; }
void q_expand_narrow(const uint32_t* slice, int64_t kcq, int cols, uint32_t* bx) {
  expand_narrow_generic(slice, kcq, cols, bx);
}
QPackQuadsFn q_pack_quads_active() { return q_pack_quads_generic(); }
bool q_pack_quads_reads_slack() { return false; }
QPackQuadsFn q_pack_channel_quads() { return nullptr; }
void q_interleave_channels4(const uint8_t* src, int64_t plane, int64_t n, uint8_t flip, uint8_t* dst) {
  interleave_channels4_generic(src, plane, n, flip, dst);
}
QQuadColSumsFn q_quad_col_sums() { return &quad_col_sums_generic; }
}  // namespace nxrt::cpu
#endif
