// resize_planes_f32 (Resize's float32 path over the last two axes) against the formula in
// double: bilinear and nearest taps, up- and downsampling, single taps on one axis only,
// several planes, 1 and 2 threads.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "resize.hpp"

using namespace nxrt::cpu;

namespace {

// Half-pixel bilinear taps of `in` -> `out` (clamped at the edges), or nearest (floor).
std::vector<ResizeTap> taps_of(int64_t in, int64_t out, bool linear) {
  std::vector<ResizeTap> t(static_cast<size_t>(out));
  for (int64_t j = 0; j < out; ++j) {
    const double xo = (double(j) + 0.5) * double(in) / double(out) - 0.5;
    const double fl = std::floor(xo);
    auto clampi = [in](int64_t i) { return std::max<int64_t>(0, std::min<int64_t>(in - 1, i)); };
    ResizeTap& r = t[size_t(j)];
    if (!linear || xo == fl) {
      r.single = true;
      r.i0 = clampi(int64_t(linear ? fl : std::floor(xo + 0.5)));
      continue;
    }
    r.single = false;
    r.i0 = clampi(int64_t(fl));
    r.i1 = clampi(int64_t(fl) + 1);
    r.w1 = float(xo - fl);
    r.w0 = float(1.0 - (xo - fl));
  }
  return t;
}

double tap_value(const std::vector<ResizeTap>& t, size_t j, const std::function<double(int64_t)>& at) {
  const ResizeTap& r = t[j];
  return r.single ? at(r.i0) : double(r.w0) * at(r.i0) + double(r.w1) * at(r.i1);
}

}  // namespace

TEST_CASE("resize_planes_f32: bilinear and nearest over planes, up and down, 1 and 2 threads") {
  ThreadPool pool(2);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-3.f, 3.f);
  struct Case {
    int64_t planes, H, W, OH, OW;
    bool ly, lx;
  };
  const Case cases[] = {{21, 16, 16, 256, 256, true, true},  // DeepLab's logits x16
                        {3, 10, 10, 20, 20, false, false},   // YOLO's nearest x2
                        {2, 37, 19, 11, 40, true, true},     // down along y, up along x
                        {4, 8, 9, 8, 27, false, true},       // rows copied, columns bilinear
                        {5, 6, 30, 13, 30, true, false}};    // rows bilinear, columns nearest
  for (const Case& c : cases) {
    std::vector<float> x(size_t(c.planes * c.H * c.W));
    for (auto& v : x) v = d(rng);
    const auto ty = taps_of(c.H, c.OH, c.ly), tx = taps_of(c.W, c.OW, c.lx);
    for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> y(size_t(c.planes * c.OH * c.OW), 12345.f);
      resize_planes_f32(x.data(), y.data(), c.planes, c.H, c.W, ty, tx, tp);
      double worst = 0;
      bool copies_exact = true;
      for (int64_t p = 0; p < c.planes; ++p)
        for (int64_t oy = 0; oy < c.OH; ++oy)
          for (int64_t ox = 0; ox < c.OW; ++ox) {
            const float* xp = x.data() + p * c.H * c.W;
            const double want = tap_value(ty, size_t(oy), [&](int64_t iy) {
              return tap_value(tx, size_t(ox), [&](int64_t ix) { return double(xp[iy * c.W + ix]); });
            });
            const float got = y[size_t((p * c.OH + oy) * c.OW + ox)];
            worst = std::max(worst, std::fabs(double(got) - want));
            if (ty[size_t(oy)].single && tx[size_t(ox)].single) copies_exact = copies_exact && double(got) == want;
          }
      INFO(c.planes << " planes " << c.H << "x" << c.W << " -> " << c.OH << "x" << c.OW << (tp ? ", 2 threads" : ""));
      CHECK(worst <= 1e-5);
      CHECK(copies_exact);
    }
  }
}
