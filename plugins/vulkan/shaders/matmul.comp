#version 450
#include "dtype.glsl"
#include "common.glsl"
// Tiled GEMM in shared memory. C[b] = alpha * A[b] x B[b] + beta * bias, then an
// optional fused activation (apply_act in common.glsl: Relu, Clip, LeakyRelu,
// Sigmoid, HardSwish) on the store. With -DCONV the B operand is the implicit
// im2col of a convolution input and A is the [Cout, Cin/g*KH*KW] weight.
// Tile sizes are specialization constants: BM x BN outputs per workgroup,
// BK deep, TM x TN outputs per thread, (BM/TM)*(BN/TN) threads; so is the
// fused activation ACT (its parameters lo, hi are push constants).
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;
layout(constant_id = 6) const uint ACT = 0;  // fused activation (apply_act)

layout(std430, binding = 0) readonly buffer A { elem_t a[]; };
layout(std430, binding = 1) readonly buffer B { elem_t b[]; };
layout(std430, binding = 2) readonly buffer Bias { elem_t bias[]; };
layout(std430, binding = 3) writeonly buffer C { elem_t c[]; };

#ifdef CONV
layout(push_constant) uniform P {
  uint M; uint N; uint K; uint Cin; uint H; uint W; uint Cout; uint OW; uint KH; uint KW;
  uint sh; uint sw; int ph; int pw; uint dh; uint dw; uint groups; uint flags; float lo; float hi;
} p;
#else
layout(push_constant) uniform P {
  uint M; uint N; uint K; uint sam; uint sak; uint sbk; uint sbn; uint batch2;
  uint sab1; uint sab2; uint sbb1; uint sbb2; uint scm; uint scn; uint flags;
  float alpha; float beta; float lo; float hi;
} p;
#endif

shared float As[BK * BM];
shared float Bs[BK * BN];

void main() {
  const uint NT = (BM / TM) * (BN / TN);
  uint tid = gl_LocalInvocationID.x;
  uint bz = gl_WorkGroupID.z;
  uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
#ifdef CONV
  uint nb = bz / p.groups, g = bz % p.groups;
  uint cin_g = p.Cin / p.groups;
  uint aoff = g * p.M * p.K;
  uint xoff = (nb * p.Cin + g * cin_g) * p.H * p.W;
  uint KHW = p.KH * p.KW;
#else
  uint b1 = bz / p.batch2, b2 = bz % p.batch2;
  uint aoff = b1 * p.sab1 + b2 * p.sab2;
  uint boff = b1 * p.sbb1 + b2 * p.sbb2;
#endif
  uint tn = tid % (BN / TN), tm = tid / (BN / TN);
  float acc[TM * TN];
  for (uint i = 0; i < TM * TN; ++i) acc[i] = 0.0;

  for (uint k0 = 0; k0 < p.K; k0 += BK) {
    for (uint i = tid; i < BM * BK; i += NT) {
      uint r = i / BK, kk = i % BK;
      uint gm = m0 + r, gk = k0 + kk;
      float v = 0.0;
#ifdef CONV
      if (gm < p.M && gk < p.K) v = float(a[aoff + gm * p.K + gk]);
#else
      if (gm < p.M && gk < p.K) v = float(a[aoff + gm * p.sam + gk * p.sak]);
#endif
      As[kk * BM + r] = v;
    }
    for (uint i = tid; i < BK * BN; i += NT) {
      uint kk = i / BN, cn = i % BN;
      uint gk = k0 + kk, gn = n0 + cn;
      float v = 0.0;
      if (gk < p.K && gn < p.N) {
#ifdef CONV
        uint ci = gk / KHW, rem = gk % KHW;
        uint kh = rem / p.KW, kw = rem % p.KW;
        uint oh = gn / p.OW, ow = gn % p.OW;
        int h = int(oh * p.sh + kh * p.dh) - p.ph;
        int w = int(ow * p.sw + kw * p.dw) - p.pw;
        if (h >= 0 && h < int(p.H) && w >= 0 && w < int(p.W)) v = float(b[xoff + (ci * p.H + uint(h)) * p.W + uint(w)]);
#else
        v = float(b[boff + gk * p.sbk + gn * p.sbn]);
#endif
      }
      Bs[kk * BN + cn] = v;
    }
    barrier();
    for (uint kk = 0; kk < BK; ++kk) {
      float ra[TM];
      float rb[TN];
      for (uint i = 0; i < TM; ++i) ra[i] = As[kk * BM + tm + i * (BM / TM)];
      for (uint j = 0; j < TN; ++j) rb[j] = Bs[kk * BN + tn + j * (BN / TN)];
      for (uint i = 0; i < TM; ++i)
        for (uint j = 0; j < TN; ++j) acc[i * TN + j] += ra[i] * rb[j];
    }
    barrier();
  }

  for (uint i = 0; i < TM; ++i) {
    uint gm = m0 + tm + i * (BM / TM);
    if (gm >= p.M) continue;
    for (uint j = 0; j < TN; ++j) {
      uint gn = n0 + tn + j * (BN / TN);
      if (gn >= p.N) continue;
#ifdef CONV
      float v = acc[i * TN + j];
      if ((p.flags & 1u) != 0) v += float(bias[g * p.M + gm]);
      v = apply_act(v, ACT, p.lo, p.hi);
      c[(nb * p.Cout + g * p.M + gm) * p.N + gn] = elem_t(v);
#else
      float v = p.alpha * acc[i * TN + j];
      if ((p.flags & 1u) != 0) v += p.beta * float(bias[gm * p.scm + gn * p.scn]);
      v = apply_act(v, ACT, p.lo, p.hi);
      c[bz * p.M * p.N + gm * p.N + gn] = elem_t(v);
#endif
    }
  }
}
