// The stem's F(4x4, 4x4) over the input's stride phases (conv_stem_winograd.hpp) against the
// direct reference: 1-4 input channels, 7x7 and 8x8 kernels, pads 0-3 and asymmetric, widths
// off the 4-column tiles and the 8-column phase chunks, row ranges that start anywhere and end
// inside a tile, bias or none, every activation; and conv2d_max_pool choosing it.
#include <doctest/doctest.h>

#include <cmath>

#include "conv.hpp"
#include "conv_case.hpp"
#include "conv_stem_winograd.hpp"
#include "cpu_info.hpp"
#include "pooling.hpp"
#include "util.hpp"

using namespace nxrt::cpu;
using namespace nxrt::cpu::test;

namespace {

ConvShape stem_shape(int64_t c, int64_t h, int64_t w, int64_t k, int64_t pad_top, int64_t pad_left, int64_t oc = 64) {
  ConvShape s;
  s.in_c = c; s.in_h = h; s.in_w = w; s.out_c = oc;
  s.k_h = s.k_w = k;
  s.stride_h = s.stride_w = 2;
  s.pad_top = pad_top; s.pad_left = pad_left;
  s.out_h = (h + 2 * pad_top - k) / 2 + 1;
  s.out_w = (w + 2 * pad_left - k) / 2 + 1;
  return s;
}

// Rows [r0, r1) against the reference, within a few ulp of sum |x||w| per output (the
// transforms' rounding; the direct sum of 147 products carries about the same).
void check_rows(const ConvShape& s, const ConvPostOps& post, bool with_bias, int64_t r0, int64_t r1) {
  const ConvCase c(s, 71, post, false, with_bias);
  // sum |x||w| per output: the reference over the magnitudes.
  std::vector<float> ax(c.x.size()), aw(c.w.size()), mag(c.want.size());
  for (size_t i = 0; i < ax.size(); ++i) ax[i] = std::fabs(c.x[i]);
  for (size_t i = 0; i < aw.size(); ++i) aw[i] = std::fabs(c.w[i]);
  conv2d_reference(s, ax.data(), aw.data(), nullptr, mag.data());
  AlignedFloats u(stem_winograd_packed_floats(s));
  stem_winograd_pack_weights(s, c.w.data(), u.data());
  const int64_t OW = s.out_w, plane = s.out_h * OW;
  const int64_t OC = s.out_c;
  AlignedFloats dst(size_t((r1 - r0) * OW * OC + 64));
  for (size_t i = 0; i < dst.size(); ++i) dst.data()[i] = 123.f;
  stem_winograd_rows(s, c.x.data(), u.data(), c.bias(), post, r0, r1, dst.data());
  double worst_ratio = 0;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t col = 0; col < OW; ++col)
      for (int64_t oc = 0; oc < OC; ++oc) {
        const size_t o = size_t(oc * plane + r * OW + col);
        const double got = dst.data()[((r - r0) * OW + col) * OC + oc], want = c.want[o];
        const double tol = 1e-5 * double(mag[o]) + 1e-6;
        worst_ratio = std::max(worst_ratio, std::fabs(got - want) / tol);
      }
  INFO("IC=" << s.in_c << " OC=" << OC << " " << s.in_h << "x" << s.in_w << " k=" << s.k_h << " pad=" << s.pad_top << "/"
             << s.pad_left << " rows [" << r0 << ", " << r1 << ") of " << s.out_h << " bias=" << with_bias
             << " clamp=" << post.clamp << " hardswish=" << post.hardswish);
  CHECK(worst_ratio <= 1.0);
  CHECK(dst.data()[(r1 - r0) * OW * OC] == 123.f);  // nothing past the rows
}

}  // namespace

TEST_CASE("stem F(4x4, 4x4) over stride phases matches the direct conv") {
  if (active_isa() != Isa::avx512) return;  // the kernel is AVX-512 only; conv_stem_winograd_ok says so
  ConvPostOps hs;
  hs.hardswish = true;
  // ResNet's stem cut down: 3 channels, 7x7, pad 3.
  const ConvShape resnet = stem_shape(3, 40, 46, 7, 3, 3);
  CHECK(conv_stem_winograd_ok(resnet));
  check_rows(resnet, {}, true, 0, resnet.out_h);
  check_rows(resnet, clamp_post(0.f, 6.f), true, 5, 12);  // starts off the tile grid, ends inside a tile
  check_rows(resnet, hs, false, resnet.out_h - 1, resnet.out_h);
  // 1, 2 and 4 channels; 8x8 kernels; pads 0-2 and asymmetric; widths of 1-13 tiles.
  check_rows(stem_shape(1, 23, 19, 7, 3, 3), {}, true, 0, 12);
  check_rows(stem_shape(2, 30, 51, 7, 0, 2), clamp_post(0.f, 6.f), false, 1, 10);
  check_rows(stem_shape(4, 17, 70, 8, 1, 3), {}, true, 0, 6);
  check_rows(stem_shape(3, 9, 7, 7, 2, 0), hs, true, 0, 2);
  check_rows(stem_shape(3, 14, 100, 8, 3, 1), {}, false, 2, 6);
  check_rows(stem_shape(3, 16, 224, 7, 3, 3), clamp_post(0.f, 6.f), true, 1, 8);  // ResNet's 28 tiles a row
  // 16, 32 and 48 output channels (one to three vectors).
  check_rows(stem_shape(3, 30, 41, 7, 3, 3, 16), hs, true, 0, 15);
  check_rows(stem_shape(3, 30, 41, 7, 3, 3, 32), clamp_post(0.f, 6.f), true, 3, 15);
  check_rows(stem_shape(2, 22, 60, 8, 2, 3, 48), {}, false, 0, 9);
  // Shapes it is not for: 3x3, stride 1, 5 input channels, 40 or 80 output channels.
  CHECK_FALSE(conv_stem_winograd_ok(stem_shape(3, 20, 20, 3, 1, 1)));
  ConvShape s1 = resnet;
  s1.stride_h = s1.stride_w = 1;
  CHECK_FALSE(conv_stem_winograd_ok(s1));
  CHECK_FALSE(conv_stem_winograd_ok(stem_shape(5, 20, 20, 7, 3, 3)));
  CHECK_FALSE(conv_stem_winograd_ok(stem_shape(3, 20, 20, 7, 3, 3, 40)));
  CHECK_FALSE(conv_stem_winograd_ok(stem_shape(3, 20, 20, 7, 3, 3, 80)));
}

TEST_CASE("conv2d_max_pool runs the stem by F(4x4, 4x4): equal to the reference conv then max_pool") {
  // Batch 2, ResNet's pool (3x3 / 2, pad 1), 1-3 threads: the row blocks each thread makes
  // start where its pooled rows' windows start, off the tile grid.
  ThreadPool pool2(2), pool3(3);
  for (int64_t oc : {64, 32}) {
    ConvShape s = stem_shape(3, 61, 58, 7, 3, 3, oc);
    s.batch = 2;
    const ConvCase c(s, 81, clamp_post(0.f, 6.f));
    const PoolShape ps = pool_over(s, 3, 2, 1);
    std::vector<float> want(size_t(s.batch * s.out_c * ps.out[1] * ps.out[2]));
    max_pool(ps, c.want.data(), want.data(), nullptr);
    const PackedConvWeights packed = pack_conv_weights(s, c.w.data());
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
      INFO("OC=" << oc << " threads=" << (p ? p->threads() : 1));
      std::vector<float> got(want.size(), 123.f);
      conv2d_max_pool(s, c.x.data(), packed, c.bias(), ps, got.data(), p, c.post);
      // Outputs are sums of 147 products of [-1, 1] values (sum |x||w| <= 147): 2e-4 absolute
      // is ~1.4e-6 of that bound.
      CHECK(worst(got, want, 1e-4, 2e-4) <= 1.0);
    }
    if (active_isa() == Isa::avx512)
      CHECK(conv_max_pool_describe(s, packed, nullptr).find("F(4x4,4x4)") != std::string::npos);
  }
}
