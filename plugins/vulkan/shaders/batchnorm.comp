#version 450
#include "common.glsl"
// Inference BatchNormalization on x (N, C, spatial).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer S { float sc[]; };
layout(std430, binding = 2) readonly buffer B { float bi[]; };
layout(std430, binding = 3) readonly buffer M { float mean[]; };
layout(std430, binding = 4) readonly buffer V { float var_[]; };
layout(std430, binding = 5) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; uint c; uint spatial; float eps; } p;

void main() {
  uint i = global_index(256);
  if (i >= p.n) return;
  uint ch = (i / p.spatial) % p.c;
  // Folded form y = x * m + a (m = scale / sqrt(var + eps), a = B - mean * m).
  float m = sc[ch] / sqrt(var_[ch] + p.eps);
  y[i] = fma(x[i], m, bi[ch] - mean[ch] * m);
}
