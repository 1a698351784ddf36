#version 450
// Cast. Three builds (CMakeLists):
//   cast         32-bit words only; MODE (specialization constant): 0 float32->int32
//                (truncation toward zero), 1 int32->float32 (correctly rounded),
//                2 int64->int32 (low word, as C and numpy wrap), 3 int32->int64 (sign
//                extension). No 16-bit storage needed.
//   cast_to_f16  float32->float16, rounded to nearest even by hand on the bits (the
//                driver's own conversion rounding is implementation-defined): overflow
//                gives inf, NaN stays NaN, subnormals are exact.
//   cast_from_f16 float16->float32, exact.
#ifdef TO_F16
#extension GL_EXT_shader_16bit_storage : require
#endif
#ifdef FROM_F16
#extension GL_EXT_shader_16bit_storage : require
#endif
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0;
layout(push_constant) uniform P { uint n; } p;

#if defined(TO_F16)
layout(std430, binding = 0) readonly buffer S { uint src[]; };
layout(std430, binding = 1) writeonly buffer D { uint16_t dst[]; };

uint f32_to_f16_bits(uint x) {
  uint sign = (x >> 16) & 0x8000u;
  uint e = (x >> 23) & 0xffu;
  uint m = x & 0x7fffffu;
  if (e == 0xffu) return sign | 0x7c00u | (m != 0u ? 0x200u | (m >> 13) : 0u);
  int ex = int(e) - 127 + 15;
  if (ex >= 31) return sign | 0x7c00u;
  if (ex <= 0) {  // float16 subnormal (or zero)
    if (ex < -10) return sign;
    m |= 0x800000u;
    uint shift = uint(14 - ex);
    uint h = m >> shift;
    uint rem = m & ((1u << shift) - 1u), half_ulp = 1u << (shift - 1u);
    if (rem > half_ulp || (rem == half_ulp && (h & 1u) != 0u)) h++;
    return sign | h;
  }
  uint h = (uint(ex) << 10) | (m >> 13);
  uint rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) h++;  // a carry may reach inf: correct
  return sign | h;
}

void main() {
  uint i = global_index(256);
  if (i >= p.n) return;
  dst[i] = uint16_t(f32_to_f16_bits(src[i]));
}
#elif defined(FROM_F16)
layout(std430, binding = 0) readonly buffer S { float16_t src[]; };
layout(std430, binding = 1) writeonly buffer D { float dst[]; };
void main() {
  uint i = global_index(256);
  if (i >= p.n) return;
  dst[i] = float(src[i]);
}
#else
layout(std430, binding = 0) readonly buffer S { uint src[]; };
layout(std430, binding = 1) writeonly buffer D { uint dst[]; };
void main() {
  uint i = global_index(256);
  if (i >= p.n) return;
  if (MODE == 0u) dst[i] = uint(int(uintBitsToFloat(src[i])));
  else if (MODE == 1u) dst[i] = floatBitsToUint(float(int(src[i])));
  else if (MODE == 2u) dst[i] = src[2u * i];
  else {
    uint v = src[i];
    dst[2u * i] = v;
    dst[2u * i + 1u] = (v & 0x80000000u) != 0u ? 0xffffffffu : 0u;
  }
}
#endif
