#version 450
#include "dtype.glsl"
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { elem_t x[]; };
layout(std430, binding = 1) writeonly buffer Y { elem_t y[]; };
layout(push_constant) uniform P { uint n; uint op; float alpha; float beta; } p;

// Abramowitz & Stegun 7.1.26 is too coarse near 0; use erf via erfc
// rational approximation (Numerical Recipes erfcc, |err| < 1.2e-7).
float erf_approx(float v) {
  float z = abs(v);
  float t = 1.0 / (1.0 + 0.5 * z);
  float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
            t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
            t * (-0.82215223 + t * 0.17087277)))))))));
  return v >= 0.0 ? 1.0 - r : r - 1.0;
}

void main() {
  uint i = global_index(256);
  if (i >= p.n) return;
  float v = float(x[i]);
  float r;
  switch (p.op) {
    case 0: r = max(v, 0.0); break;                                  // Relu
    case 1: r = erf_approx(v); break;                                // Erf
    case 2: r = 1.0 / (1.0 + exp(-v)); break;                        // Sigmoid
    case 3: r = tanh(clamp(v, -15.0, 15.0)); break;                  // Tanh
    case 4: r = exp(v); break;                                       // Exp
    case 5: r = log(v); break;                                       // Log
    case 6: r = sqrt(v); break;                                      // Sqrt
    case 7: r = -v; break;                                           // Neg
    case 8: r = abs(v); break;                                       // Abs
    case 9: r = 1.0 / v; break;                                      // Reciprocal
    case 10: r = min(max(v, p.alpha), p.beta); break;                // Clip
    case 11: r = v < 0.0 ? v * p.alpha : v; break;                   // LeakyRelu
    case 12: r = v; break;                                           // Identity
    case 13: r = floor(v); break;                                    // Floor
    case 14: r = ceil(v); break;                                     // Ceil
    case 15: r = v < 0.0 ? p.alpha * (exp(v) - 1.0) : v; break;      // Elu
    case 16: r = clamp(p.alpha * v + p.beta, 0.0, 1.0); break;       // HardSigmoid
    case 17: r = v > 20.0 ? v : log(1.0 + exp(v)); break;            // Softplus
    case 18: r = sin(v); break;                                      // Sin
    case 19: r = cos(v); break;                                      // Cos
    case 20: r = v * clamp(v / 6.0 + 0.5, 0.0, 1.0); break;          // HardSwish
    case 21: r = v * (1.0 / (1.0 + exp(-v))); break;                 // (SiLU helper)
    case 22: r = sign(v); break;                                     // Sign
    default: r = v;
  }
  y[i] = elem_t(r);
}
