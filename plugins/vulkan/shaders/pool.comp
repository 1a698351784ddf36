#version 450
#include "dtype.glsl"
#include "common.glsl"
// 2-D MaxPool / AveragePool, one thread per output element of (NC, OH, OW);
// float32 max/sum, one rounding on the store.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { elem_t x[]; };
layout(std430, binding = 1) writeonly buffer Y { elem_t y[]; };
layout(push_constant) uniform P {
  uint n; uint H; uint W; uint OH; uint OW; uint KH; uint KW; uint sh; uint sw;
  int ph; int pw; int ph1; int pw1; uint dh; uint dw; uint mode; uint count_include_pad;
} p;

void main() {
  uint i = global_index(256);
  if (i >= p.n) return;
  uint ow = i % p.OW, oh = (i / p.OW) % p.OH, nc = i / (p.OW * p.OH);
  int h0 = int(oh * p.sh) - p.ph, w0 = int(ow * p.sw) - p.pw;
  uint base = nc * p.H * p.W;
  float acc = p.mode == 0 ? -3.402823466e38 : 0.0;
  uint cnt = 0;
  for (uint kh = 0; kh < p.KH; ++kh) {
    int h = h0 + int(kh * p.dh);
    if (h < 0 || h >= int(p.H)) continue;
    for (uint kw = 0; kw < p.KW; ++kw) {
      int w = w0 + int(kw * p.dw);
      if (w < 0 || w >= int(p.W)) continue;
      float v = float(x[base + uint(h) * p.W + uint(w)]);
      if (p.mode == 0) acc = max(acc, v); else acc += v;
      cnt++;
    }
  }
  if (p.mode == 1) {
    if (p.count_include_pad != 0) {
      int he = min(h0 + int(p.KH), int(p.H) + p.ph1), we = min(w0 + int(p.KW), int(p.W) + p.pw1);
      int hs = h0, ws = w0;
      acc /= float((he - hs) * (we - ws));
    } else {
      acc /= float(max(cnt, 1u));
    }
  }
  y[i] = elem_t(acc);
}
