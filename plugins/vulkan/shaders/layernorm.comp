#version 450
#include "dtype.glsl"
// One workgroup per row of `len` contiguous elements; scale/bias have `len` elements.
// Mean and variance accumulate in float32 (also for float16 storage).
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer X { elem_t x[]; };
layout(std430, binding = 1) readonly buffer S { elem_t sc[]; };
layout(std430, binding = 2) readonly buffer B { elem_t bi[]; };
layout(std430, binding = 3) writeonly buffer Y { elem_t y[]; };
layout(push_constant) uniform P { uint rows; uint len; float eps; uint has_bias; } p;
shared float red[128];

void main() {
  uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= p.rows) return;
  uint base = row * p.len;
  uint t = gl_LocalInvocationID.x;
  float s = 0.0;
  for (uint k = t; k < p.len; k += 128) s += float(x[base + k]);
  red[t] = s;
  barrier();
  for (uint h = 64; h > 0; h >>= 1) { if (t < h) red[t] += red[t + h]; barrier(); }
  float mean = red[0] / float(p.len);
  barrier();
  float v = 0.0;
  for (uint k = t; k < p.len; k += 128) { float d = float(x[base + k]) - mean; v += d * d; }
  red[t] = v;
  barrier();
  for (uint h = 64; h > 0; h >>= 1) { if (t < h) red[t] += red[t + h]; barrier(); }
  float inv = 1.0 / sqrt(red[0] / float(p.len) + p.eps);
  for (uint k = t; k < p.len; k += 128) {
    float r = (float(x[base + k]) - mean) * inv * float(sc[k]);
    if (p.has_bias != 0) r += float(bi[k]);
    y[base + k] = elem_t(r);
  }
}
