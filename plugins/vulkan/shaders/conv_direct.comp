#version 450
#include "dtype.glsl"
#include "common.glsl"
// Direct convolution (depthwise and small groups): one thread per output element,
// float32 accumulation, optional fused activation on the store (apply_act).
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint ACT = 0;  // fused activation (apply_act)
layout(std430, binding = 0) readonly buffer X { elem_t x[]; };
layout(std430, binding = 1) readonly buffer Wt { elem_t wt[]; };
layout(std430, binding = 2) readonly buffer Bs { elem_t bias[]; };
layout(std430, binding = 3) writeonly buffer Y { elem_t y[]; };
layout(push_constant) uniform P {
  uint n; uint Cin; uint H; uint W; uint Cout; uint OH; uint OW; uint KH; uint KW;
  uint sh; uint sw; int ph; int pw; uint dh; uint dw; uint cin_g; uint cout_g; uint flags; float lo; float hi;
} p;

void main() {
  uint i = global_index(256);
  if (i >= p.n) return;
  uint ow = i % p.OW, oh = (i / p.OW) % p.OH, co = (i / (p.OW * p.OH)) % p.Cout, nb = i / (p.OW * p.OH * p.Cout);
  uint g = co / p.cout_g;
  int h0 = int(oh * p.sh) - p.ph, w0 = int(ow * p.sw) - p.pw;
  float acc = (p.flags & 1u) != 0 ? float(bias[co]) : 0.0;
  for (uint ci = 0; ci < p.cin_g; ++ci) {
    uint xb = (nb * p.Cin + g * p.cin_g + ci) * p.H * p.W;
    uint wb = (co * p.cin_g + ci) * p.KH * p.KW;
    for (uint kh = 0; kh < p.KH; ++kh) {
      int h = h0 + int(kh * p.dh);
      if (h < 0 || h >= int(p.H)) continue;
      for (uint kw = 0; kw < p.KW; ++kw) {
        int w = w0 + int(kw * p.dw);
        if (w < 0 || w >= int(p.W)) continue;
        acc += float(x[xb + uint(h) * p.W + uint(w)]) * float(wt[wb + kh * p.KW + kw]);
      }
    }
  }
  acc = apply_act(acc, ACT, p.lo, p.hi);
  y[i] = elem_t(acc);
}
