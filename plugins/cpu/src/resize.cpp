#include "resize.hpp"

#include <algorithm>
#include <vector>

#include "simd.hpp"

namespace nxrt::cpu {
namespace {

// One input row resized along x: h[j] = wx0[j] * r[ix0[j]] + wx1[j] * r[ix1[j]].
NXRT_CLONES
void resize_row_x(const float* __restrict r, float* __restrict h, int64_t OW, const int64_t* __restrict ix0,
                  const int64_t* __restrict ix1, const float* __restrict wx0, const float* __restrict wx1) {
  for (int64_t j = 0; j < OW; ++j) h[j] = wx0[j] * r[ix0[j]] + wx1[j] * r[ix1[j]];
}

// An output row from two x-resized input rows: y = w0 * h0 + w1 * h1 (the order of the
// one-pass formula, so the same rounding).
NXRT_CLONES
void resize_rows_y(const float* __restrict h0, const float* __restrict h1, float w0, float w1, float* __restrict y,
                   int64_t OW) {
  for (int64_t j = 0; j < OW; ++j) y[j] = w0 * h0[j] + w1 * h1[j];
}

// An output row of single taps both ways: a gather.
NXRT_CLONES
void gather_row(const float* __restrict src, const int64_t* __restrict ix, float* __restrict y, int64_t OW) {
  for (int64_t j = 0; j < OW; ++j) y[j] = src[ix[j]];
}

}  // namespace

void resize_planes_f32(const float* xp, float* yp, int64_t planes, int64_t H, int64_t W, std::span<const ResizeTap> tyv,
                       std::span<const ResizeTap> txv, ThreadPool* pool) {
  const int64_t OH = int64_t(tyv.size()), OW = int64_t(txv.size());
  if (planes <= 0 || OH <= 0 || OW <= 0) return;
  const size_t ow = static_cast<size_t>(OW);
  std::vector<int64_t> ix0(ow), ix1(ow);
  std::vector<float> wx0(ow), wx1(ow);
  const bool nearest_x = std::all_of(txv.begin(), txv.end(), [](const ResizeTap& t) { return t.single; });
  for (size_t j = 0; j < ow; ++j) {
    const ResizeTap& t = txv[j];
    ix0[j] = t.i0;
    ix1[j] = t.single ? t.i0 : t.i1;
    wx0[j] = t.w0;
    wx1[j] = t.single ? 0.f : t.w1;
  }
  const int64_t rows = planes * OH;
  const int parts = int(std::min<int64_t>(rows, threads_for(pool, double(rows * OW) * 4, 65536.0)));
  parallel_for(parts <= 1 ? nullptr : pool, parts, [&](int64_t c) {
    int64_t b = 0, e = 0;
    split_range(rows, parts, c, b, e);
    thread_local std::vector<float> hbuf;  // two x-resized input rows, kept across runs
    hbuf.resize(2 * ow);
    int64_t key[2] = {-1, -1}, stamp[2] = {0, 0}, clock = 0;
    auto hrow = [&](int64_t pl, int64_t idx) -> const float* {
      const int64_t k = pl * H + idx;
      ++clock;
      for (int sl = 0; sl < 2; ++sl)
        if (key[sl] == k) {
          stamp[sl] = clock;
          return hbuf.data() + sl * OW;
        }
      const int sl = stamp[0] <= stamp[1] ? 0 : 1;
      key[sl] = k;
      stamp[sl] = clock;
      float* h = hbuf.data() + sl * OW;
      resize_row_x(xp + pl * H * W + idx * W, h, OW, ix0.data(), ix1.data(), wx0.data(), wx1.data());
      return h;
    };
    int64_t pl = b / OH, oy = b % OH;
    for (int64_t row = b; row < e; ++row, ++oy) {
      if (oy == OH) oy = 0, ++pl;
      const ResizeTap& ty = tyv[size_t(oy)];
      const float* xpl = xp + pl * H * W;
      float* yr = yp + row * OW;
      if (nearest_x && ty.single) {
        // Nearest both ways: a gather, or a copy of the previous output row (upsampling).
        if (oy > 0 && row > b && tyv[size_t(oy - 1)].single && tyv[size_t(oy - 1)].i0 == ty.i0) {
          std::copy(yr - OW, yr, yr);
          continue;
        }
        gather_row(xpl + ty.i0 * W, ix0.data(), yr, OW);
        continue;
      }
      // Each input row is resized along x once per run of output rows that read it (an
      // upsampling reads each one for many output rows): two rows kept, the older replaced.
      const float* h0 = hrow(pl, ty.i0);
      if (ty.single) {
        std::copy(h0, h0 + OW, yr);
        continue;
      }
      const float* h1 = hrow(pl, ty.i1);  // evicts the older row, never h0
      resize_rows_y(h0, h1, ty.w0, ty.w1, yr, OW);
    }
  });
}

}  // namespace nxrt::cpu
