// The vector QuantizeLinear store shared by quantize_avx2.cpp, quantize_avx512.cpp and
// quantize_add.cpp: v / scale (a true division, as the scalar code) clamped to Q's range minus
// the zero point in float, converted at nearest even, + zero point as int16 after packs, four
// vectors to one store. The same integers as the scalar nearbyint + zero point + saturate:
// rounding is monotone and the bounds are integers; NaN takes the lower bound (max returns its
// second operand for NaN). Target attributes, so that AVX2 and AVX-512 functions inline them.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

namespace nxrt::cpu {

// Q's range minus the zero point: the float bounds of the quotient before its conversion.
struct QuotientBounds {
  float lo, hi;
};
template <typename Q>
inline QuotientBounds quotient_bounds(int32_t zero_point) {
  constexpr bool u8 = std::is_same_v<Q, uint8_t>;
  return {(u8 ? 0.f : -128.f) - float(zero_point), (u8 ? 255.f : 127.f) - float(zero_point)};
}

// v / s clamped to [lo, hi] (quotient_bounds), to int32 at nearest even.
__attribute__((target("avx2,fma"))) inline __m256i quotient8(__m256 v, __m256 s, __m256 lo, __m256 hi) {
  return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_div_ps(v, s), lo), hi));
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512i quotient16(__m512 v, __m512 s, __m512 lo,
                                                                              __m512 hi) {
  return _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_div_ps(v, s), lo), hi));
}

// Four vectors of quotients (within quotient_bounds) + the zero point (zp16: as int16 lanes)
// as 32 bytes of Q at y, in order. int16 holds the quotients and the sums land in Q's range, so
// neither pack saturates; packs work within 128-bit lanes (dwords 0-3 then hold the four
// vectors' first halves, 4-7 their second), which the dword permute undoes.
template <typename Q>
__attribute__((target("avx2,fma"))) inline void store_quotients32(Q* y, const __m256i q[4], __m256i zp16) {
  const __m256i w01 = _mm256_add_epi16(_mm256_packs_epi32(q[0], q[1]), zp16);
  const __m256i w23 = _mm256_add_epi16(_mm256_packs_epi32(q[2], q[3]), zp16);
  const __m256i bytes = std::is_same_v<Q, uint8_t> ? _mm256_packus_epi16(w01, w23) : _mm256_packs_epi16(w01, w23);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), _mm256_permutevar8x32_epi32(bytes, order));
}
// One vector of quotients + the zero point (zp32: as int32 lanes) as 8 bytes of Q at y.
template <typename Q>
__attribute__((target("avx2,fma"))) inline void store_quotients8(Q* y, __m256i q, __m256i zp32) {
  q = _mm256_add_epi32(q, zp32);
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  const __m128i bytes = std::is_same_v<Q, uint8_t> ? _mm_packus_epi16(w, w) : _mm_packs_epi16(w, w);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(y), bytes);
}
// The AVX-512 form of store_quotients32: 64 bytes (the permute undoes the packs' 128-bit lanes).
template <typename Q>
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void store_quotients64(Q* y, const __m512i q[4],
                                                                                  __m512i zp16) {
  const __m512i w01 = _mm512_add_epi16(_mm512_packs_epi32(q[0], q[1]), zp16);
  const __m512i w23 = _mm512_add_epi16(_mm512_packs_epi32(q[2], q[3]), zp16);
  const __m512i bytes = std::is_same_v<Q, uint8_t> ? _mm512_packus_epi16(w01, w23) : _mm512_packs_epi16(w01, w23);
  const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  _mm512_storeu_si512(y, _mm512_permutexvar_epi32(order, bytes));
}

}  // namespace nxrt::cpu
#endif
