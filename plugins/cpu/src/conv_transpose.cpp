#include "conv_transpose.hpp"

#include <algorithm>

namespace nxrt::cpu {

void conv_transpose(const ConvTransposeShape& s, const float* xp, const float* wp, const float* bp, float* yp, ThreadPool* pool) {
  const int64_t N = s.batch, C = s.in_channels, Mg = s.group_out_channels, G = s.groups, M = Mg * G, Cg = C / G;
  int64_t in[3], out[3], k[3], st[3], dl[3], pb[3];
  for (int d = 0; d < 3; ++d) {
    in[d] = s.in[d];
    out[d] = s.out[d];
    k[d] = s.kernel[d];
    st[d] = s.stride[d];
    dl[d] = s.dilation[d];
    pb[d] = s.pad_begin[d];
  }
  const int64_t isz = in[0] * in[1] * in[2], osz = out[0] * out[1] * out[2], ksz = k[0] * k[1] * k[2];
  const int64_t planes = N * M;
  const int parts = int(std::min<int64_t>(planes, threads_for(pool, double(N * C * isz) * double(Mg * ksz))));
  parallel_ranges(pool, planes, parts, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t nn = p / M, m = p % M, g = m / Mg, ml = m % Mg;
      float* yo = yp + p * osz;
      std::fill(yo, yo + osz, bp ? bp[m] : 0.f);
      for (int64_t icl = 0; icl < Cg; ++icl) {
        const int64_t ic = g * Cg + icl;
        const float* xi = xp + (nn * C + ic) * isz;
        const float* wk = wp + (ic * Mg + ml) * ksz;
        for (int64_t kz = 0; kz < k[0]; ++kz)
          for (int64_t ky = 0; ky < k[1]; ++ky)
            for (int64_t kx = 0; kx < k[2]; ++kx) {
              const float wv = wk[(kz * k[1] + ky) * k[2] + kx];
              // Input columns whose output column lands inside [0, out[2]).
              const int64_t cx = kx * dl[2] - pb[2];  // ox = ix * st + cx
              int64_t ix0 = cx >= 0 ? 0 : (-cx + st[2] - 1) / st[2];
              int64_t ix1 = out[2] - cx <= 0 ? 0 : std::min(in[2], (out[2] - cx + st[2] - 1) / st[2]);
              if (ix0 >= ix1) continue;
              for (int64_t iz = 0; iz < in[0]; ++iz) {
                const int64_t oz = iz * st[0] - pb[0] + kz * dl[0];
                if (oz < 0 || oz >= out[0]) continue;
                for (int64_t iy = 0; iy < in[1]; ++iy) {
                  const int64_t oy = iy * st[1] - pb[1] + ky * dl[1];
                  if (oy < 0 || oy >= out[1]) continue;
                  const float* xr = xi + (iz * in[1] + iy) * in[2];
                  float* yr = yo + (oz * out[1] + oy) * out[2];
                  const int64_t s2 = st[2];
                  for (int64_t ix = ix0; ix < ix1; ++ix) yr[ix * s2 + cx] += wv * xr[ix];
                }
              }
            }
      }
    }
  });
}

}  // namespace nxrt::cpu
