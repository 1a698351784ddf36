#version 450
#include "dtype.glsl"
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer A { elem_t a[]; };
layout(std430, binding = 1) readonly buffer B { elem_t b[]; };
layout(std430, binding = 2) writeonly buffer C { elem_t c[]; };
// rank 0: same shape, dense. Otherwise up to 6 collapsed dims with element
// strides of a and b (0 for a broadcast dimension).
layout(push_constant) uniform P { uint n; uint op; uint rank; uint pad; uint dims[6]; uint sa[6]; uint sb[6]; } p;

void main() {
  uint i = global_index(256);
  if (i >= p.n) return;
  uint ia = i, ib = i;
  if (p.rank > 0) {
    ia = 0; ib = 0;
    uint r = i;
    for (int d = int(p.rank) - 1; d >= 0; --d) {
      uint c = r % p.dims[d];
      r /= p.dims[d];
      ia += c * p.sa[d];
      ib += c * p.sb[d];
    }
  }
  float x = float(a[ia]), y = float(b[ib]), z;
  switch (p.op) {
    case 0: z = x + y; break;
    case 1: z = x - y; break;
    case 2: z = x * y; break;
    case 3: z = x / y; break;
    case 4: z = pow(x, y); if (y == 2.0) z = x * x; else if (y == 1.0) z = x; else if (y == 0.5) z = sqrt(x); else if (x < 0.0 && y == floor(y)) { z = pow(-x, y); if (mod(y, 2.0) != 0.0) z = -z; } break;
    case 5: z = max(x, y); break;
    case 6: z = min(x, y); break;
    case 7: z = x < 0.0 ? x * y : x; break; // PRelu
    default: z = x;
  }
  c[i] = elem_t(z);
}
