// AVX2 kernels of the 8-bit GEMM (gemm_int8.hpp): the 6 x 16 micro-kernel (12 int32
// accumulators, 2 B vectors, one broadcast A pair per row; vpmaddwd is exact, vpmaddubsw would
// saturate) and the vectorised QOutput store. The store does the scalar store's operations in
// the same order and precision (double for the scale, round half to even by vroundpd, float
// bias added in float), so the results are bit-identical. Compiled with a target attribute
// and only called after CPUID reports AVX2.
#include "gemm_int8.hpp"
#include "simd.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>
#include <limits>

namespace nxrt::cpu {
namespace {

#define NXRT_AVX2 __attribute__((target("avx2,fma")))

NXRT_AVX2 void tile_avx2(int64_t kcp, const uint32_t* a, const uint32_t* b, int32_t* acc, bool load) {
  __m256i c[kQMR][2];
#pragma GCC unroll 6
  for (int m = 0; m < kQMR; ++m)
    for (int v = 0; v < 2; ++v)
      c[m][v] = load ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + m * kQNR + v * 8)) : _mm256_setzero_si256();
#pragma GCC unroll 2
  for (int64_t k = 0; k < kcp; ++k) {
    // Prepacked weights stream from memory on their first pass.
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kQNR), _MM_HINT_T0);
    const __m256i b0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 8));
#pragma GCC unroll 6
    for (int m = 0; m < kQMR; ++m) {
      const __m256i av = _mm256_set1_epi32(int(a[m]));
      c[m][0] = _mm256_add_epi32(c[m][0], _mm256_madd_epi16(av, b0));
      c[m][1] = _mm256_add_epi32(c[m][1], _mm256_madd_epi16(av, b1));
    }
    a += kQMR;
    b += kQNR;
  }
#pragma GCC unroll 6
  for (int m = 0; m < kQMR; ++m)
    for (int v = 0; v < 2; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + m * kQNR + v * 8), c[m][v]);
}

// 16 int16 from p at stride 1, or (s2) the even ones of 32.
template <bool S2>
NXRT_AVX2 inline __m256i load16(const int16_t* p) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if (!S2) return a;
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
  // The even int16 of each 32-bit lane sign-extended, packed back (exact), lanes put in order.
  const __m256i ae = _mm256_srai_epi32(_mm256_slli_epi32(a, 16), 16), be = _mm256_srai_epi32(_mm256_slli_epi32(b, 16), 16);
  return _mm256_permute4x64_epi64(_mm256_packs_epi32(ae, be), 0xD8);
}

// Each run's 16 (stride 1) or 32 (stride 2) int16 loaded from the run's first column back to
// the panel's column 0, its columns blended in. The loads span up to 30 elements before and 31
// after the taps the runs cover: the source's slack (QPackRunsFn). No AVX2 masked 16-bit loads.
template <bool S2>
NXRT_AVX2 void pack_runs_body(const int16_t* base, const int64_t* koff, int64_t K, const QPanelRuns& runs, int64_t k0,
                              int64_t kc, uint32_t* dst) {
  __m256i mask[kQNR];
  int64_t at[kQNR];
  const __m256i iota = _mm256_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int r = 0; r < runs.n; ++r) {
    const int c0 = runs.col[r], c1 = runs.col[r + 1];
    mask[r] = _mm256_andnot_si256(_mm256_cmpgt_epi16(_mm256_set1_epi16(int16_t(c0)), iota),
                                  _mm256_cmpgt_epi16(_mm256_set1_epi16(int16_t(c1)), iota));
    at[r] = runs.off[r] - int64_t(c0) * (S2 ? 2 : 1);
  }
  const bool whole = runs.n == 1 && runs.col[1] == kQNR;  // one run over the panel: no blend
  for (int64_t i = 0; i < kc; ++i) {
    const int64_t ka = 2 * (k0 + i);
    const int16_t* r0 = base + koff[ka];
    const int16_t* r1 = ka + 1 < K ? base + koff[ka + 1] : nullptr;
    __m256i v0, v1 = _mm256_setzero_si256();
    if (whole) {
      v0 = load16<S2>(r0 + at[0]);
      if (r1) v1 = load16<S2>(r1 + at[0]);
    } else {
      v0 = _mm256_setzero_si256();
      for (int r = 0; r < runs.n; ++r) {
        v0 = _mm256_blendv_epi8(v0, load16<S2>(r0 + at[r]), mask[r]);
        if (r1) v1 = _mm256_blendv_epi8(v1, load16<S2>(r1 + at[r]), mask[r]);
      }
    }
    avx2_store_int16_pairs(v0, v1, dst + i * kQNR);  // pairs of k rows (even k low)
  }
}

NXRT_AVX2 void pack_runs_avx2(const int16_t* base, const int64_t* koff, int64_t K, const QPanelRuns& runs, int64_t k0,
                              int64_t kc, uint32_t* dst) {
  if (runs.stride == 2) pack_runs_body<true>(base, koff, K, runs, k0, kc, dst);
  else pack_runs_body<false>(base, koff, K, runs, k0, kc, dst);
}

// Per-channel values of up to 8 lanes: broadcast (by row) or loaded (by column).
struct Chan {
  __m256i bias;
  __m256d scale_lo, scale_hi;
  __m256 fbias;
};

// round_half_even(d) + zp, saturated to [qlo, qhi], then clamped to [lo, hi] (integers in double).
NXRT_AVX2 inline __m256d requant(__m256d d, __m256d zp, __m256d qlo, __m256d qhi, __m256d lo, __m256d hi) {
  d = _mm256_add_pd(_mm256_round_pd(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zp);
  d = _mm256_min_pd(_mm256_max_pd(d, qlo), qhi);
  return _mm256_min_pd(_mm256_max_pd(d, lo), hi);
}

// What the store does with an accumulator: the int32 (I32), the float output (F32), that
// then quantized as QuantizeLinear (QF), or the integer requantization (Q8); a template
// argument, so the store's loops test nothing per vector (y's char stores may alias the
// epilogue, so its fields would be loaded and tested again after every store).
enum class QMode { I32, F32, QF, Q8 };

// The epilogue's per-tensor values, broadcast once per store.
struct StoreConsts {
  __m256 flo, fhi, q_scale, q_zp, q_lo, q_hi;
  __m256d zp, qlo, qhi, lo, hi;
  bool float_bias;
};

NXRT_AVX2 inline StoreConsts store_consts(const QEpilogue& e) {
  const bool u8 = e.type == QType::U8;
  StoreConsts k;
  k.flo = _mm256_set1_ps(e.flo);
  k.fhi = _mm256_set1_ps(e.fhi);
  k.q_scale = _mm256_set1_ps(e.q_scale);
  k.q_zp = _mm256_set1_ps(float(e.zero_point));
  k.q_lo = _mm256_set1_ps(u8 ? 0.f : -128.f);
  k.q_hi = _mm256_set1_ps(u8 ? 255.f : 127.f);
  k.zp = _mm256_set1_pd(double(e.zero_point));
  k.qlo = _mm256_set1_pd(u8 ? 0.0 : -128.0);
  k.qhi = _mm256_set1_pd(u8 ? 255.0 : 127.0);
  k.lo = _mm256_set1_pd(double(e.lo));
  k.hi = _mm256_set1_pd(double(e.hi));
  k.float_bias = !e.float_bias.empty();
  return k;
}

// n (1..8) bytes of b's low 8 to yp.
NXRT_AVX2 inline void store_bytes(__m128i b, int64_t n, char* yp) {
  if (n == 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(yp), b);
    return;
  }
  alignas(16) char tmp[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(tmp), b);
  std::memcpy(yp, tmp, size_t(n));
}

// 8 accumulators (n valid) through the epilogue to y + at (elements); U8: y is uint8 (else int8).
template <QMode M, bool U8>
NXRT_AVX2 inline void store8(const StoreConsts& k, __m256i v, const Chan& ch, int64_t n, void* y, int64_t at) {
  v = _mm256_add_epi32(v, ch.bias);  // wraps like the scalar uint32 add
  if constexpr (M == QMode::I32) {
    int32_t* yp = static_cast<int32_t*>(y) + at;
    avx2_store_first(reinterpret_cast<float*>(yp), _mm256_castsi256_ps(v), n);
    return;
  }
  const __m256d dlo = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(v)), ch.scale_lo);
  const __m256d dhi = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(v, 1)), ch.scale_hi);
  if constexpr (M == QMode::F32 || M == QMode::QF) {
    __m256 f = _mm256_set_m128(_mm256_cvtpd_ps(dhi), _mm256_cvtpd_ps(dlo));
    if (k.float_bias) f = _mm256_add_ps(f, ch.fbias);
    // std::min(std::max(f, lo), hi): max/min return the second operand on NaN, so NaN stays.
    f = _mm256_min_ps(k.fhi, _mm256_max_ps(k.flo, f));
    if constexpr (M == QMode::F32) {
      float* yp = static_cast<float*>(y) + at;
      avx2_store_first(yp, f, n);
      return;
    } else {
      // QuantizeLinear as quantize_avx2.cpp: true division, nearest even, + zp, saturation (NaN: lowest).
      __m256 r = _mm256_round_ps(_mm256_div_ps(f, k.q_scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      r = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(r, k.q_zp), k.q_lo), k.q_hi);
      const __m256i q = _mm256_cvtps_epi32(r);
      const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      store_bytes(U8 ? _mm_packus_epi16(w, w) : _mm_packs_epi16(w, w), n, static_cast<char*>(y) + at);
      return;
    }
  } else {
    const __m128i qa = _mm256_cvtpd_epi32(requant(dlo, k.zp, k.qlo, k.qhi, k.lo, k.hi));
    const __m128i qb = _mm256_cvtpd_epi32(requant(dhi, k.zp, k.qlo, k.qhi, k.lo, k.hi));
    // The low byte of each int32 (what the scalar cast to Q keeps), without saturating packs.
    const __m128i ff = _mm_set1_epi32(0xff);
    const __m128i w16 = _mm_packus_epi32(_mm_and_si128(qa, ff), _mm_and_si128(qb, ff));
    store_bytes(_mm_packus_epi16(w16, w16), n, static_cast<char*>(y) + at);
  }
}

template <QMode M, bool U8>
NXRT_AVX2 void store_mode(const QEpilogue& e, const int32_t* acc, int64_t r0, int64_t r1, int64_t cols, bool by_row,
                          int64_t ch0, void* y, int64_t ldy) {
  const StoreConsts k = store_consts(e);
  const int32_t* bias_v = e.bias.empty() ? nullptr : e.bias.data();
  const double* scale_v = M == QMode::I32 ? nullptr : e.scale.data();
  const float* fbias_v = k.float_bias ? e.float_bias.data() : nullptr;
  if (by_row) {
    for (int64_t r = r0; r < r1; ++r) {
      const size_t c = size_t(ch0 + r - r0);
      Chan ch;
      ch.bias = _mm256_set1_epi32(bias_v ? bias_v[c] : 0);
      ch.scale_lo = ch.scale_hi = _mm256_set1_pd(scale_v ? scale_v[c] : 0.0);
      ch.fbias = _mm256_set1_ps(fbias_v ? fbias_v[c] : 0.f);
      for (int64_t j = 0; j < cols; j += 8)
        store8<M, U8>(k, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + r * kQNR + j)), ch,
                      std::min<int64_t>(8, cols - j), y, (r - r0) * ldy + j);
    }
    return;
  }
  // Channels along the columns: their values for this tile's columns, zero past cols.
  alignas(32) int32_t bias[kQNR] = {};
  alignas(32) double scale[kQNR] = {};
  alignas(32) float fbias[kQNR] = {};
  for (int64_t j = 0; j < cols; ++j) {
    const size_t c = size_t(ch0 + j);
    if (bias_v) bias[j] = bias_v[c];
    if (scale_v) scale[j] = scale_v[c];
    if (fbias_v) fbias[j] = fbias_v[c];
  }
  for (int64_t j = 0; j < cols; j += 8) {
    Chan ch;
    ch.bias = _mm256_load_si256(reinterpret_cast<const __m256i*>(bias + j));
    ch.scale_lo = _mm256_load_pd(scale + j);
    ch.scale_hi = _mm256_load_pd(scale + j + 4);
    ch.fbias = _mm256_load_ps(fbias + j);
    for (int64_t r = r0; r < r1; ++r)
      store8<M, U8>(k, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + r * kQNR + j)), ch,
                    std::min<int64_t>(8, cols - j), y, (r - r0) * ldy + j);
  }
}

void store_avx2(const QEpilogue& e, const int32_t* acc, int64_t r0, int64_t r1, int64_t cols, bool by_row, int64_t ch0,
                void* y, int64_t ldy) {
  const bool u8 = e.type == QType::U8;
  if (e.type == QType::I32) store_mode<QMode::I32, false>(e, acc, r0, r1, cols, by_row, ch0, y, ldy);
  else if (e.type == QType::F32) store_mode<QMode::F32, false>(e, acc, r0, r1, cols, by_row, ch0, y, ldy);
  else if (e.q_scale > 0.f)
    (u8 ? store_mode<QMode::QF, true> : store_mode<QMode::QF, false>)(e, acc, r0, r1, cols, by_row, ch0, y, ldy);
  else (u8 ? store_mode<QMode::Q8, true> : store_mode<QMode::Q8, false>)(e, acc, r0, r1, cols, by_row, ch0, y, ldy);
}

}  // namespace

QTileFn q_tile_avx2() { return &tile_avx2; }
QPackRunsFn q_pack_runs_avx2() { return &pack_runs_avx2; }
QStoreFn q_store_avx2() { return &store_avx2; }

}  // namespace nxrt::cpu

#else
namespace nxrt::cpu {
QTileFn q_tile_avx2() { return nullptr; }
QPackRunsFn q_pack_runs_avx2() { return nullptr; }
QStoreFn q_store_avx2() { return nullptr; }
}  // namespace nxrt::cpu
#endif
