// Branch-free float exp/erf written so loops over them auto-vectorise
// (no libm calls). Inlined into target_clones loops.
#pragma once
#include <cstdint>
#include <cstring>

namespace nxrt::cpu::vm {

#define NXRT_INLINE inline __attribute__((always_inline))

NXRT_INLINE float bits_to_float(int32_t i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}

// e^x: range reduction x = n ln2 + r, |r| <= ln2/2, degree-6 Taylor on r
// (relative error ~1.2e-7), scale by 2^n through the exponent bits.
NXRT_INLINE float exp(float x) {
  const float hi = 88.37f, lo = -87.3365447505531f;
  float xc = x > hi ? hi : x;
  xc = xc < lo ? lo : xc;
  const float fn = __builtin_floorf(xc * 1.44269504088896341f + 0.5f);
  float r = xc - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  float p = 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const int32_t n = int32_t(fn);
  float y = p * bits_to_float((n + 127) << 23);
  y = x > 88.7228391f ? __builtin_inff() : y;
  y = x < lo ? 0.f : y;
  y = x != x ? x : y;
  return y;
}

// erfc(z) for z >= 0: the Numerical Recipes erfcc fit, relative error < 1.2e-7 for every z
// (erfc itself, not 1 - erf: no cancellation where erfc is tiny).
NXRT_INLINE float erfc_nonneg(float z) {
  const float t = 1.f / (1.f + 0.5f * z);
  float q = 0.17087277f;
  q = q * t - 0.82215223f;
  q = q * t + 1.48851587f;
  q = q * t - 1.13520398f;
  q = q * t + 0.27886807f;
  q = q * t - 0.18628806f;
  q = q * t + 0.09678418f;
  q = q * t + 0.37409196f;
  q = q * t + 1.00002368f;
  q = q * t - 1.26551223f;
  return t * exp(-(z * z) + q);
}

// erf(x): |x| < 1: Maclaurin series to x^21 (error < 2e-9); otherwise
// 1 - erfc with the Numerical Recipes erfcc fit (relative error < 1.2e-7 on
// erfc, i.e. < 2e-8 absolute on erf).
NXRT_INLINE float erf(float x) {
  const float z = x < 0.f ? -x : x;
  const float z2 = z * z;
  float s = 1.f / 76204800.f;
  s = s * z2 - 1.f / 6894720.f;
  s = s * z2 + 1.f / 685440.f;
  s = s * z2 - 1.f / 75600.f;
  s = s * z2 + 1.f / 9360.f;
  s = s * z2 - 1.f / 1320.f;
  s = s * z2 + 1.f / 216.f;
  s = s * z2 - 1.f / 42.f;
  s = s * z2 + 1.f / 10.f;
  s = s * z2 - 1.f / 3.f;
  s = s * z2 + 1.f;
  const float small = 1.12837916709551257f * z * s;
  const float large = 1.f - erfc_nonneg(z);
  float r = z < 1.f ? small : large;
  r = z > 10.f ? 1.f : r;
  r = x < 0.f ? -r : r;
  r = x != x ? x : r;
  return r;
}

// tanh(x): |x| < 0.3: the odd Taylor series to x^11 (next term < 6e-10
// relative); else sign(x) * (1 - 2 / (e^(2|x|) + 1)), whose cancellation costs
// at most ~2 bits there (relative error < 5e-7). Saturates to +-1, NaN stays NaN.
NXRT_INLINE float tanh(float x) {
  const float z = x < 0.f ? -x : x;
  const float z2 = z * z;
  float p = -1382.f / 155925.f;
  p = p * z2 + 62.f / 2835.f;
  p = p * z2 - 17.f / 315.f;
  p = p * z2 + 2.f / 15.f;
  p = p * z2 - 1.f / 3.f;
  const float small = z + z * z2 * p;
  const float large = 1.f - 2.f / (exp(2.f * z) + 1.f);
  float r = z < 0.3f ? small : large;
  r = x < 0.f ? -r : r;
  r = x != x ? x : r;
  return r;
}

}  // namespace nxrt::cpu::vm
