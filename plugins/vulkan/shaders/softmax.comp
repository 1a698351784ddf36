#version 450
#include "dtype.glsl"
// One workgroup per row (outer, inner); the row has `len` elements with stride `inner`.
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer X { elem_t x[]; };
layout(std430, binding = 1) writeonly buffer Y { elem_t y[]; };
layout(push_constant) uniform P { uint rows; uint len; uint inner; uint log_softmax; } p;
shared float red[128];

void main() {
  uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= p.rows) return;
  uint o = row / p.inner, in_ = row % p.inner;
  uint base = o * p.len * p.inner + in_;
  uint t = gl_LocalInvocationID.x;
  float m = -3.402823466e38;
  for (uint k = t; k < p.len; k += 128) m = max(m, float(x[base + k * p.inner]));
  red[t] = m;
  barrier();
  for (uint s = 64; s > 0; s >>= 1) { if (t < s) red[t] = max(red[t], red[t + s]); barrier(); }
  m = red[0];
  barrier();
  float sum = 0.0;
  for (uint k = t; k < p.len; k += 128) sum += exp(float(x[base + k * p.inner]) - m);
  red[t] = sum;
  barrier();
  for (uint s = 64; s > 0; s >>= 1) { if (t < s) red[t] += red[t + s]; barrier(); }
  sum = red[0];
  if (p.log_softmax != 0) {
    float ls = log(sum);
    for (uint k = t; k < p.len; k += 128) y[base + k * p.inner] = elem_t(float(x[base + k * p.inner]) - m - ls);
  } else {
    float inv = 1.0 / sum;
    for (uint k = t; k < p.len; k += 128) y[base + k * p.inner] = elem_t(exp(float(x[base + k * p.inner]) - m) * inv);
  }
}
