// Softmax rows on AVX-512 (softmax.cpp picks it when the CPU has it): the maximum, then
// e^(x - max) stored and summed, then the scale by 1 / sum, 16 lanes at a time with the
// row's tail under a mask; the lanes' max and sum reduced once per row.
#include "softmax.hpp"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers pass an "undefined" vector to the masked builtins (see gemm_int8_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <limits>

#include "vmath_avx512.hpp"

namespace nxrt::cpu {
namespace {

__attribute__((target("avx512f"))) void softmax_row_avx512(const float* x, float* y, int64_t n) {
  const int64_t full = n & ~int64_t(15);
  const __mmask16 tail = __mmask16((1u << (n - full)) - 1u);
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 mv = ninf;
  for (int64_t i = 0; i < full; i += 16) mv = _mm512_max_ps(mv, _mm512_loadu_ps(x + i));
  if (tail) mv = _mm512_max_ps(mv, _mm512_mask_loadu_ps(ninf, tail, x + full));
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mv));
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= full; i += 32) {  // two chains: the sum's adds do not wait on each other
    const __m512 e0 = vm512::exp(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
    const __m512 e1 = vm512::exp(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), m));
    _mm512_storeu_ps(y + i, e0);
    _mm512_storeu_ps(y + i + 16, e1);
    s0 = _mm512_add_ps(s0, e0);
    s1 = _mm512_add_ps(s1, e1);
  }
  for (; i < full; i += 16) {
    const __m512 e = vm512::exp(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
    _mm512_storeu_ps(y + i, e);
    s0 = _mm512_add_ps(s0, e);
  }
  if (tail) {
    const __m512 e = vm512::exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + full), m));
    _mm512_mask_storeu_ps(y + full, tail, e);
    s0 = _mm512_mask_add_ps(s0, tail, s0, e);
  }
  const __m512 inv = _mm512_set1_ps(1.f / _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
  for (i = 0; i < full; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), inv));
  if (tail) _mm512_mask_storeu_ps(y + full, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, y + full), inv));
}

}  // namespace

SoftmaxRowFn softmax_row_avx512_fn() { return &softmax_row_avx512; }

}  // namespace nxrt::cpu
#else
namespace nxrt::cpu {
SoftmaxRowFn softmax_row_avx512_fn() { return nullptr; }
}  // namespace nxrt::cpu
#endif
