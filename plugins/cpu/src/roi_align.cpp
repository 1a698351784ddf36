#include "roi_align.hpp"

#include <algorithm>
#include <cmath>

namespace nxrt::cpu {

void roi_align_avg(const float* xp, int64_t C, int64_t H, int64_t W, const float* rp, const int64_t* batch, int64_t R,
                   const RoiAlignParams& p, float* yp, ThreadPool* pool) {
  const int64_t oh = p.output_height, ow = p.output_width, sr = p.sampling_ratio;
  const double scale = p.spatial_scale;
  const bool half_pixel = p.half_pixel;
  const int parts = int(std::min<int64_t>(R * C, threads_for(pool, double(R * C * oh * ow) * 16, 65536.0)));
  parallel_for(pool, parts, [&](int64_t part) {
    int64_t b0 = 0, b1 = 0;
    split_range(R * C, parts, part, b0, b1);
    for (int64_t rc = b0; rc < b1; ++rc) {
      const int64_t r = rc / C, c = rc % C;
      const float* roi = rp + r * 4;
      const double off = half_pixel ? 0.5 : 0.0;
      const double sw = roi[0] * scale - off, sh = roi[1] * scale - off, ew = roi[2] * scale - off, eh = roi[3] * scale - off;
      double rw = ew - sw, rh = eh - sh;
      if (!half_pixel) {
        rw = std::max(rw, 1.0);
        rh = std::max(rh, 1.0);
      }
      const double bh = rh / double(oh), bw = rw / double(ow);
      const int64_t gh = sr > 0 ? sr : int64_t(std::ceil(rh / double(oh))), gw = sr > 0 ? sr : int64_t(std::ceil(rw / double(ow)));
      const double count = double(std::max<int64_t>(gh * gw, 1));
      const float* plane = xp + (batch[r] * C + c) * H * W;
      for (int64_t ph = 0; ph < oh; ++ph)
        for (int64_t pw = 0; pw < ow; ++pw) {
          double acc = 0;
          for (int64_t iy = 0; iy < gh; ++iy) {
            double yy = sh + double(ph) * bh + (double(iy) + 0.5) * bh / double(gh);
            for (int64_t ix = 0; ix < gw; ++ix) {
              double xx = sw + double(pw) * bw + (double(ix) + 0.5) * bw / double(gw);
              if (yy < -1.0 || yy > double(H) || xx < -1.0 || xx > double(W)) continue;
              double ty = std::max(yy, 0.0), tx = std::max(xx, 0.0);
              int64_t yl = int64_t(ty), xl = int64_t(tx), yh = 0, xh = 0;
              if (yl >= H - 1) {
                yh = yl = H - 1;
                ty = double(yl);
              } else {
                yh = yl + 1;
              }
              if (xl >= W - 1) {
                xh = xl = W - 1;
                tx = double(xl);
              } else {
                xh = xl + 1;
              }
              const double ly = ty - double(yl), lx = tx - double(xl), hy = 1 - ly, hx = 1 - lx;
              acc += hy * hx * plane[yl * W + xl] + hy * lx * plane[yl * W + xh] + ly * hx * plane[yh * W + xl] + ly * lx * plane[yh * W + xh];
            }
          }
          yp[(rc * oh + ph) * ow + pw] = float(acc / count);
        }
    }
  });
}

}  // namespace nxrt::cpu
