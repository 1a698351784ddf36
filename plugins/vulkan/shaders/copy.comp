#version 450
#include "common.glsl"
// Strided N-d copy of 32-bit words: Transpose, Concat, Slice, Expand, Split.
// ew = 32-bit words per element (1: 4-byte types, 2: 8-byte types).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer S { uint src[]; };
layout(std430, binding = 1) writeonly buffer D { uint dst[]; };
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
