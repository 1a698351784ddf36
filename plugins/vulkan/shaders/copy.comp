#version 450
#include "dtype.glsl"
#include "common.glsl"
// Strided N-d element copy: Transpose, Concat, Slice, Expand. Elements are moved
// as ew raw_t units each (dtype.glsl): 32-bit words, ew = 1 for 4-byte and 2 for
// 8-byte types; with -DFP16 one 16-bit unit per float16 element (ew = 1).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer S { raw_t src[]; };
layout(std430, binding = 1) writeonly buffer D { raw_t dst[]; };
layout(push_constant) uniform P { uint n; uint rank; uint ew; uint ibase; uint obase; uint dims[6]; int is[6]; uint os[6]; } p;

void main() {
  uint i = global_index(256);
  if (i >= p.n) return;
  int io = int(p.ibase);
  uint oo = p.obase;
  uint r = i;
  for (int d = int(p.rank) - 1; d >= 0; --d) {
    uint c = r % p.dims[d];
    r /= p.dims[d];
    io += int(c) * p.is[d];
    oo += c * p.os[d];
  }
  for (uint w = 0; w < p.ew; ++w) dst[oo * p.ew + w] = src[uint(io) * p.ew + w];
}
