// Winograd F(4x4, 3x3) against the direct reference: odd sizes (partial tiles),
// pads 0..2 and asymmetric, batch, every post-op, 1 and 2 threads, and the
// conv2d dispatch (PackedConvWeights::winograd).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "conv.hpp"
#include "cpu_info.hpp"
#include "conv_case.hpp"
#include "conv_winograd.hpp"
#include "util.hpp"

using namespace nxrt::cpu;
using namespace nxrt::cpu::test;

namespace {

// A k x k stride-1 conv with `pad` on every side.
ConvShape square(int64_t k, int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t pad) {
  ConvShape s;
  s.batch = n; s.in_c = c; s.in_h = h; s.in_w = w; s.out_c = oc;
  s.k_h = s.k_w = k;
  s.pad_top = s.pad_left = pad;
  s.out_h = h + 2 * pad - (k - 1);
  s.out_w = w + 2 * pad - (k - 1);
  return s;
}

ConvShape shape3x3(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t pad) {
  return square(3, n, c, h, w, oc, pad);
}

ConvShape shape5x5(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t pad) {
  return square(5, n, c, h, w, oc, pad);
}

// |got - want| against the rounding a float32 sum of C*9 products can carry
// (the transforms scale it by up to ~100 for F(4x4, 3x3)), relative to sum |x||w|.
void check(const ConvShape& s, ThreadPool* pool, const ConvPostOps& post_in = {}, bool with_residual = false) {
  const ConvCase c(s, 31, post_in, with_residual);
  const ConvPostOps& post = c.post;
  const std::vector<float>& want = c.want;
  const size_t n_out = want.size();
  std::vector<float> got = c.output();
  AlignedFloats u(winograd_packed_floats(s));
  winograd_pack_weights(s, c.w.data(), u.data());
  conv2d_winograd(s, c.x.data(), u.data(), c.bias(), got.data(), pool, post);
  // random_floats are in [-1, 1]: sum |x||w| <= 9 C (a 5x5 conv: its four 3x3 blocks, 36 C).
  const double scale = (s.k_h == 5 ? 36.0 : 9.0) * double(s.in_c), tol = 2e-6 * scale;
  double max_err = 0;
  for (size_t i = 0; i < n_out; ++i) max_err = std::max(max_err, std::fabs(double(got[i]) - double(want[i])));
  INFO("C=" << s.in_c << " H=" << s.in_h << " W=" << s.in_w << " OC=" << s.out_c << " pad=" << s.pad_top << "/"
            << s.pad_left << " batch=" << s.batch << " residual=" << with_residual << " clamp=" << post.clamp);
  CHECK(max_err <= tol);
  if (post.clamp)
    for (float v : got) CHECK((v >= post.lo && v <= post.hi));
}

}  // namespace

TEST_CASE("Winograd F(4x4,3x3) matches the direct conv: partial tiles, pads, batch, threads") {
  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    check(shape3x3(1, 16, 16, 16, 16, 1), p);    // whole tiles
    check(shape3x3(1, 17, 13, 11, 19, 1), p);    // partial tiles both ways, odd channel counts
    check(shape3x3(2, 8, 9, 10, 24, 0), p);      // no pad, batch 2
    check(shape3x3(1, 5, 7, 23, 6, 2), p);       // pad 2 (a zero ring beyond the taps)
    check(shape3x3(1, 64, 30, 30, 50, 1), p);    // T = 64: more than one B panel
    check(shape3x3(1, 3, 3, 3, 2, 0), p);        // one output pixel
    // Rows of 5-7 tiles (two input channels a pass on AVX-512), odd and even channel counts.
    check(shape3x3(1, 9, 28, 28, 12, 1), p);     // 7 tiles a row
    check(shape3x3(1, 6, 20, 19, 8, 1), p);      // 5
    check(shape3x3(1, 7, 22, 24, 5, 0), p);      // 6, no pad, a partial last tile
  }
  ConvShape s = shape3x3(1, 12, 12, 14, 20, 1);  // asymmetric pads [1, 0] begin
  s.pad_left = 0;
  s.out_w = 14 - 2 + 1;                          // end pad 1 on the right
  check(s, &pool);
}

TEST_CASE("Winograd in blocks of tiles per thread matches the reference and the serial run") {
  // T >= 24 tiles per thread: each thread transforms, multiplies and stores its
  // own block of tiles, which starts and ends inside rows of tiles.
  ConvPostOps relu;
  relu.clamp = true;
  relu.lo = 0.f;
  relu.hi = std::numeric_limits<float>::infinity();
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    check(shape3x3(1, 16, 76, 76, 24, 1), &pool);              // 19 x 19 tiles, whole
    check(shape3x3(1, 17, 73, 70, 20, 1), &pool, relu, true);  // partial tiles both ways, residual, Relu
    check(shape3x3(2, 16, 74, 76, 16, 0), &pool);              // no pad, batch 2
    check(shape3x3(1, 32, 26, 29, 32, 1), &pool, relu, true);  // 7 x 8 tiles: blocks of 28 / 18-19
    check(shape3x3(1, 16, 50, 14, 16, 1), &pool, relu);        // 13 x 4 tiles: rows packed 4 a pass, blocks mid-row
    check(shape3x3(1, 17, 28, 28, 16, 1), &pool, relu, true);  // 7 x 7 tiles: two channels a pass, odd count
    check(shape3x3(1, 16, 100, 27, 16, 1), &pool);             // 25 x 7 tiles
  }
  // The same products in the same order as one thread: bit for bit.
  const ConvShape s = shape3x3(1, 32, 57, 59, 40, 1);
  auto x = random_floats(size_t(s.in_c * s.in_h * s.in_w), 51);
  auto w = random_floats(size_t(s.out_c * s.in_c * 9), 52);
  AlignedFloats u(winograd_packed_floats(s));
  winograd_pack_weights(s, w.data(), u.data());
  const size_t n_out = size_t(s.out_c * s.out_h * s.out_w);
  std::vector<float> serial(n_out), blocked(n_out, 5.f);
  ThreadPool pool(2);
  conv2d_winograd(s, x.data(), u.data(), nullptr, serial.data(), nullptr, {});
  conv2d_winograd(s, x.data(), u.data(), nullptr, blocked.data(), &pool, {});
  CHECK(serial == blocked);
}

TEST_CASE("Winograd applies bias, residual, Relu and Clip in its store") {
  ThreadPool pool(2);
  ConvPostOps relu;
  relu.clamp = true;
  relu.lo = 0.f;
  relu.hi = std::numeric_limits<float>::infinity();
  ConvPostOps clip;
  clip.clamp = true;
  clip.lo = -0.3f;
  clip.hi = 0.6f;
  check(shape3x3(1, 16, 14, 15, 24, 1), nullptr, {}, true);
  check(shape3x3(1, 16, 14, 15, 24, 1), &pool, relu, true);
  check(shape3x3(2, 16, 9, 9, 16, 1), &pool, clip, false);
}

TEST_CASE("conv2d runs Winograd weights when the cost model picks it") {
  CHECK(conv_uses_winograd(shape3x3(1, 64, 56, 56, 64, 1)));
  CHECK(conv_uses_winograd(shape3x3(1, 256, 14, 14, 256, 1)));
  CHECK(!conv_uses_winograd(shape3x3(1, 512, 7, 7, 512, 1)));  // 4 tiles: most of a panel is padding
  CHECK(!conv_uses_winograd(shape3x3(1, 3, 224, 224, 64, 1)));  // 3 input channels: transforms dominate
  ConvShape strided = shape3x3(1, 64, 56, 56, 64, 1);
  strided.stride_h = strided.stride_w = 2;
  CHECK(!winograd_shape_ok(strided));
  ConvShape s = shape3x3(1, 32, 20, 18, 40, 1);
  REQUIRE(conv_uses_winograd(s));
  auto x = random_floats(size_t(s.in_c * s.in_h * s.in_w), 41);
  auto w = random_floats(size_t(s.out_c * s.in_c * 9), 42);
  std::vector<float> want(size_t(s.out_c * s.out_h * s.out_w)), got(want.size(), 7.f);
  conv2d_reference(s, x.data(), w.data(), nullptr, want.data());
  AlignedFloats u(winograd_packed_floats(s));
  winograd_pack_weights(s, w.data(), u.data());
  PackedConvWeights pw;
  pw.winograd = u.data();
  conv2d(s, x.data(), pw, nullptr, got.data(), nullptr);
  CHECK(worst(got, want, 1e-3, 2e-4) <= 1.0);
}

TEST_CASE("on 2 threads small layers run the direct product where Winograd's threaded form loses") {
  ThreadPool two(2);
  const ConvShape fpn = shape3x3(1, 64, 20, 20, 64, 1);  // 25 tiles, 14.7 M multiply-adds
  REQUIRE(conv_uses_winograd(fpn));
  CHECK(!conv_winograd_loses_threaded(fpn, nullptr));  // one thread: Winograd
  const bool avx512 = active_isa() == Isa::avx512;
  CHECK(conv_winograd_loses_threaded(fpn, &two) == avx512);
  CHECK(conv_winograd_loses_threaded(shape3x3(1, 128, 10, 10, 128, 1), &two) == avx512);  // F(2x2)'s
  CHECK(!conv_winograd_loses_threaded(shape3x3(1, 32, 40, 40, 32, 1), &two));    // 100 tiles: a block a thread
  CHECK(!conv_winograd_loses_threaded(shape3x3(1, 256, 14, 14, 256, 1), &two));  // 116 M multiply-adds
  CHECK(!conv_winograd_loses_threaded(shape3x3(1, 16, 20, 20, 16, 1), &two));    // no direct product (16 channels)
}

TEST_CASE("dilated convs run as one Winograd conv per phase of the dilation grid") {
  ThreadPool pool(2);
  auto dilated = [](int64_t c, int64_t h, int64_t w, int64_t oc, int64_t dh, int64_t dw, int64_t ph, int64_t pw) {
    ConvShape s;
    s.in_c = c; s.in_h = h; s.in_w = w; s.out_c = oc;
    s.k_h = s.k_w = 3;
    s.dil_h = dh; s.dil_w = dw;
    s.pad_top = ph; s.pad_left = pw;
    s.out_h = h + 2 * ph - 2 * dh;
    s.out_w = w + 2 * pw - 2 * dw;
    return s;
  };
  ConvPostOps relu;
  relu.clamp = true;
  relu.lo = 0.f;
  relu.hi = std::numeric_limits<float>::infinity();
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    check(dilated(32, 16, 16, 24, 2, 2, 2, 2), p);            // DeepLab's dilation-2 stage
    check(dilated(17, 13, 19, 20, 2, 3, 2, 3), p);            // different dilations, odd sizes
    check(dilated(16, 16, 16, 16, 6, 6, 6, 6), p, relu, true);  // ASPP rate 6, fused Add + Relu
    check(dilated(8, 11, 9, 8, 2, 2, 0, 1), p);               // no pad in rows
    // Dilated rows only: the AVX-512 input transform takes whole tile rows of <= 4 tiles
    // 4 to a pass (here 2 rows of 4 per phase, then 4 rows of 3 with a partial last tile).
    check(dilated(16, 20, 18, 24, 2, 1, 2, 1), p, relu, true);
    check(dilated(8, 26, 10, 8, 2, 1, 2, 1), p);
    // Phase rows of 9-10 tiles: the AVX-512 input transform on gathered rows (dilated
    // columns), the last 16-tile step part full, padding on both sides.
    check(dilated(8, 70, 75, 8, 2, 2, 2, 2), p, relu);
    check(dilated(4, 40, 101, 6, 3, 3, 1, 3), p);
  }
  CHECK(conv_uses_winograd(dilated(256, 16, 16, 256, 2, 2, 2, 2)));
  CHECK(!conv_uses_winograd(dilated(256, 16, 16, 128, 12, 12, 12, 12)));  // 1-2 outputs per phase
}

TEST_CASE("a 5x5 conv as F(4x4,3x3) over its kernel's four 3x3 blocks matches the direct conv") {
  // The shifted copies of the input carry the padding (0-3, asymmetric), partial tiles, batch,
  // residual and activations, 1-3 threads (blocks of tiles per thread and the three steps).
  ThreadPool pool2(2), pool3(3);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
    check(shape5x5(1, 32, 8, 80, 40, 2), p, clamp_post(0.f, 6.f));  // ocr_crnn's shape, thinner
    check(shape5x5(2, 33, 21, 19, 35, 1), p, {}, true);              // batch, partial tiles, residual
    check(shape5x5(1, 16, 30, 27, 20, 0), p);                        // no padding
    check(shape5x5(1, 8, 11, 13, 8, 3), p);                          // pad 3: rows of padding only
  }
  ConvShape s = shape5x5(1, 12, 17, 22, 24, 2);  // asymmetric: pads [2, 1] begin, end [1, 2]
  s.pad_left = 1;
  s.out_h = 17 + 2 + 1 - 4;
  s.out_w = 22 + 1 + 2 - 4;
  check(s, &pool2);
  // The cost model: ocr_crnn's 128-channel 8x80 map takes it, thin or tiny ones do not.
  CHECK(conv_uses_winograd(shape5x5(1, 128, 8, 80, 128, 2)));
  CHECK_FALSE(conv_uses_winograd(shape5x5(1, 16, 8, 80, 128, 2)));
  CHECK_FALSE(conv_uses_winograd(shape5x5(1, 128, 4, 4, 128, 2)));
  ConvShape strided = shape5x5(1, 128, 16, 16, 128, 2);
  strided.stride_h = strided.stride_w = 2;
  strided.out_h = strided.out_w = 8;
  CHECK_FALSE(conv_uses_winograd(strided));
  // Small ones on 2 threads keep the direct product, as 3x3 ones do.
  const ConvShape small = shape5x5(1, 32, 16, 16, 32, 2);
  CHECK(conv_uses_winograd(small));
  if (active_isa() == Isa::avx512 && conv_uses_direct(small)) CHECK(conv_winograd_loses_threaded(small, &pool2));
  CHECK_FALSE(conv_winograd_loses_threaded(small, nullptr));
}
