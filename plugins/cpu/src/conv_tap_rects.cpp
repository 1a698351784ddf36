#include "conv_tap_rects.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "gemm.hpp"
#include "hard_swish.hpp"
#include "scratch.hpp"

namespace nxrt::cpu {

namespace {

// Tap (ky, kx) and the outputs where it reads inside the input: rows y, columns x.
struct TapRect {
  int64_t tap, ky, kx;
  GatherSpan y, x;
  int64_t rows() const { return y.hi - y.lo; }
  int64_t cols() const { return x.hi - x.lo; }
  int64_t count() const { return rows() * cols(); }
};

// The taps with a live rectangle, one that covers every output first (it opens the output).
std::vector<TapRect> live_rects(const ConvShape& s) {
  std::vector<TapRect> rects;
  for (int64_t ky = 0; ky < s.k_h; ++ky)
    for (int64_t kx = 0; kx < s.k_w; ++kx) {
      const TapRect t{ky * s.k_w + kx, ky, kx, gather_span(ky * s.dil_h - s.pad_top, s.stride_h, s.out_h, s.in_h),
                      gather_span(kx * s.dil_w - s.pad_left, s.stride_w, s.out_w, s.in_w)};
      if (t.count() > 0) rects.push_back(t);
    }
  const int64_t all = s.out_h * s.out_w;
  std::stable_partition(rects.begin(), rects.end(), [&](const TapRect& t) { return t.count() == all; });
  return rects;
}

// The (output, tap) reads of `rects` that land inside the input.
double live_reads(const std::vector<TapRect>& rects) {
  double live = 0;
  for (const TapRect& t : rects) live += double(t.count());
  return live;
}

// Whether tap t reads x itself at every output (stride 1, no shift, the same size): its x_t
// over output rows [lo, hi) is x's rows [lo, hi).
bool reads_x_in_place(const ConvShape& s, const TapRect& t) {
  return s.stride_h == 1 && s.stride_w == 1 && s.in_h == s.out_h && s.in_w == s.out_w &&
         t.ky * s.dil_h == s.pad_top && t.kx * s.dil_w == s.pad_left;
}

// x_t, [IC][rows x cols]: the input tap t reads over its rectangle (all inside the input).
void gather_tap(const ConvShape& s, const TapRect& t, const float* xn, float* dst) {
  const int64_t rows = t.rows(), cols = t.cols(), n = rows * cols;
  const int64_t ix0 = t.x.lo * s.stride_w + t.kx * s.dil_w - s.pad_left;
  for (int64_t ic = 0; ic < s.in_c; ++ic)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t iy = (t.y.lo + r) * s.stride_h + t.ky * s.dil_h - s.pad_top;
      const float* src = xn + (ic * s.in_h + iy) * s.in_w + ix0;
      float* d = dst + ic * n + r * cols;
      if (s.stride_w == 1) {
        std::memcpy(d, src, size_t(cols) * sizeof(float));
      } else {
        for (int64_t c = 0; c < cols; ++c) d[c] = src[c * s.stride_w];
      }
    }
}

// o = act(o + residual) over n values.
void finish(float* o, const float* res, int64_t n, const ConvPostOps& post) {
  for (int64_t q = 0; q < n; ++q) {
    float v = o[q] + (res ? res[q] : 0.f);
    if (post.clamp) {
      v = v < post.lo ? post.lo : v;
      v = v > post.hi ? post.hi : v;
    }
    o[q] = post.hardswish ? hard_swish(v) : v;
  }
}

// Output channels [oc0, oc0 + ocs) (a whole number of A tiles from oc0) of one image.
void tap_rects_channels(const ConvShape& s, const std::vector<TapRect>& rects, const float* xn, const float* packed,
                        const float* bias, float* on, const float* rn, int64_t oc0, int64_t ocs,
                        const ConvPostOps& post) {
  const int64_t IC = s.in_c, OW = s.out_w, P = s.out_h * s.out_w;
  const size_t per_tap = packed_a_floats(s.out_c, IC);
  float* o = on + oc0 * P;
  bool opened = false;
  auto open = [&]() {  // o = bias, before the first tap that does not cover every output
    for (int64_t m = 0; m < ocs; ++m) std::fill(o + m * P, o + (m + 1) * P, bias ? bias[oc0 + m] : 0.f);
    opened = true;
  };
  for (const TapRect& t : rects) {
    const float* a = packed + size_t(t.tap) * per_tap + size_t(oc0 * IC);
    const int64_t n = t.count();
    const float* b = xn + t.y.lo * s.in_w;
    int64_t ldb = s.in_h * s.in_w;
    if (!reads_x_in_place(s, t)) {
      float* g = scratch_floats(kScratchA, size_t(IC * n));
      gather_tap(s, t, xn, g);
      b = g;
      ldb = n;
    }
    GemmEpilogue ep;
    float* ot = o + t.y.lo * OW;
    if (!opened && n == P) {  // the opening tap: its product and the bias
      ep.row_bias = bias ? bias + oc0 : nullptr;
      gemm_packed_a(ocs, n, IC, a, b, ldb, ot, P, ep, nullptr);
      opened = true;
      continue;
    }
    if (!opened) open();
    if (t.cols() == OW) {  // whole output rows: the product adds in place
      ep.accumulate = true;
      gemm_packed_a(ocs, n, IC, a, b, ldb, ot, P, ep, nullptr);
      continue;
    }
    float* c = scratch_floats(kScratchB, size_t(ocs * n));
    gemm_packed_a(ocs, n, IC, a, b, ldb, c, n, ep, nullptr);
    const int64_t cols = t.cols();
    for (int64_t m = 0; m < ocs; ++m)
      for (int64_t r = 0; r < t.rows(); ++r) {
        float* d = ot + m * P + r * OW + t.x.lo;
        const float* src = c + m * n + r * cols;
        for (int64_t q = 0; q < cols; ++q) d[q] += src[q];
      }
  }
  if (!opened) open();  // no tap reads the input: the bias alone
  if (post.residual || post.clamp || post.hardswish) finish(o, rn ? rn + oc0 * P : nullptr, ocs * P, post);
}

}  // namespace

double conv_live_tap_share(const ConvShape& s) {
  const double all = double(s.k_h * s.k_w) * double(s.out_h * s.out_w);
  return all <= 0 ? 1.0 : live_reads(live_rects(s)) / all;
}

bool conv_uses_tap_rects(const ConvShape& s) {
  // Up to 3/4 live: ASPP's dilation-6 conv (56% live) ran 1242 -> ~650 us, its dilation-12
  // one (25%) 1266 -> ~330 (1 thread, seg_dilated). Fewer than 64 outputs a channel leave
  // products a 16-column vector wide, where im2col's transposed product fills its panels.
  return s.group == 1 && s.k_h * s.k_w > 1 && s.in_c > 0 && s.out_c > 0 && s.out_h * s.out_w >= 64 &&
         conv_live_tap_share(s) <= 0.75;
}

size_t tap_rects_packed_floats(const ConvShape& s) {
  return size_t(s.k_h * s.k_w) * packed_a_floats(s.out_c, s.in_c);
}

void tap_rects_pack_weights(const ConvShape& s, const float* w, float* dst) {
  const int64_t taps = s.k_h * s.k_w, OC = s.out_c, IC = s.in_c;
  std::vector<float> wt(size_t(OC * IC));
  for (int64_t t = 0; t < taps; ++t) {
    for (int64_t i = 0; i < OC * IC; ++i) wt[size_t(i)] = w[i * taps + t];
    pack_a(wt.data(), IC, false, OC, IC, 1.f, dst + size_t(t) * packed_a_floats(OC, IC));
  }
}

void conv2d_tap_rects(const ConvShape& s, const float* x, const float* packed, const float* bias, float* out,
                      ThreadPool* pool, const ConvPostOps& post) {
  const int64_t P = s.out_h * s.out_w;
  if (P == 0 || s.out_c == 0) return;
  const std::vector<TapRect> rects = live_rects(s);
  const int64_t tiles = gemm_tiles(s.out_c);
  const int threads = threads_for(pool, live_reads(rects) * double(s.in_c) * double(s.out_c));
  // Output channels split by A tiles: each thread gathers the x_t it multiplies and reads only
  // its rows of the weights. (Bands of output rows instead, each thread all the weights: the
  // same time on ASPP's convs, 1 and 2 threads, weights warm or cold.)
  const int parts = int(std::min<int64_t>(threads, tiles));
  parallel_for(parts <= 1 ? nullptr : pool, parts, [&](int64_t i) {
    int64_t t0, t1;
    split_range(tiles, parts, i, t0, t1);
    const int64_t oc0 = t0 * kGemmMR, ocs = std::min(s.out_c, t1 * kGemmMR) - oc0;
    for (int64_t n = 0; n < s.batch; ++n)
      tap_rects_channels(s, rects, x + n * s.in_c * s.in_h * s.in_w, packed, bias, out + n * s.out_c * P,
                         post.residual ? post.residual + n * s.out_c * P : nullptr, oc0, ocs, post);
  });
}

}  // namespace nxrt::cpu
