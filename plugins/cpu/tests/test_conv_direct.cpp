// The direct product (conv.hpp: x^T read in place from padded input rows through pixel
// pointers, W^T's panels as B) against the reference: ResNet's and the real models' shapes
// (stride-2 3x3, the 512-channel 7x7 stage, 5x5, 3x1 / 1x3, 2x1 at stride (2, 1), dilation 2),
// pads larger than the kernel and asymmetric ones, channel counts off the 48-wide panels,
// batch 2, every post-op, NaN, more pixels than one product block holds, W^T over 2 MB (split
// by panels) and under (split by pixels) on 1-3 threads, and the kernel's W^T-only weights;
// then the GEMM with pixel pointers alone, and the cost model's choice.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "conv.hpp"
#include "conv_case.hpp"
#include "cpu_info.hpp"
#include "gemm.hpp"
#include "util.hpp"

using namespace nxrt::cpu;
using namespace nxrt::cpu::test;

namespace {

struct Geometry {
  int64_t kh, kw, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
};

ConvShape conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, const Geometry& g) {
  ConvShape s;
  s.batch = n; s.in_c = c; s.in_h = h; s.in_w = w; s.out_c = oc;
  s.k_h = g.kh; s.k_w = g.kw;
  s.stride_h = g.sh; s.stride_w = g.sw;
  s.dil_h = g.dh; s.dil_w = g.dw;
  s.pad_top = g.pt; s.pad_left = g.pl;
  s.out_h = (h + g.pt + g.pb - g.dh * (g.kh - 1) - 1) / g.sh + 1;
  s.out_w = (w + g.pl + g.pr - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  return s;
}

// k x k, stride st, pad p on every side.
Geometry square(int64_t k, int64_t st, int64_t p, int64_t d = 1) { return {k, k, st, st, d, d, p, p, p, p}; }

enum class Weights { packed, transposed_only };

void check(const ConvShape& s, ThreadPool* pool, const ConvPostOps& post_in = {}, bool residual = false,
           Weights kind = Weights::packed, bool nan = false) {
  ConvCase c(s, 31, post_in, residual);
  if (nan) c.x[size_t(s.in_w + 1)] = std::numeric_limits<float>::quiet_NaN();  // channel 0, (1, 1)
  const ConvPostOps& post = c.post;
  std::vector<float> got = c.output();
  PackedConvWeights pw = pack_conv_weights(s, c.w.data());
  AlignedFloats wt;
  if (kind == Weights::transposed_only) {  // as the Conv kernel keeps them: W^T alone
    wt.resize(conv_transposed_floats(s));
    pack_conv_weights_transposed(s, pw.data, wt.data());
    pw = conv_weights_view(s, nullptr);
    conv_set_prepacked_transposed(s, pw, wt.data());
  }
  if (active_isa() == Isa::avx512) CHECK(conv_uses_direct(s));  // every shape here takes the path there
  if (conv_uses_direct(s)) CHECK(conv_describe(s, pw, pool).find("direct") != std::string::npos);
  conv2d(s, c.x.data(), pw, c.bias(), got.data(), pool, post);
  INFO("C=" << s.in_c << " H=" << s.in_h << " W=" << s.in_w << " OC=" << s.out_c << " k=" << s.k_h << "x" << s.k_w
            << " stride=" << s.stride_h << "," << s.stride_w << " dil=" << s.dil_h << " pad=" << s.pad_top << ","
            << s.pad_left << " out=" << s.out_h << "x" << s.out_w << " batch=" << s.batch << " residual=" << residual
            << " clamp=" << post.clamp << " hardswish=" << post.hardswish
            << " threads=" << (pool ? pool->threads() : 1));
  if (nan) {
    // Output (0, 0) of a 3x3 conv, pad 1, stride 1 reads input (1, 1); (0, 3) does not.
    for (int64_t m = 0; m < s.out_c; ++m) {
      CHECK(std::isnan(got[size_t(m * s.out_h * s.out_w)]));
      CHECK(!std::isnan(got[size_t(m * s.out_h * s.out_w + 3)]));
    }
    return;
  }
  CHECK(worst(got, c.want, 1e-4, 1e-5) <= 1.0);
}

ConvPostOps relu() {
  ConvPostOps p;
  p.clamp = true;
  p.lo = 0.f;
  p.hi = std::numeric_limits<float>::infinity();
  return p;
}

}  // namespace

TEST_CASE("direct convs match the reference: real models' shapes, pads, channels, post-ops, threads") {
  ThreadPool pool2(2), pool3(3);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
    check(conv(1, 32, 18, 18, 128, square(3, 2, 1)), p, relu());       // ResNet's stride-2 3x3, smaller
    check(conv(1, 16, 24, 22, 32, square(3, 2, 1)), p, relu());        // strided, 32 channels (AVX-512 direct)
    check(conv(1, 32, 26, 24, 64, square(3, 2, 1)), p, relu(), true);  // strided, 64: 156 pixels, 6 x 64
    check(conv(1, 24, 9, 7, 40, square(5, 1, 2)), p);                  // ocr's 5x5, OC off the panels
    check(conv(1, 16, 4, 20, 72, {3, 1, 1, 1, 1, 1, 1, 0, 1, 0}), p);   // 3x1, pads on rows only
    check(conv(1, 16, 4, 20, 48, {1, 3, 1, 1, 1, 1, 0, 1, 0, 1}), p);   // 1x3
    check(conv(1, 32, 4, 21, 99, {2, 1, 2, 1, 1, 1, 0, 0, 0, 0}), p);   // 2x1 at stride (2, 1), 99 channels
    check(conv(1, 16, 12, 12, 48, square(3, 1, 2, 2)), p);             // dilation 2
    check(conv(1, 8, 11, 13, 96, {3, 3, 2, 2, 1, 1, 0, 0, 1, 1}), p);   // "SAME" stride 2: pads at the end only
    check(conv(1, 8, 5, 6, 32, square(3, 1, 4)), p);                   // pads past the kernel: rows of padding only
    check(conv(1, 12, 10, 9, 97, square(3, 3, 1)), p);                 // stride 3
    check(conv(2, 16, 7, 7, 64, square(3, 1, 1)), p, relu(), true);    // batch 2 with a residual
    ConvPostOps hs;
    hs.hardswish = true;
    check(conv(1, 16, 9, 9, 112, square(3, 2, 1)), p, hs, true);       // HardSwish after the residual
    // 2304 pixels: two product blocks of 2048 (32 channels, 256 KB) on one thread.
    check(conv(1, 8, 48, 48, 32, square(3, 1, 1)), p, relu());
    // 96 x 96 outputs of 64 input channels: padded bands of 83 output rows (2 MB), 4 product blocks each.
    check(conv(1, 64, 96, 96, 32, square(3, 1, 1)), p, relu());
    // W^T of 2.2 MB (1440 x 400): split by panels (9: 8 of 48 + one of 16), K in 9 blocks.
    check(conv(1, 160, 7, 7, 400, square(3, 1, 1)), p, relu(), true);
    check(conv(1, 32, 6, 6, 64, square(3, 1, 1)), p, {}, false, Weights::packed, true);  // NaN propagates
  }
  // The Conv kernel keeps only W^T for these shapes (no packed A): conv2d reads it alone.
  check(conv(1, 64, 14, 14, 128, square(3, 2, 1)), &pool2, relu(), true, Weights::transposed_only);
  check(conv(1, 64, 7, 7, 96, square(3, 1, 1)), nullptr, {}, false, Weights::transposed_only);
  // Output channels in whole 64s, 100+ pixels: 6 x 64 tiles on AVX-512 (W^T in 64-wide
  // panels, packed lazily or kept alone), across threads and with the residual.
  const ConvShape p64a = conv(1, 32, 24, 26, 64, square(3, 1, 1)), p64b = conv(2, 16, 30, 29, 128, square(3, 2, 1)),
                  p64c = conv(1, 24, 21, 20, 192, square(5, 1, 2));
  for (const ConvShape& s : {p64a, p64b, p64c}) {
    CHECK(conv_direct_panels64(s) == (active_isa() == Isa::avx512));
    CHECK(conv_describe(s, pack_conv_weights(s, std::vector<float>(size_t(s.out_c * s.icg() * s.k_h * s.k_w)).data()),
                        nullptr)
              .ends_with(active_isa() == Isa::avx512 ? "avx512f-6x64" : gemm_kernel_name()));
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool2}) {
      check(s, p, relu(), true);
      if (conv_uses_transposed(s)) check(s, p, {}, false, Weights::transposed_only);  // as the Conv kernel would
    }
  }
  CHECK_FALSE(conv_direct_panels64(conv(1, 512, 7, 7, 512, square(3, 1, 1))));  // 49 pixels: 8 x 48
  CHECK_FALSE(conv_direct_panels64(conv(1, 64, 20, 20, 96, square(3, 1, 1))));  // 96 channels
}

namespace {

enum class Panels { w48, w64, tail64 };

// gemm_pixels_serial (48-wide panels), gemm_pixels64_serial or gemm_pixels_tail64_serial (B
// packed from W [n][k], pack_b_tail64's transposed read) against a double reference:
// A(m, k) = src[m * 3 + (k * 5) % 97 + k / 97 * 101] (rows overlapping, offsets out of order),
// bias and clamp in the epilogue.
void check_pixels_gemm(int64_t M, int64_t N, int64_t K, Panels layout) {
  const bool panels64 = layout == Panels::w64;
  auto src = random_floats(size_t(M * 3 + 101 * (K / 97 + 1) + 97), 41);
  std::vector<const float*> rows(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) rows[size_t(m)] = src.data() + m * 3;
  std::vector<int32_t> aoff(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) aoff[size_t(k)] = int32_t((k * 5) % 97 + k / 97 * 101);
  auto b = random_floats(size_t(K * N), 42);  // B [k][n]
  auto bias = random_floats(size_t(N), 43);
  AlignedFloats pb(layout == Panels::tail64 ? packed_b_tail64_floats(K, N)
                   : panels64                ? packed_b64_floats(K, N)
                                             : packed_b_floats(K, N));
  if (layout == Panels::tail64) {
    std::vector<float> w(b.size());  // W [n][k]
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) w[size_t(n * K + k)] = b[size_t(k * N + n)];
    pack_b_tail64(w.data(), K, true, K, N, pb.data());
  } else if (panels64) {
    pack_b64(K, N, [&](int64_t n, int64_t k) { return b[size_t(k * N + n)]; }, pb.data());
  } else {
    pack_b(b.data(), N, false, K, N, pb.data());
  }
  GemmEpilogue ep;
  ep.col_bias = bias.data();
  ep.clamp = true;
  ep.lo = -0.5f;
  ep.hi = 0.75f;
  std::vector<float> got(size_t(M * N), 9.f), want(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = bias[size_t(n)];
      for (int64_t k = 0; k < K; ++k) acc += double(rows[size_t(m)][aoff[size_t(k)]]) * b[size_t(k * N + n)];
      want[size_t(m * N + n)] = float(std::clamp(acc, -0.5, 0.75));
    }
  if (layout == Panels::tail64)
    gemm_pixels_tail64_serial(M, N, K, rows.data(), aoff.data(), pb.data(), got.data(), N, ep);
  else if (panels64) gemm_pixels64_serial(M, N, K, rows.data(), aoff.data(), pb.data(), got.data(), N, ep);
  else gemm_pixels_serial(M, N, K, rows.data(), aoff.data(), pb.data(), got.data(), N, ep);
  INFO("M=" << M << " N=" << N << " K=" << K << " layout=" << int(layout));
  CHECK(worst(got, want, 1e-4, 1e-5) <= 1.0);
}

}  // namespace

TEST_CASE("the GEMM with pixel pointers: row tiles, panels of 16 / 32 / 48, K blocks, the epilogue") {
  if (!gemm_pixels_panel_active()) return;  // AVX2 / AVX-512 only: conv_uses_direct is then false too
  for (int64_t M : {1, 7, 8, 13, 29})
    for (int64_t N : {16, 30, 48, 61, 100})
      for (int64_t K : {1, 9, 160, 161, 400}) check_pixels_gemm(M, N, K, Panels::w48);
}

TEST_CASE("the GEMM with pixel pointers, 6 x 64 tiles: row tiles, 64-wide panels, K blocks, the epilogue") {
  if (!gemm_pixels64_panel_avx512() || active_isa() != Isa::avx512) return;
  for (int64_t N : {64, 128, 192})
    for (int64_t M : {1, 5, 6, 7, 13, 40})
      for (int64_t K : {1, 27, 147, 160, 161, 400}) check_pixels_gemm(M, N, K, Panels::w64);
}

TEST_CASE("the GEMM with pixel pointers, 48-wide panels then a 64-wide one: N = 48 q + 16") {
  const bool avx512 = active_isa() == Isa::avx512 && gemm_pixels64_panel_avx512();
  for (int64_t N : {64, 112, 160, 208, 256}) CHECK(gemm_pixels_tail64(N) == avx512);
  for (int64_t N : {16, 32, 48, 63, 96, 100, 128, 192, 320}) {
    INFO("N=" << N);
    CHECK_FALSE(gemm_pixels_tail64(N));
  }
  if (!avx512) return;
  for (int64_t N : {64, 112, 160, 256})
    for (int64_t M : {1, 5, 6, 7, 8, 13, 40})
      for (int64_t K : {1, 27, 160, 161, 400}) check_pixels_gemm(M, N, K, Panels::tail64);
}

TEST_CASE("the cost model: direct for 32+ (AVX2: 64+, strided 96+) output and 8+ input channels, not for stems or 1x1") {
  const bool simd = active_isa() != Isa::generic, avx512 = active_isa() == Isa::avx512;
  CHECK(conv_uses_direct(conv(1, 64, 56, 56, 128, square(3, 2, 1))) == simd);   // ResNet's stride-2 3x3
  CHECK(conv_uses_direct(conv(1, 512, 7, 7, 512, square(3, 1, 1))) == simd);    // its 7x7 stage
  CHECK(conv_uses_transposed(conv(1, 64, 56, 56, 128, square(3, 2, 1))) == simd);  // it reads W^T
  CHECK(conv_uses_direct(conv(1, 32, 40, 40, 32, square(3, 1, 1))) == avx512);  // 32 channels: AVX-512 only
  CHECK(conv_uses_direct(conv(1, 32, 80, 80, 64, square(3, 2, 1))) == avx512);  // strided, 64: AVX2 phase rows
  CHECK(!conv_uses_direct(conv(1, 3, 224, 224, 64, square(7, 2, 3))));    // the stem: 3 input channels
  CHECK(!conv_uses_direct(conv(1, 16, 80, 80, 16, square(3, 1, 1))));     // 16 output channels
  CHECK(!conv_uses_direct(conv(1, 64, 28, 28, 128, square(1, 2, 0))));    // strided 1x1
  ConvShape grouped = conv(1, 64, 14, 14, 64, square(3, 1, 1));
  grouped.group = 2;
  CHECK(!conv_uses_direct(grouped));
}
