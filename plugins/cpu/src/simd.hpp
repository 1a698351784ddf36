// Hot loops written as plain C++ are compiled several times with
// target_clones and the best clone is picked at load time from CPUID (ifunc),
// so they vectorise with AVX-512 on machines that have it while the library
// still runs on baseline x86-64. Below: small AVX2 helpers the kernel files
// share; their target attribute lets AVX2 and AVX-512 functions inline them.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NXRT_CLONES __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
#else
#define NXRT_CLONES
#endif

#include <cstdint>

namespace nxrt::cpu {
// Fetches [p, p + bytes) into the caches ahead of its reads: for runs too short for the
// hardware prefetcher to ramp up on, as a thread's rows of each plane when the threads split
// an input's rows (the 8-bit channel-quad copy of x, the Winograd blocks' input transform).
inline void prefetch_run(const void* p, int64_t bytes) {
  for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(static_cast<const char*>(p) + o, 0, 3);
}
}  // namespace nxrt::cpu

#if defined(__x86_64__)
#include <immintrin.h>

namespace nxrt::cpu {

// Lanes [0, n) of 8 set (all of them for n >= 8), as an AVX2 maskload / maskstore mask.
__attribute__((target("avx2"))) inline __m256i avx2_lane_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Lanes [0, n) of v stored at p (n in 1..8) with plain stores (at most three): a masked store
// (vmaskmovps) is microcoded on AMD's cores; in the depthwise kernels it made a row's edge
// chunks cost ~2.5x the others.
__attribute__((target("avx2"), always_inline)) inline void avx2_store_first(float* p, __m256 v, int64_t n) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
    return;
  }
  __m128 h = _mm256_castps256_ps128(v);
  if (n >= 4) {
    _mm_storeu_ps(p, h);
    h = _mm256_extractf128_ps(v, 1);
    p += 4;
    n -= 4;
  }
  if (n >= 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(p), h);
    h = _mm_movehl_ps(h, h);
    p += 2;
    n -= 2;
  }
  if (n >= 1) _mm_store_ss(p, h);
}

// The lanes of p under m (zero elsewhere), and v's lanes under m stored at p: a plain load or
// store where m is full. On this Zen 5 the masked form of a whole vector costs more where the
// data is not in L1 or the mask is made per access (the 3x3 depthwise kernel's rows, the
// Winograd output transform's rows and residuals: docs/performance.md, twenty-ninth session).
__attribute__((target("avx512f"), always_inline)) inline __m512 avx512_load_lanes(__mmask16 m, const float* p) {
  return m == 0xFFFF ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}
__attribute__((target("avx512f"), always_inline)) inline void avx512_store_lanes(float* p, __mmask16 m, __m512 v) {
  if (m == 0xFFFF) _mm512_storeu_ps(p, v);
  else _mm512_mask_storeu_ps(p, m, v);
}

// In-register 8x8 transpose of floats: r[j] becomes column j.
__attribute__((target("avx2"), always_inline)) inline void avx2_transpose8x8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {
    u[4 * h + 0] = _mm256_shuffle_ps(t[4 * h + 0], t[4 * h + 2], 0x44);
    u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h + 0], t[4 * h + 2], 0xEE);
    u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

// Two rows of 16 int16, v0 and v1, interleaved into 16 32-bit words (v0[j] low, v1[j] high) at
// dst (32-byte aligned): unpacklo/hi pair columns 0-3 | 8-11 and 4-7 | 12-15, the lane permutes
// put them in order.
__attribute__((target("avx2"))) inline void avx2_store_int16_pairs(__m256i v0, __m256i v1, uint32_t* dst) {
  const __m256i lo = _mm256_unpacklo_epi16(v0, v1), hi = _mm256_unpackhi_epi16(v0, v1);
  __m256i* d = reinterpret_cast<__m256i*>(dst);
  _mm256_store_si256(d, _mm256_permute2x128_si256(lo, hi, 0x20));
  _mm256_store_si256(d + 1, _mm256_permute2x128_si256(lo, hi, 0x31));
}

// Four rows of 16 bytes interleaved into 16 words of quads at dst: word j holds byte j of
// row i in its byte i (the 8-bit GEMM's quad panels).
__attribute__((target("avx2"))) inline void store_byte_quads(const __m128i row[4], uint32_t* dst) {
  const __m128i p01l = _mm_unpacklo_epi8(row[0], row[1]), p01h = _mm_unpackhi_epi8(row[0], row[1]);
  const __m128i p23l = _mm_unpacklo_epi8(row[2], row[3]), p23h = _mm_unpackhi_epi8(row[2], row[3]);
  __m128i* d = reinterpret_cast<__m128i*>(dst);
  _mm_storeu_si128(d, _mm_unpacklo_epi16(p01l, p23l));
  _mm_storeu_si128(d + 1, _mm_unpackhi_epi16(p01l, p23l));
  _mm_storeu_si128(d + 2, _mm_unpacklo_epi16(p01h, p23h));
  _mm_storeu_si128(d + 3, _mm_unpackhi_epi16(p01h, p23h));
}

// The low byte of each of v's 16 int32 lanes to dst's lanes in m. vpmovdb's memory form is
// slow on AMD (Zen 4/5: microcoded, ~20% of an int8 conv's store), so the bytes go through a
// register the compiler may not fold into it, and a full vector takes a plain store.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void store_low_bytes(void* dst, __mmask16 m, __m512i v) {
  __m128i b = _mm512_cvtepi32_epi8(v);
  __asm__("" : "+v"(b));
  if (m == 0xffff) _mm_storeu_si128(static_cast<__m128i*>(dst), b);
  else _mm_mask_storeu_epi8(dst, m, b);
}

}  // namespace nxrt::cpu
#endif
