#version 450
#include "dtype.glsl"
#include "common.glsl"
// out(outer, inner) = reduce over k of x(outer, k, inner), k < len; accumulated
// in float32 for either storage type.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { elem_t x[]; };
layout(std430, binding = 1) writeonly buffer Y { elem_t y[]; };
layout(push_constant) uniform P { uint n; uint len; uint inner; uint op; } p;

void main() {
  uint i = global_index(256);
  if (i >= p.n) return;
  uint o = i / p.inner, in_ = i % p.inner;
  uint base = o * p.len * p.inner + in_;
  float acc = p.op == 2 ? -3.402823466e38 : (p.op == 3 ? 3.402823466e38 : (p.op == 4 ? 1.0 : 0.0));
  for (uint k = 0; k < p.len; ++k) {
    float v = float(x[base + k * p.inner]);
    switch (p.op) {
      case 0: case 1: acc += v; break;      // sum, mean
      case 2: acc = max(acc, v); break;
      case 3: acc = min(acc, v); break;
      case 4: acc *= v; break;
      case 5: case 6: acc += v * v; break;  // sumsquare, l2
      case 7: acc += abs(v); break;         // l1
    }
  }
  if (p.op == 1) acc /= float(p.len);
  if (p.op == 6) acc = sqrt(acc);
  y[i] = elem_t(acc);
}
