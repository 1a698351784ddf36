// RoiAlign (avg) on a feature map that is linear in y and x, where bilinear
// sampling is exact: x[b][0][h][w] = 100 b + 4 h + w.
#include <doctest/doctest.h>

#include <vector>

#include "roi_align.hpp"

using namespace nxrt::cpu;

namespace {
std::vector<float> ramp() {
  std::vector<float> x(2 * 16);
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 4; ++w) x[size_t(b * 16 + h * 4 + w)] = float(100 * b + 4 * h + w);
  return x;
}
}  // namespace

TEST_CASE("roi_align_avg: sample positions, half_pixel shift, batch index") {
  const auto x = ramp();
  const float rois[4] = {0, 0, 2, 2};  // x1, y1, x2, y2
  const int64_t b0 = 0, b1 = 1;
  RoiAlignParams p;
  p.sampling_ratio = 2;
  p.half_pixel = false;  // samples at 0.5 and 1.5 on both axes: mean 4 * 1 + 1
  float y = 0;
  roi_align_avg(x.data(), 1, 4, 4, rois, &b0, 1, p, &y, nullptr);
  CHECK(y == doctest::Approx(5.f));
  roi_align_avg(x.data(), 1, 4, 4, rois, &b1, 1, p, &y, nullptr);
  CHECK(y == doctest::Approx(105.f));
  p.half_pixel = true;  // shifted by -0.5: samples at 0 and 1
  roi_align_avg(x.data(), 1, 4, 4, rois, &b0, 1, p, &y, nullptr);
  CHECK(y == doctest::Approx(2.5f));
}

TEST_CASE("roi_align_avg: output bins, adaptive sampling, samples outside the map count as zero") {
  const auto x = ramp();
  const float whole[4] = {0, 0, 4, 4};
  const int64_t b0 = 0;
  RoiAlignParams p;
  p.output_height = p.output_width = 2;
  p.half_pixel = false;  // bins of 2x2, sampling_ratio 0 -> ceil(4 / 2) = 2 samples per side
  std::vector<float> y(4);
  roi_align_avg(x.data(), 1, 4, 4, whole, &b0, 1, p, y.data(), nullptr);
  // bin (0, 0) samples y, x in {0.5, 1.5}: 4 * 1 + 1. The other bins sample {2.5, 3.5} on one or both
  // axes, and 3.5 lies past the last row / column so it reads the edge (3): mean 2.75.
  CHECK(y[0] == doctest::Approx(5.f));
  CHECK(y[1] == doctest::Approx(6.75f));   // 4 * 1 + 2.75
  CHECK(y[2] == doctest::Approx(12.f));    // 4 * 2.75 + 1
  CHECK(y[3] == doctest::Approx(13.75f));  // 4 * 2.75 + 2.75
  const float edge[4] = {2, 2, 6, 6};
  RoiAlignParams q;
  q.sampling_ratio = 2;
  q.half_pixel = false;  // samples at 3 and 5: only (3, 3) lies on the map (value 15), the mean is over 4
  float e = 0;
  roi_align_avg(x.data(), 1, 4, 4, edge, &b0, 1, q, &e, nullptr);
  CHECK(e == doctest::Approx(15.f / 4.f));
}
