#version 450
#include "dtype.glsl"
#include "common.glsl"
// Inference BatchNormalization on x (N, C, spatial).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { elem_t x[]; };
layout(std430, binding = 1) readonly buffer S { elem_t sc[]; };
layout(std430, binding = 2) readonly buffer B { elem_t bi[]; };
layout(std430, binding = 3) readonly buffer M { elem_t mean[]; };
layout(std430, binding = 4) readonly buffer V { elem_t var_[]; };
layout(std430, binding = 5) writeonly buffer Y { elem_t y[]; };
layout(push_constant) uniform P { uint n; uint c; uint spatial; float eps; } p;

void main() {
  uint i = global_index(256);
  if (i >= p.n) return;
  uint ch = (i / p.spatial) % p.c;
  // Folded form y = x * m + a (m = scale / sqrt(var + eps), a = B - mean * m),
  // in float32 (float16 parameters are widened first).
  float m = float(sc[ch]) / sqrt(float(var_[ch]) + p.eps);
  y[i] = elem_t(fma(float(x[i]), m, float(bi[ch]) - float(mean[ch]) * m));
}
