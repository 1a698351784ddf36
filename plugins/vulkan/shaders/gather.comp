#version 450
#include "dtype.glsl"
#include "common.glsl"
// Elements are ew raw_t units (dtype.glsl): 32-bit words, or with -DFP16 one
// 16-bit unit per float16 element. Indices are int32, or int64 read by low word.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer S { raw_t src[]; };
layout(std430, binding = 1) readonly buffer I { int idx[]; };
layout(std430, binding = 2) writeonly buffer D { raw_t dst[]; };
// out (outer, ni, inner) = data (outer, axis, inner)[:, idx, :]
layout(push_constant) uniform P { uint n; uint axis; uint inner; uint ni; uint ew; uint idx64; } p;

void main() {
  uint i = global_index(256);
  if (i >= p.n) return;
  uint in_ = i % p.inner;
  uint t = i / p.inner;
  uint j = t % p.ni;
  uint o = t / p.ni;
  int k = p.idx64 != 0 ? idx[2 * j] : idx[j];  // low word of an int64 (little endian)
  if (k < 0) k += int(p.axis);
  k = clamp(k, 0, int(p.axis) - 1);
  uint s = (o * p.axis + uint(k)) * p.inner + in_;
  for (uint w = 0; w < p.ew; ++w) dst[i * p.ew + w] = src[s * p.ew + w];
}
