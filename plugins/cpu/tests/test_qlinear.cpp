// QConv and QMatMul (the packed 8-bit GEMM: AVX2 micro-kernel or the generic one under
// NXRT_CPU_ISA=generic) against the exact reference loops (conv_integer / gemm_integer) and
// the scalar QOutput store, byte for byte, over generated shapes, type mixes, output kinds,
// clamps and extreme values, with and without threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <random>
#include <span>
#include <vector>

#include "conv_int8_nhwc.hpp"
#include "conv_int8_winograd.hpp"
#include "cpu_info.hpp"
#include "gemm_int8.hpp"
#include "integer_linalg.hpp"
#include "qlinear.hpp"
#include "quantize.hpp"
#include "thread_pool.hpp"

using namespace nxrt::cpu;

namespace {

size_t esize(QType t) { return t == QType::U8 || t == QType::S8 ? 1 : 4; }
const char* tname(QType t) { return t == QType::U8 ? "u8" : t == QType::S8 ? "s8" : t == QType::I32 ? "i32" : "f32"; }

// 8-bit data of `t`, a third of it at the type's extremes.
std::vector<uint8_t> data8(QType t, size_t n, std::mt19937& g) {
  std::vector<uint8_t> v(n);
  std::uniform_int_distribution<int> d(0, 255), pick(0, 5);
  for (auto& e : v) {
    const int p = pick(g);
    e = p == 0 ? uint8_t(t == QType::U8 ? 0 : 0x80) : p == 1 ? uint8_t(t == QType::U8 ? 255 : 0x7f) : uint8_t(d(g));
  }
  return v;
}

// 8-bit weights as trained convs have them, per-channel quantized to the full range: a bell
// around the middle of the type (std 37 of 127), 1% at its extremes. On AVX2 the split quads
// run on these (a rest in some quads), while data8's third at the extremes keeps the pairs.
std::vector<uint8_t> bell8(QType t, size_t n, std::mt19937& g) {
  std::vector<uint8_t> v(n);
  std::normal_distribution<double> d(0.0, 37.0);
  std::uniform_int_distribution<int> pick(0, 199);
  const int mid = t == QType::U8 ? 128 : 0;
  for (auto& e : v) {
    const int p = pick(g);
    const int s = p == 0 ? -128 : p == 1 ? 127 : std::clamp(int(std::lround(d(g))), -128, 127);
    e = uint8_t(s + mid);
  }
  return v;
}

int32_t zp_of(QType t, std::mt19937& g) {
  std::uniform_int_distribution<int> pick(0, 4), d(0, 255);
  const int p = pick(g);
  if (t == QType::U8) return p == 0 ? 0 : p == 1 ? 255 : p == 2 ? 128 : d(g);
  return p == 0 ? -128 : p == 1 ? 127 : p == 2 ? 0 : d(g) - 128;
}

// A QOutput of `type` for `ch` channels: bias, per-tensor or per-channel scales (ties at
// 0.5), float bias, clamps, all picked at random.
QOutput make_output(QType type, int64_t ch, std::mt19937& g) {
  QOutput o;
  o.type = type;
  std::uniform_int_distribution<int> coin(0, 1), bd(-300000, 300000);
  std::uniform_real_distribution<float> sd(1e-4f, 2e-2f);
  if (coin(g))
    for (int64_t c = 0; c < ch; ++c) o.bias.push_back(c % 5 == 0 ? 2147483000 : bd(g));  // wraps near INT32_MAX
  if (type != QType::I32) {
    const int64_t ns = coin(g) ? ch : 1;
    for (int64_t c = 0; c < ns; ++c)
      o.scale.push_back(c % 4 == 1 ? 0.5 : double(sd(g)) * double(sd(g) * 50.f) / double(sd(g) * 10.f));
  }
  if (type == QType::F32) {
    if (coin(g))
      for (int64_t c = 0; c < ch; ++c) o.float_bias.push_back(float(bd(g)) * 1e-4f);
    if (coin(g)) {
      o.flo = 0.f;
      o.fhi = coin(g) ? 6.f : std::numeric_limits<float>::infinity();
    }
  }
  if (type == QType::U8 || type == QType::S8) {
    o.zero_point = zp_of(type, g);
    if (coin(g)) {  // Relu / Clip folded in, as the QDQ groups do
      o.lo = o.zero_point;
      if (coin(g)) o.hi = std::min<int32_t>(o.zero_point + 50, type == QType::U8 ? 255 : 127);
    }
  }
  return o;
}

template <typename F>
void with_8bit(QType a, QType b, F&& f) {
  auto with_b = [&](auto ta) {
    if (b == QType::U8) f(ta, uint8_t{});
    else f(ta, int8_t{});
  };
  if (a == QType::U8) with_b(uint8_t{});
  else with_b(int8_t{});
}

std::vector<uint8_t> conv_reference(const ConvShape& s, QType xt, const std::vector<uint8_t>& x, int32_t x_zp, QType wt,
                                    const std::vector<uint8_t>& w, const std::vector<int32_t>& w_zp, const QOutput& o) {
  const int64_t plane = s.out_h * s.out_w, total = s.batch * s.out_c * plane;
  std::vector<int32_t> acc(static_cast<size_t>(total));
  with_8bit(xt, wt, [&](auto tx, auto tw) {
    using TX = decltype(tx);
    using TW = decltype(tw);
    conv_integer(s, reinterpret_cast<const TX*>(x.data()), x_zp, reinterpret_cast<const TW*>(w.data()), w_zp.data(),
                 acc.data(), nullptr);
  });
  std::vector<uint8_t> y(size_t(total) * esize(o.type));
  for (int64_t t = 0; t < s.batch * s.out_c; ++t) q_store_channel(o, acc.data() + t * plane, plane, t % s.out_c, y.data(), t * plane);
  return y;
}

// q.run on each of `pools` (null: 1 thread) gives every byte of `want`.
void check_runs(const QConv& q, const ConvShape& s, const std::vector<uint8_t>& x, const std::vector<uint8_t>& want,
                std::initializer_list<ThreadPool*> pools) {
  for (ThreadPool* p : pools) {
    std::vector<uint8_t> got(want.size(), 0xcd);
    q.run(s, x.data(), got.data(), p);
    INFO("threads ", p ? p->threads() : 1);
    CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
  }
}

struct ConvCase {
  int64_t batch, in_c, in_h, in_w, out_c, group, k_h, k_w, sh, sw, dh, dw, pt, pl, pb, pr;
};

ConvShape shape_of(const ConvCase& c) {
  ConvShape s;
  s.batch = c.batch;
  s.in_c = c.in_c;
  s.in_h = c.in_h;
  s.in_w = c.in_w;
  s.out_c = c.out_c;
  s.group = c.group;
  s.k_h = c.k_h;
  s.k_w = c.k_w;
  s.stride_h = c.sh;
  s.stride_w = c.sw;
  s.dil_h = c.dh;
  s.dil_w = c.dw;
  s.pad_top = c.pt;
  s.pad_left = c.pl;
  s.out_h = (c.in_h + c.pt + c.pb - ((c.k_h - 1) * c.dh + 1)) / c.sh + 1;
  s.out_w = (c.in_w + c.pl + c.pr - ((c.k_w - 1) * c.dw + 1)) / c.sw + 1;
  return s;
}

// batch, in_c, in_h, in_w, out_c, group, kh, kw, sh, sw, dh, dw, pads t l b r
const ConvCase kConvCases[] = {
    {1, 8, 6, 7, 13, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},      // 1x1 stride 1: x read in place
    {2, 5, 9, 9, 7, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},       // 3x3 pad 1, odd K (45)
    {1, 16, 17, 19, 20, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},   // stride 2
    {1, 6, 11, 12, 9, 3, 3, 2, 1, 2, 2, 1, 2, 0, 1, 3},     // groups, dilation, asymmetric pads
    {1, 12, 8, 8, 12, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    // depthwise
    {1, 24, 7, 7, 24, 24, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2},    // depthwise 5x5 stride 2
    {1, 4, 1, 50, 6, 2, 1, 5, 1, 3, 1, 2, 0, 4, 0, 1},      // 1-D, groups
    {2, 3, 10, 9, 8, 1, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0},      // 1x1 stride 2 (im2col)
    {1, 64, 14, 14, 64, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   // a ResNet stage-3 layer, K = 576 > one K block
    {1, 7, 5, 5, 3, 1, 5, 5, 1, 1, 1, 1, 0, 0, 0, 0},       // one output pixel
    {1, 600, 3, 4, 5, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},     // K = 600 in place, two K blocks
    {1, 1100, 3, 5, 7, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    // K = 1100 in place: two K blocks of quads
    {1, 120, 6, 6, 10, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    // K = 1080 from the padded copy
    {1, 32, 4, 4, 70, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},     // more channels than pixels: threads split the rows
    {1, 128, 3, 3, 100, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   // the same per group, rows 50..99 straddle a tile
    {2, 40, 7, 7, 48, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},     // 49 pixels: a 1-column last panel
    {1, 24, 6, 6, 64, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},     // 9 pixels, stride 2: the same
    {1, 8, 11, 12, 8, 2, 3, 2, 1, 2, 2, 1, 2, 0, 1, 3},     // channel quads per group, dilation, asymmetric pads
    {1, 8, 13, 14, 12, 1, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1},    // stride 3: the channel quads' generic packer
};
}  // namespace

TEST_CASE("QMatMul equals gemm_integer + the scalar store, byte for byte") {
  std::mt19937 g(11);
  ThreadPool pool(3);
  const int64_t shapes[][3] = {{1, 1, 1}, {5, 7, 3},    {6, 16, 2},   {7, 17, 33},  {13, 48, 511},
                               {2, 3, 600}, {64, 40, 513}, {30, 100, 19}, {128, 33, 64}};
  const QType outs[] = {QType::I32, QType::F32, QType::U8, QType::S8};
  int cases = 0;
  for (const auto& sh : shapes)
    for (QType at : {QType::U8, QType::S8})
      for (QType bt : {QType::U8, QType::S8})
        for (QType ot : outs) {
          const int64_t M = sh[0], N = sh[1], K = sh[2];
          const auto a = data8(at, size_t(M * K), g), b = data8(bt, size_t(K * N), g);
          const int32_t a_zp = zp_of(at, g);
          std::vector<int32_t> b_zp(size_t(N), zp_of(bt, g));
          if (g() % 2)
            for (auto& z : b_zp) z = zp_of(bt, g);  // per column
          const QOutput o = make_output(ot, N, g);
          // Reference.
          std::vector<int32_t> acc(size_t(M * N));
          const std::vector<int32_t> azp(size_t(M), a_zp);
          with_8bit(at, bt, [&](auto ta, auto tb) {
            using TA = decltype(ta);
            using TB = decltype(tb);
            gemm_integer(M, N, K, reinterpret_cast<const TA*>(a.data()), azp.data(), reinterpret_cast<const TB*>(b.data()),
                         b_zp.data(), acc.data(), nullptr);
          });
          std::vector<uint8_t> want(size_t(M * N) * esize(ot));
          for (int64_t m = 0; m < M; ++m) q_store_row(o, acc.data() + m * N, N, 0, want.data(), m * N);
          const QMatMul q(at, a_zp, bt, b.data(), K, N, b_zp, o);
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            std::vector<uint8_t> got(want.size(), 0xcd);
            q.run(M, a.data(), got.data(), p);
            CAPTURE(M);
            CAPTURE(N);
            CAPTURE(K);
            INFO(tname(at), " x ", tname(bt), " -> ", tname(ot), p ? " threads" : "");
            CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
          }
          ++cases;
        }
  CHECK(cases == 9 * 16);
}

TEST_CASE("QMatMul: the int32 sum wraps as the reference's, K = 0 gives the bias") {
  // 255 * 255 * 40000 overflows int32: both wrap the same way.
  const int64_t K = 40000, N = 3;
  std::vector<uint8_t> a(size_t(K), 255), b(size_t(K * N), 255);
  QOutput o;
  o.type = QType::I32;
  const QMatMul q(QType::U8, 0, QType::U8, b.data(), K, N, {0, 0, 0}, o);
  std::vector<int32_t> y(3);
  q.run(1, a.data(), y.data(), nullptr);
  CHECK(y[0] == int32_t(uint32_t(255 * 255) * uint32_t(K)));
  QOutput ob;
  ob.type = QType::I32;
  ob.bias = {4, -5, 6};
  const QMatMul q0(QType::S8, 3, QType::S8, nullptr, 0, N, {1, 2, 3}, ob);
  std::vector<int32_t> y0(6, 99);
  q0.run(2, nullptr, y0.data(), nullptr);
  CHECK(y0 == std::vector<int32_t>{4, -5, 6, 4, -5, 6});
}

TEST_CASE("QMatMul / QConv refuse zero points out of range and QOutput vectors of another size") {
  QOutput o;
  o.type = QType::U8;
  o.scale = {1.0, 2.0};
  const uint8_t b[6] = {};
  CHECK_THROWS_AS(QMatMul(QType::U8, 0, QType::U8, b, 2, 3, {0, 0, 0}, o), std::invalid_argument);
  o.scale = {1.0};
  CHECK_THROWS_AS(QMatMul(QType::U8, 40000, QType::U8, b, 2, 3, {0, 0, 0}, o), std::invalid_argument);
  CHECK_THROWS_AS(QConv(QType::U8, 0, QType::U8, b, 5, {0, 0}, o), std::invalid_argument);  // 5 weights, 2 channels
}

// QConv (taps known: the channel quads where VNNI runs and IC/g % 4 == 0) against
// conv_integer + the scalar store, byte for byte, over `cases` x every x / w / output type, on
// each of `pools`; w_zp(type, channels) gives the weights' zero points, tweak(output, case)
// may change the output, each(conv, shape) checks more.
template <typename WZp, typename Tweak, typename Each>
void check_qconv_cases(std::span<const ConvCase> cases, std::mt19937& g, std::initializer_list<ThreadPool*> pools,
                       WZp&& w_zp_of, Tweak&& tweak, Each&& each) {
  int n = 0;
  for (const ConvCase& c : cases) {
    const ConvShape s = shape_of(c);
    for (QType xt : {QType::U8, QType::S8})
      for (QType wt : {QType::U8, QType::S8})
        for (QType ot : {QType::I32, QType::F32, QType::U8, QType::S8}) {
          const auto x = data8(xt, size_t(s.batch * s.in_c * s.in_h * s.in_w), g);
          const auto w = data8(wt, size_t(s.out_c * s.gemm_k()), g);
          const int32_t x_zp = zp_of(xt, g);
          const std::vector<int32_t> w_zp = w_zp_of(wt, s.out_c);
          QOutput o = make_output(ot, s.out_c, g);
          tweak(o, n);
          const auto want = conv_reference(s, xt, x, x_zp, wt, w, w_zp, o);
          const QConv q(xt, x_zp, wt, w.data(), int64_t(w.size()), w_zp, o, nullptr, s.k_h * s.k_w);
          each(q, s);
          for (ThreadPool* p : pools) {
            std::vector<uint8_t> got(want.size(), 0xcd);
            q.run(s, x.data(), got.data(), p);
            INFO("case ", n, ": ", tname(xt), " x ", tname(wt), " -> ", tname(ot), " threads ", p ? p->threads() : 1, " ",
                 q.describe());
            CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
          }
        }
    ++n;
  }
}

TEST_CASE("QConv equals conv_integer + the scalar store, byte for byte") {
  std::mt19937 g(5);
  ThreadPool pool(2);

  check_qconv_cases(
      kConvCases, g, {nullptr, &pool},
      [&](QType wt, int64_t channels) {
        std::vector<int32_t> w_zp(static_cast<size_t>(channels));
        for (auto& z : w_zp) z = zp_of(wt, g);
        return w_zp;
      },
      [](QOutput&, int) {}, [](const QConv&, const ConvShape&) {});
  // A run with another geometry than the weights' fails instead of reading past them.
  const ConvShape s = shape_of(kConvCases[1]);
  const std::vector<uint8_t> w(size_t(s.out_c * s.gemm_k()));
  QOutput o;
  o.scale = {1.0};
  const QConv q(QType::U8, 0, QType::U8, w.data(), int64_t(w.size()), std::vector<int32_t>(size_t(s.out_c)), o);
  ConvShape other = s;
  other.k_w = 2;
  std::vector<uint8_t> x(size_t(s.batch * s.in_c * s.in_h * s.in_w)), y(4096);
  CHECK_THROWS_AS(q.run(other, x.data(), y.data(), nullptr), std::invalid_argument);
}

// Symmetric weights on wide stride-1 maps: where VNNI runs, the channel quads read the
// interleaved copy of x in place (conv_int8.cpp conv_run_direct), its padding columns
// computed and dropped; pads, dilation, groups whose rows straddle a tile, two K blocks,
// batches, output rows split over 1-3 threads.
TEST_CASE("QConv with symmetric weights on wide maps equals conv_integer + the scalar store") {
  std::mt19937 g(17);
  ThreadPool two(2), three(3);
  const ConvCase cases[] = {
      {1, 16, 30, 28, 24, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},     // 28 wide, 24 channels
      {1, 8, 21, 60, 13, 1, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},      // dilation 2, a partial row tile
      {1, 32, 9, 56, 40, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},      // groups of 20 rows
      {2, 12, 17, 70, 7, 1, 5, 5, 1, 1, 1, 1, 2, 1, 2, 3},      // 5x5, asymmetric pads, 2 images
      {1, 128, 5, 40, 16, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},     // K = 1152: two K blocks
      {1, 64, 56, 56, 64, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},     // ResNet's 64@56
  };
  const bool direct = q_tile_direct_dpbusd(1) && q_store_kept_avx512();
  check_qconv_cases(
      cases, g, {nullptr, &two, &three},
      [](QType wt, int64_t channels) { return std::vector<int32_t>(static_cast<size_t>(channels), wt == QType::U8 ? 128 : 0); },
      [](QOutput& o, int n) {
        if (o.type == QType::U8 && n % 2) o.q_scale = 0.05f;  // the float value quantized in the store
      },
      [&](const QConv& q, const ConvShape& s) { CHECK(q.reads_b_in_place(s) == direct); });
  // 14 columns (1 of 15 computed and dropped) keep the packed panels; so do asymmetric weights.
  const ConvShape narrow = shape_of({1, 64, 14, 14, 64, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1});
  const auto w = data8(QType::S8, size_t(narrow.out_c * narrow.gemm_k()), g);
  const QOutput o = make_output(QType::U8, narrow.out_c, g);
  const QConv sym(QType::U8, 3, QType::S8, w.data(), int64_t(w.size()), std::vector<int32_t>(64, 0), o, nullptr, 9);
  CHECK(!sym.reads_b_in_place(narrow));
  const ConvShape wide = shape_of(cases[5]);
  CHECK(sym.reads_b_in_place(wide) == direct);
  std::vector<int32_t> w_zp(64, 0);
  w_zp[7] = 1;
  const QConv asym(QType::U8, 3, QType::S8, w.data(), int64_t(w.size()), w_zp, o, nullptr, 9);
  CHECK(!asym.reads_b_in_place(wide));
}

// Random geometries the direct path takes (1x1 to 5x5 kernels, pads up to 3 on either side,
// dilation up to 3, groups, widths 20-90, 8-bit x of either type, 1-3 threads): byte for byte
// against the reference.
TEST_CASE("QConv reading B in place: random geometries equal the reference") {
  if (!q_tile_direct_dpbusd(1) || !q_store_kept_avx512()) return;  // no VNNI: nothing takes the path
  std::mt19937 g(23);
  ThreadPool two(2), three(3);
  auto pick = [&](int lo, int hi) { return int64_t(std::uniform_int_distribution<int>(lo, hi)(g)); };
  int tested = 0;
  for (int attempt = 0; attempt < 400 && tested < 40; ++attempt) {
    const int64_t k = pick(1, 5), group = pick(1, 2), dil = pick(1, 3);
    const ConvCase c{pick(1, 2), 4 * pick(1, 4) * group, pick(3, 9), pick(20, 90), pick(1, 20) * group, group,
                     k, pick(1, 5), 1, 1, dil, dil, pick(0, 3), pick(0, 3), pick(0, 3), pick(0, 3)};
    const ConvShape s = shape_of(c);
    if (s.out_h < 1 || s.out_w < 1) continue;
    const QType xt = g() % 2 ? QType::U8 : QType::S8, ot = g() % 2 ? QType::U8 : QType::F32;
    const auto x = data8(xt, size_t(s.batch * s.in_c * s.in_h * s.in_w), g);
    const auto w = data8(QType::S8, size_t(s.out_c * s.gemm_k()), g);
    const std::vector<int32_t> w_zp(size_t(s.out_c), 0);
    const QOutput o = make_output(ot, s.out_c, g);
    const int32_t x_zp = zp_of(xt, g);
    const QConv q(xt, x_zp, QType::S8, w.data(), int64_t(w.size()), w_zp, o, nullptr, s.k_h * s.k_w);
    if (!q.reads_b_in_place(s)) continue;
    const auto want = conv_reference(s, xt, x, x_zp, QType::S8, w, w_zp, o);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &two, &three}) {
      std::vector<uint8_t> got(want.size(), 0xcd);
      q.run(s, x.data(), got.data(), p);
      INFO("attempt ", attempt, ": batch ", c.batch, " in ", c.in_c, "x", c.in_h, "x", c.in_w, " out ", c.out_c, " group ",
           c.group, " kernel ", c.k_h, "x", c.k_w, " dilation ", dil, " pads ", c.pt, " ", c.pl, " ", c.pb, " ", c.pr,
           " ", tname(xt), " -> ", tname(ot), " threads ", p ? p->threads() : 1);
      CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
    }
    ++tested;
  }
  CHECK(tested == 40);
}

// The exact Winograd F(4x4, 3x3) in int16 pairs (conv_int8_winograd.hpp), where VNNI runs:
// random 3x3 stride-1 geometries it pays on (pads 0-2 on either side, odd channel counts,
// maps whose panels hold 1, 2 or 4 tile rows or span a row, partial last tiles, 2 images),
// 8-bit x of either type and zero point, every output kind, 1-3 threads: byte for byte the
// reference. Up to 80 input channels the bound holds for any int8 weights (255 * 720 * 128 <
// 2^25), so every one of these takes the path.
TEST_CASE("QConv by exact Winograd: random geometries equal the reference") {
  if (!q_winograd_available()) return;  // no VNNI: the path does not exist
  std::mt19937 g(31);
  ThreadPool two(2), three(3);
  auto pick = [&](int lo, int hi) { return int64_t(std::uniform_int_distribution<int>(lo, hi)(g)); };
  int tested = 0;
  for (int attempt = 0; attempt < 400 && tested < 30; ++attempt) {
    const int64_t h = pick(6, 60), w = attempt % 5 == 0 ? pick(66, 90) : pick(6, 60);
    const ConvCase c{pick(1, 2), pick(32, 80), h, w, pick(16, 40), 1, 3, 3, 1, 1, 1, 1,
                     pick(0, 2), pick(0, 2), pick(0, 2), pick(0, 2)};
    const ConvShape s = shape_of(c);
    if (s.out_h < 1 || s.out_w < 1 || !q_winograd_pays(s)) continue;
    const QType xt = g() % 2 ? QType::U8 : QType::S8;
    const QType ot = std::array{QType::U8, QType::S8, QType::F32, QType::I32}[size_t(g() % 4)];
    const QType wt = g() % 3 ? QType::S8 : QType::U8;
    const auto x = data8(xt, size_t(s.batch * s.in_c * s.in_h * s.in_w), g);
    const auto wv = data8(wt, size_t(s.out_c * s.gemm_k()), g);
    const std::vector<int32_t> w_zp(size_t(s.out_c), wt == QType::U8 ? 128 : 0);
    QOutput o = make_output(ot, s.out_c, g);
    if (ot == QType::U8 && attempt % 3 == 0) o.q_scale = 0.05f;
    const int32_t x_zp = zp_of(xt, g);
    const QConv q(xt, x_zp, wt, wv.data(), int64_t(wv.size()), w_zp, o, nullptr, 9, &s);
    INFO("attempt ", attempt, ": batch ", c.batch, " in ", c.in_c, "x", c.in_h, "x", c.in_w, " out ", c.out_c, " pads ",
         c.pt, " ", c.pl, " ", c.pb, " ", c.pr, " ", tname(xt), " x ", tname(wt), " -> ", tname(ot), " x_zp ", x_zp);
    REQUIRE(q.uses_winograd(s));
    const auto want = conv_reference(s, xt, x, x_zp, wt, wv, w_zp, o);
    check_runs(q, s, x, want, {nullptr, &two, &three});
    ++tested;
  }
  CHECK(tested == 30);
}

// Every panel layout (conv_int8_winograd.cpp's Geom) and the few-tile products, on maps chosen
// for them, 1-3 threads (threads take their own tile rows, so layouts differ by thread count):
// 28x28 (49 tiles: 3 raster panels and one tile on 1 thread), 56x56 (13 raster panels; rows of
// 14 on 2 threads), 20x20 (raster over 5-tile rows), 36x36 (5 raster panels and one tile), 44x44
// (121 tiles in raster order), 20x40 (50 tiles: 3 panels and two), 16x80 (20-tile rows), 16x12
// (pitch 4, 12 tiles); odd and even pair counts (33, 35, 64 and 70 input channels: a last block
// of 1-7 pairs, an odd last pair). A few-tile panel at pitch 4 needs maps 1-2 tiles wide, where
// the cost model never takes Winograd.
TEST_CASE("QConv by exact Winograd: every panel layout and the few-tile products") {
  if (!q_winograd_available()) return;
  std::mt19937 g(77);
  ThreadPool two(2), three(3);
  const std::array<std::array<int64_t, 2>, 8> maps = {
      {{28, 28}, {56, 56}, {20, 20}, {36, 36}, {44, 44}, {20, 40}, {16, 80}, {16, 12}}};
  const std::array<int64_t, 4> channels = {33, 35, 64, 70};
  for (size_t i = 0; i < maps.size(); ++i) {
    const int64_t ic = channels[i % channels.size()], oc = i % 2 ? 24 : 17;
    const ConvShape s = shape_of({1, ic, maps[i][0], maps[i][1], oc, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1});
    const QType ot = i % 3 == 2 ? QType::I32 : QType::U8;  // the kept store and its shortcut
    const auto x = data8(QType::U8, size_t(ic * s.in_h * s.in_w), g);
    const auto wv = data8(QType::S8, size_t(oc * s.gemm_k()), g);
    const std::vector<int32_t> w_zp(size_t(oc), 0);
    const QOutput o = make_output(ot, oc, g);
    const QConv q(QType::U8, 7, QType::S8, wv.data(), int64_t(wv.size()), w_zp, o, nullptr, 9, &s);
    INFO(maps[i][0], "x", maps[i][1], ", ", ic, " -> ", oc, " channels, output kind ", int(ot));
    REQUIRE(q.uses_winograd(s));
    check_runs(q, s, x, conv_reference(s, QType::U8, x, 7, QType::S8, wv, w_zp, o), {nullptr, &two, &three});
  }
}

// The bound: every sum within [-2^25, 2^25), from the sums of the positive (P) and of the
// negative weights (N). At 230 input channels, the first half of weights 127 and the rest -127
// (P = N = 131,445) and x' 255 on one half, 0 on the other, the centre sum is +-33,518,475,
// 36k inside 2^25, and the int32 outputs are the reference's; at 232 channels the bound fails
// and the direct product runs; so do asymmetric weights and callers that did not ask for it.
TEST_CASE("QConv by exact Winograd: the int32 sums at the bound, and where it is not taken") {
  if (!q_winograd_available()) return;
  ThreadPool two(2);
  for (int64_t ic : {230, 232})
    for (int sign : {1, -1}) {
      const ConvShape s = shape_of({1, ic, 28, 28, 48, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1});
      std::vector<uint8_t> x(size_t(ic * 784)), w(size_t(48 * s.gemm_k()));
      for (int64_t c = 0; c < ic; ++c) {
        const bool first = c < ic / 2;
        std::fill(x.begin() + c * 784, x.begin() + (c + 1) * 784, uint8_t(first == (sign > 0) ? 255 : 0));
        for (int64_t m = 0; m < 48; ++m)
          std::fill_n(w.begin() + (m * ic + c) * 9, 9, uint8_t(int8_t(first ? 127 : -127)));
      }
      const std::vector<int32_t> w_zp(48, 0);
      QOutput o;
      o.type = QType::I32;
      const QConv q(QType::U8, 0, QType::S8, w.data(), int64_t(w.size()), w_zp, o, nullptr, 9, &s);
      INFO(ic, " channels, x' 255 where the weights are ", sign > 0 ? "positive" : "negative");
      CHECK(q.uses_winograd(s) == (ic == 230));
      const auto want = conv_reference(s, QType::U8, x, 0, QType::S8, w, w_zp, o);
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &two}) {
        std::vector<uint8_t> got(want.size(), 0xcd);
        q.run(s, x.data(), got.data(), p);
        CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
      }
      int32_t centre;
      std::memcpy(&centre, want.data() + 4 * (14 * 28 + 14), 4);
      CHECK(centre == sign * 255 * 127 * 9 * int32_t(ic / 2));
    }
  const ConvShape s = shape_of({1, 64, 28, 28, 32, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1});
  std::mt19937 g(5);
  const auto w = data8(QType::S8, size_t(32 * s.gemm_k()), g);
  const QOutput o = make_output(QType::U8, 32, g);
  std::vector<int32_t> w_zp(32, 0);
  CHECK(QConv(QType::U8, 3, QType::S8, w.data(), int64_t(w.size()), w_zp, o, nullptr, 9, &s).uses_winograd(s));
  CHECK(!QConv(QType::U8, 3, QType::S8, w.data(), int64_t(w.size()), w_zp, o, nullptr, 9).uses_winograd(s));
  w_zp[3] = 2;
  CHECK(!QConv(QType::U8, 3, QType::S8, w.data(), int64_t(w.size()), w_zp, o, nullptr, 9, &s).uses_winograd(s));
  // Shapes it does not pay on: stride 2, 7x7 (4 of a panel's 16 lanes hold tiles), a U' over
  // 8 MB (512 channels), few input channels; ResNet's 14x14 and 56x56 ones it does.
  const QConv q(QType::U8, 3, QType::S8, w.data(), int64_t(w.size()), std::vector<int32_t>(32, 0), o, nullptr, 9, &s);
  CHECK(!q.uses_winograd(shape_of({1, 64, 28, 28, 32, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1})));
  CHECK(!q_winograd_pays(shape_of({1, 512, 7, 7, 512, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1})));
  CHECK(!q_winograd_pays(shape_of({1, 512, 14, 14, 512, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1})));
  CHECK(!q_winograd_pays(shape_of({1, 16, 28, 28, 32, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1})));
  CHECK(q_winograd_pays(shape_of({1, 256, 14, 14, 256, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1})));
  CHECK(q_winograd_pays(shape_of({1, 64, 56, 56, 64, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1})));
}

// The channels-last product (conv_int8_nhwc.hpp) runs every shape once a QConv takes it (made
// for a shape it pays on: here stride 2): random geometries (kernels 1-5 wide, not 1x1, strides
// 1-3, dilation, uneven pads, 16-80 input channels or 3 (the row mode), 16-144 output channels:
// every width of the last 64-channel block, maps from 1 pixel to 40 wide), int8 and uint8 x and
// w, 8-bit outputs (with q_scale too), on 1, 2 and 3 threads: every byte is the reference's.
TEST_CASE("QConv channels-last: random geometries equal the reference") {
  if (!q_nhwc_available()) return;  // no VNNI: the path does not exist
  std::mt19937 g(47);
  ThreadPool two(2), three(3);
  auto pick = [&](int lo, int hi) { return int64_t(std::uniform_int_distribution<int>(lo, hi)(g)); };
  int tested = 0;
  for (int attempt = 0; attempt < 400 && tested < 40; ++attempt) {
    // Kernels up to 5x5 (1x1 not taken), a quarter of them with 3 input channels (the row
    // mode, undilated in width).
    const int64_t kh = pick(1, 5), kw = attempt % 4 == 0 || kh == 1 ? pick(2, 5) : kh;
    const int64_t ic = attempt % 4 == 1 ? 3 : 16 * pick(1, 5);
    const ConvCase c{pick(1, 2), ic, pick(1, 30), pick(1, 40), 16 * pick(1, 9), 1, kh, kw,
                     pick(1, 3), pick(1, 3), pick(1, 2), ic == 3 ? 1 : pick(1, 2), pick(0, 2), pick(0, 2), pick(0, 2),
                     pick(0, 2)};
    const ConvShape s = shape_of(c);
    if (s.out_h < 1 || s.out_w < 1) continue;
    ConvShape hint = s;  // the shape the kernel is made for: stride 2 pays
    hint.stride_h = hint.stride_w = 2;
    REQUIRE(q_nhwc_pays(hint));
    if (!q_nhwc_runs(hint)) continue;  // AVX-512 VNNI without VBMI: not the row mode
    const QType xt = g() % 2 ? QType::U8 : QType::S8;
    const QType ot = g() % 2 ? QType::U8 : QType::S8;
    const QType wt = g() % 3 ? QType::S8 : QType::U8;
    const auto x = data8(xt, size_t(s.batch * s.in_c * s.in_h * s.in_w), g);
    const auto wv = data8(wt, size_t(s.out_c * s.gemm_k()), g);
    const std::vector<int32_t> w_zp(size_t(s.out_c), wt == QType::U8 ? 128 : 0);
    QOutput o = make_output(ot, s.out_c, g);
    if (attempt % 3 == 0) o.q_scale = 0.05f;
    if (attempt % 6 == 3)  // a float bias past the shortcut's 2^20 / q_scale: the store's exact steps alone
      for (int64_t ch = 0; ch < s.out_c; ++ch) o.float_bias.push_back(ch % 2 ? 2e5f : -2e5f);
    const int32_t x_zp = zp_of(xt, g);
    const QConv q(xt, x_zp, wt, wv.data(), int64_t(wv.size()), w_zp, o, nullptr, kh * kw, &hint);
    INFO("attempt ", attempt, ": batch ", c.batch, " in ", c.in_c, "x", c.in_h, "x", c.in_w, " out ", c.out_c, " k ", kh,
         "x", kw, " stride ", c.sh, " ", c.sw, " dil ", c.dh, " ", c.dw, " pads ", c.pt, " ", c.pl, " ", c.pb, " ", c.pr,
         " ", tname(xt), " x ", tname(wt), " -> ", tname(ot), " x_zp ", x_zp);
    REQUIRE(q.uses_nhwc());
    const auto want = conv_reference(s, xt, x, x_zp, wt, wv, w_zp, o);
    check_runs(q, s, x, want, {nullptr, &two, &three});
    // run_channels_last: the same bytes, [image][pixel][channel].
    const int64_t plane = s.out_h * s.out_w;
    std::vector<uint8_t> want_last(want.size());
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t ch = 0; ch < s.out_c; ++ch)
        for (int64_t px = 0; px < plane; ++px)
          want_last[size_t((b * plane + px) * s.out_c + ch)] = want[size_t((b * s.out_c + ch) * plane + px)];
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &two}) {
      std::vector<uint8_t> got(want.size(), 0xcd);
      q.run_channels_last(s, x.data(), got.data(), p);
      CHECK(got == want_last);
    }
    ++tested;
  }
  CHECK(tested == 40);
  // Weights over 512 KB: the threads split the output channel blocks instead of the pixels
  // (the last block 32 wide in the first).
  for (const ConvCase& c : {ConvCase{1, 256, 7, 7, 288, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
                            ConvCase{2, 512, 14, 14, 128, 1, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0}}) {
    const ConvShape s = shape_of(c);
    const auto x = data8(QType::S8, size_t(s.batch * s.in_c * s.in_h * s.in_w), g);
    const auto wv = data8(QType::S8, size_t(s.out_c * s.gemm_k()), g);
    const std::vector<int32_t> w_zp(size_t(s.out_c), 0);
    const QOutput o = make_output(QType::U8, s.out_c, g);
    const QConv q(QType::S8, -5, QType::S8, wv.data(), int64_t(wv.size()), w_zp, o, nullptr, 9, &s);
    REQUIRE(q.uses_nhwc());
    const auto want = conv_reference(s, QType::S8, x, -5, QType::S8, wv, w_zp, o);
    INFO(c.in_c, " -> ", c.out_c, " on ", c.in_h, "x", c.in_w);
    check_runs(q, s, x, want, {nullptr, &two, &three});
  }
}

// Where it is not taken: no shape given, a shape it does not pay on (stride 1 on a wide map;
// Winograd's), asymmetric weights (a per-pixel term), 32-bit or float outputs, channels not in
// 16s, groups. The cost model takes ResNet-18's 7x7 stage and its strided 3x3 convs.
TEST_CASE("QConv channels-last: where it is and is not taken") {
  if (!q_nhwc_available()) return;
  std::mt19937 g(9);
  auto make = [&](int64_t ic, int64_t oc, QType ot, int32_t zp3, const ConvShape* hint, int64_t group = 1) {
    const auto w = data8(QType::S8, size_t(oc * ic / group * 9), g);
    std::vector<int32_t> w_zp(size_t(oc), 0);
    w_zp[3] = zp3;
    return QConv(QType::U8, 3, QType::S8, w.data(), int64_t(w.size()), w_zp, make_output(ot, oc, g), nullptr, 9, hint)
        .uses_nhwc();
  };
  const ConvShape s2 = shape_of({1, 64, 28, 28, 32, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1});
  CHECK(make(64, 32, QType::U8, 0, &s2));
  CHECK(make(64, 32, QType::S8, 0, &s2));
  CHECK(!make(64, 32, QType::U8, 0, nullptr));
  {  // run_channels_last only where the path is taken
    const auto w = data8(QType::S8, size_t(32 * 64 * 9), g);
    const QConv q(QType::U8, 3, QType::S8, w.data(), int64_t(w.size()), std::vector<int32_t>(32, 0),
                  make_output(QType::U8, 32, g), nullptr, 9);
    std::vector<uint8_t> x(size_t(64 * 28 * 28)), y(size_t(32 * 14 * 14));
    CHECK_THROWS_AS(q.run_channels_last(s2, x.data(), y.data(), nullptr), std::logic_error);
  }
  CHECK(!make(64, 32, QType::U8, 2, &s2));
  CHECK(!make(64, 32, QType::I32, 0, &s2));
  CHECK(!make(64, 32, QType::F32, 0, &s2));
  const ConvShape narrow = shape_of({1, 40, 28, 28, 32, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1});
  CHECK(!make(40, 32, QType::U8, 0, &narrow));
  const ConvShape grouped = shape_of({1, 64, 28, 28, 32, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1});
  CHECK(!make(64, 32, QType::U8, 0, &grouped, 2));
  const ConvShape wide = shape_of({1, 64, 28, 28, 32, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1});
  CHECK(!make(64, 32, QType::U8, 0, &wide));
  CHECK(q_nhwc_pays(shape_of({1, 512, 7, 7, 512, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1})));
  CHECK(q_nhwc_pays(shape_of({1, 64, 56, 56, 128, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1})));
  CHECK(!q_nhwc_pays(shape_of({1, 64, 56, 56, 64, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1})));
  // 1x1 downsamples (see conv_int8_nhwc.cpp's q_nhwc_pays)
  CHECK(!q_nhwc_pays(shape_of({1, 64, 56, 56, 128, 1, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0})));
  CHECK(q_nhwc_pays(shape_of({1, 3, 224, 224, 64, 1, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3})));  // the stem, row mode
  CHECK(!q_nhwc_shape_ok(shape_of({1, 3, 32, 32, 64, 1, 3, 3, 1, 1, 1, 2, 1, 2, 1, 2})));  // 3 channels, dilated in width
}

// QOutput::q_scale: the FLOAT32 output (scale, float bias, clamp) quantized as a
// QuantizeLinear node would, in the tile store: byte for byte the F32 run + quantize_linear,
// and the scalar store the same (conv: channel per row; matmul: per column).
TEST_CASE("QConv / QMatMul with q_scale equal the FLOAT32 output + quantize_linear") {
  std::mt19937 g(31);
  ThreadPool pool(2);
  const float q_scales[] = {0.0625f, 0.01f, 0.37f};
  auto quantized = [](const std::vector<uint8_t>& f, QType t, float qs, int32_t zp) {
    const size_t n = f.size() / 4;
    std::vector<uint8_t> q(n);
    if (t == QType::U8) {
      const uint8_t z = uint8_t(zp);
      quantize_linear(reinterpret_cast<const float*>(f.data()), int64_t(n), &qs, &z, QuantAxis{}, q.data());
    } else {
      const int8_t z = int8_t(zp);
      quantize_linear(reinterpret_cast<const float*>(f.data()), int64_t(n), &qs, &z, QuantAxis{},
                      reinterpret_cast<int8_t*>(q.data()));
    }
    return q;
  };
  int n = 0;
  for (const ConvCase& c : kConvCases) {
    const ConvShape s = shape_of(c);
    for (QType xt : {QType::U8, QType::S8})
      for (QType ot : {QType::U8, QType::S8}) {
        const QType wt = n % 2 ? QType::U8 : QType::S8;
        const auto x = data8(xt, size_t(s.batch * s.in_c * s.in_h * s.in_w), g);
        const auto w = data8(wt, size_t(s.out_c * s.gemm_k()), g);
        const int32_t x_zp = zp_of(xt, g);
        std::vector<int32_t> w_zp(size_t(s.out_c), wt == QType::U8 ? 128 : 0);
        if (g() % 2) w_zp.back() += 1;
        const QOutput of = make_output(QType::F32, s.out_c, g);
        QOutput oq = of;
        oq.type = ot;
        oq.zero_point = zp_of(ot, g);
        oq.q_scale = q_scales[g() % 3];
        const QConv qf(xt, x_zp, wt, w.data(), int64_t(w.size()), w_zp, of);
        const QConv qq(xt, x_zp, wt, w.data(), int64_t(w.size()), w_zp, oq);
        std::vector<uint8_t> f(size_t(s.batch * s.out_c * s.out_h * s.out_w) * 4);
        qf.run(s, x.data(), f.data(), nullptr);
        const auto want = quantized(f, ot, oq.q_scale, oq.zero_point);
        INFO("case ", n, ": ", tname(xt), " x ", tname(wt), " -> ", tname(ot));
        CHECK(std::memcmp(conv_reference(s, xt, x, x_zp, wt, w, w_zp, oq).data(), want.data(), want.size()) == 0);
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<uint8_t> got(want.size(), 0xcd);
          qq.run(s, x.data(), got.data(), p);
          CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
        }
      }
    ++n;
  }
  for (const int64_t M : {1, 7, 40})
    for (const int64_t N : {5, 16, 37}) {
      const int64_t K = 19;
      const auto a = data8(QType::U8, size_t(M * K), g), b = data8(QType::S8, size_t(K * N), g);
      const std::vector<int32_t> b_zp(size_t(N), 0);
      const QOutput of = make_output(QType::F32, N, g);
      QOutput oq = of;
      oq.type = QType::U8;
      oq.zero_point = zp_of(QType::U8, g);
      oq.q_scale = q_scales[g() % 3];
      const QMatMul qf(QType::U8, 3, QType::S8, b.data(), K, N, b_zp, of);
      const QMatMul qq(QType::U8, 3, QType::S8, b.data(), K, N, b_zp, oq);
      std::vector<uint8_t> f(size_t(M * N) * 4), got(size_t(M * N), 0xcd);
      qf.run(M, a.data(), f.data(), nullptr);
      qq.run(M, a.data(), got.data(), &pool);
      INFO(M, "x", N);
      CHECK(std::memcmp(got.data(), quantized(f, QType::U8, oq.q_scale, oq.zero_point).data(), got.size()) == 0);
    }
}

// The u8 x s8 path (quads of k; x_zp' * sum w' folded into the bias, the weights' zero points
// times the sums of x applied per tile): taken whenever VNNI runs (vpdpbusd) and x's zero
// point fits uint8 after the shift (x_zp + 128 for int8 x), and for QConv on AVX2 (vpmaddubsw
// on the split weights) where the rest pays; else the int16 pairs. All give the reference's
// bytes. Symmetric weights (w_zp 0 for int8, 128 for uint8) skip the per-tile term.
TEST_CASE("QConv / QMatMul u8 x s8 quads: every x / w type and zero point, K % 4 != 0") {
  std::mt19937 g(23);
  ThreadPool pool(2);
  const bool vnni = q_tile_wide_dpbusd(1, true) != nullptr, conv_quads = q_conv_quads_available();
  // VNNI takes the quads whenever the zero points allow; the AVX2 split only where its rest
  // pays (q_split_pays: not on the smallest K), so count how often it ran, with a rest.
  int n = 0, convs = 0, quad_convs = 0, rest_convs = 0;
  auto took = [&](const QConv& q) {
    ++convs;
    quad_convs += q.uses_quads();
    rest_convs += q.uses_quads() && q.rest_rows() > 0;
    if (vnni || !conv_quads) CHECK(q.uses_quads() == vnni);
  };
  for (const ConvCase& c : kConvCases) {
    const ConvShape s = shape_of(c);
    for (QType xt : {QType::U8, QType::S8})
      for (QType wt : {QType::U8, QType::S8})
        for (QType ot : {QType::I32, QType::U8}) {
          const auto x = data8(xt, size_t(s.batch * s.in_c * s.in_h * s.in_w), g);
          const auto w = bell8(wt, size_t(s.out_c * s.gemm_k()), g);
          const int32_t x_zp = zp_of(xt, g), w_sym = wt == QType::U8 ? 128 : 0;
          for (bool skew : {false, true}) {  // skew: one channel's zero point off by one, or random ones
            std::vector<int32_t> w_zp(size_t(s.out_c), w_sym);
            if (skew && g() % 2) w_zp.back() += 1;
            else if (skew)
              for (auto& z : w_zp) z = zp_of(wt, g);
            const QOutput o = make_output(ot, s.out_c, g);
            const auto want = conv_reference(s, xt, x, x_zp, wt, w, w_zp, o);
            for (int64_t taps : {int64_t(0), s.k_h * s.k_w}) {  // unknown: k's own order; known: channel quads
              const QConv q(xt, x_zp, wt, w.data(), int64_t(w.size()), w_zp, o, nullptr, taps);
              took(q);
              for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
                std::vector<uint8_t> got(want.size(), 0xcd);
                q.run(s, x.data(), got.data(), p);
                INFO("case ", n, ": ", tname(xt), " x ", tname(wt), " -> ", tname(ot), " x_zp ", x_zp,
                     skew ? " skew" : "", p ? " threads" : "", " ", q.describe());
                CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
              }
            }
          }
        }
    ++n;
  }
  // ResNet-18's stem: 7x7 stride 2 pad 3, K = 147 (3 mod 4); x at its extreme zero points.
  const ConvShape stem = shape_of({1, 3, 40, 38, 16, 1, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3});
  for (QType xt : {QType::U8, QType::S8})
    for (int32_t x_zp : {xt == QType::U8 ? 0 : -128, xt == QType::U8 ? 255 : 127}) {
      const auto x = data8(xt, size_t(stem.in_c * stem.in_h * stem.in_w), g);
      const auto w = bell8(QType::S8, size_t(stem.out_c * stem.gemm_k()), g);
      const std::vector<int32_t> w_zp(size_t(stem.out_c), 0);
      const QOutput o = make_output(QType::U8, stem.out_c, g);
      const auto want = conv_reference(stem, xt, x, x_zp, QType::S8, w, w_zp, o);
      const QConv q(xt, x_zp, QType::S8, w.data(), int64_t(w.size()), w_zp, o);
      took(q);
      std::vector<uint8_t> got(want.size(), 0xcd);
      q.run(stem, x.data(), got.data(), &pool);
      INFO(tname(xt), " x_zp ", x_zp);
      CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
    }
  if (conv_quads && !vnni) {  // the AVX2 split ran on most shapes, mostly with a rest to add
    INFO(quad_convs, " of ", convs, " convs on the split quads, ", rest_convs, " with a rest");
    CHECK(quad_convs * 2 >= convs);
    CHECK(rest_convs * 2 >= quad_convs);
  }
  // QMatMul, K = 1 .. 9 and around the K blocks (1024 k per block of quads).
  const int64_t shapes[][3] = {{1, 1, 1}, {5, 7, 2},   {6, 16, 3},    {7, 17, 5},    {13, 48, 6},
                               {2, 3, 7}, {19, 33, 9}, {64, 40, 1023}, {30, 100, 1025}, {128, 50, 2050}};
  for (const auto& sh : shapes)
    for (QType at : {QType::U8, QType::S8})
      for (QType bt : {QType::U8, QType::S8})
        for (bool skew : {false, true}) {
          const int64_t M = sh[0], N = sh[1], K = sh[2];
          const auto a = data8(at, size_t(M * K), g), b = data8(bt, size_t(K * N), g);
          const int32_t a_zp = zp_of(at, g);
          std::vector<int32_t> b_zp(size_t(N), bt == QType::U8 ? 128 : 0);
          if (skew) b_zp.front() -= 1;
          if (skew && g() % 2)
            for (auto& z : b_zp) z = zp_of(bt, g);
          const QOutput o = make_output(g() % 2 ? QType::I32 : QType::S8, N, g);
          std::vector<int32_t> acc(size_t(M * N));
          const std::vector<int32_t> azp(size_t(M), a_zp);
          with_8bit(at, bt, [&](auto ta, auto tb) {
            using TA = decltype(ta);
            using TB = decltype(tb);
            gemm_integer(M, N, K, reinterpret_cast<const TA*>(a.data()), azp.data(), reinterpret_cast<const TB*>(b.data()),
                         b_zp.data(), acc.data(), nullptr);
          });
          std::vector<uint8_t> want(size_t(M * N) * esize(o.type));
          for (int64_t m = 0; m < M; ++m) q_store_row(o, acc.data() + m * N, N, 0, want.data(), m * N);
          const QMatMul q(at, a_zp, bt, b.data(), K, N, b_zp, o);
          CHECK(q.uses_quads() == vnni);
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            std::vector<uint8_t> got(want.size(), 0xcd);
            q.run(M, a.data(), got.data(), p);
            INFO(M, "x", N, "x", K, " ", tname(at), " x ", tname(bt), " a_zp ", a_zp, skew ? " skew" : "",
                 p ? " threads" : "");
            CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
          }
        }
}

TEST_CASE("QConv / QMatMul: x's zero point outside uint8 after the shift keeps the int16 pairs") {
  std::mt19937 g(31);
  const ConvShape s = shape_of(kConvCases[1]);
  const auto x = data8(QType::U8, size_t(s.batch * s.in_c * s.in_h * s.in_w), g);
  const auto w = data8(QType::S8, size_t(s.out_c * s.gemm_k()), g);
  const std::vector<int32_t> w_zp(size_t(s.out_c), 0);
  const QOutput o = make_output(QType::I32, s.out_c, g);
  for (int32_t x_zp : {-1, 256, 300}) {
    const auto want = conv_reference(s, QType::U8, x, x_zp, QType::S8, w, w_zp, o);
    const QConv q(QType::U8, x_zp, QType::S8, w.data(), int64_t(w.size()), w_zp, o);
    CHECK_FALSE(q.uses_quads());
    std::vector<uint8_t> got(want.size(), 0xcd);
    q.run(s, x.data(), got.data(), nullptr);
    INFO("x_zp ", x_zp);
    CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
  }
  QOutput oi;
  oi.type = QType::I32;
  const QMatMul qm(QType::S8, 200, QType::S8, w.data(), 5, 7, std::vector<int32_t>(7, 0), oi);
  CHECK_FALSE(qm.uses_quads());  // 200 + 128 > 255
}

// The vector packers (AVX2: whole-vector loads into the source's slack, blended per run;
// AVX-512: masked loads) against the generic one: random runs at stride 1 and 2, panels
// short of 16 columns, odd K (the last pair's odd k is 0), taps at both ends of the source.
// Random runs at stride 1 or 2 over a source of len elements (every third panel short of
// kQNR columns), for the packer tests.
static QPanelRuns random_runs(int trial, int64_t len, std::mt19937& g) {
  QPanelRuns runs;
  runs.stride = 1 + int(g() % 2);
  const int cols = trial % 3 == 0 ? 1 + int(g() % kQNR) : int(kQNR);
  for (int j = 0; j < cols;) {
    const int n = 1 + int(g() % (cols - j));
    runs.col[runs.n] = j;
    runs.off[runs.n++] = int64_t(g() % uint32_t(len / 2 - n * runs.stride));
    j += n;
  }
  runs.col[runs.n] = cols;
  return runs;
}

// The AVX-512 store's float shortcut (q_fast_path) against the scalar store, which computes
// every value the exact way: epilogues whose values land on half-integers (power-of-two scales,
// float biases of a quarter step), near them, past the clamps and the saturation, over the
// whole int32 range, both store layouts; a vector with a lane inside the margin takes the
// exact path, so every byte must be the scalar store's.
TEST_CASE("The 8-bit store's float shortcut gives the exact store's bytes") {
  const QStoreFn fast = active_isa() >= Isa::avx512 ? q_store_avx512() : nullptr;
  if (!fast) return;  // the shortcut is the AVX-512 store's (AVX2's 8-bit time is its tile's)
  std::mt19937 g(43);
  std::uniform_int_distribution<int> coin(0, 1), pick(0, 5);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const float q_scales[] = {0.0625f, 0.37f, 0.0473f, 1.f};
  for (int trial = 0; trial < 1500; ++trial) {
    QOutput o;
    o.type = coin(g) ? QType::U8 : QType::S8;
    const bool fq = coin(g), by_row = coin(g), ties = trial % 3 == 0, tiny = trial % 3 == 1;
    const int64_t cols = 1 + int64_t(g() % kQNR), ch = by_row ? kQMR : kQNR;
    // ties: 2^-k, so v * scale lands on halves; tiny: accumulators of 2^24 and more, whose float
    // is inexact and whose steps land closest to the halves; else as quantizers make them.
    for (int64_t c = 0; c < ch; ++c)
      o.scale.push_back(ties ? std::ldexp(1.0, -int(g() % 9)) : tiny ? 1e-7 + unit(g) * 1e-6 : 1e-4 + unit(g) * 0.02 * unit(g));
    o.zero_point = zp_of(o.type, g);
    if (fq) {
      o.q_scale = ties ? 1.f : q_scales[g() % 4] * float(0.5 + unit(g));
      if (coin(g))
        for (int64_t c = 0; c < ch; ++c) o.float_bias.push_back(ties ? 0.25f * float(int(g() % 41) - 20) : float(unit(g) * 8.0 - 4.0));
      const int clamp = pick(g);
      o.flo = clamp == 0 ? -std::numeric_limits<float>::infinity() : clamp == 1 ? -1.5f : 0.f;
      o.fhi = clamp < 3 ? std::numeric_limits<float>::infinity() : clamp == 3 ? 6.f : 0.75f;
    } else {
      const int32_t qlo = o.type == QType::U8 ? 0 : -128, qhi = o.type == QType::U8 ? 255 : 127;
      o.lo = pick(g) == 0 ? qhi + 3 : coin(g) ? o.zero_point : qlo;  // sometimes apart from [qlo, qhi]
      o.hi = coin(g) ? std::min(o.zero_point + 50, qhi) : qhi;
    }
    const QEpilogue e = q_epilogue(o, ch);
    REQUIRE(!e.fast_m.empty());  // every epilogue here is in the shortcut's range
    int32_t acc[kQMR * kQNR];
    for (int64_t i = 0; i < kQMR * kQNR; ++i) {
      const size_t c = size_t(by_row ? i / kQNR : i % kQNR);
      const double m = e.scale[c] / (fq ? double(o.q_scale) : 1.0);
      const double b = o.float_bias.empty() ? 0.0 : double(o.float_bias[c]) / double(o.q_scale);
      const int kind = pick(g);
      if (kind == 0) acc[i] = int32_t(g());  // anywhere in int32
      else if (kind == 1) acc[i] = int32_t(g() % 4001) - 2000;
      else if (kind == 2) acc[i] = int32_t(g() % 200001) - 100000;
      else  // the value closest to a half-integer: inside the margin, often rounded apart by the float steps
        acc[i] = int32_t(std::clamp(std::llround((double(int(g() % 781) - 390) + 0.5 - b) / m), -(1ll << 31), (1ll << 31) - 1));
    }
    const int64_t ldy = kQNR + 3;
    std::vector<uint8_t> want(size_t(kQMR * ldy), 0xcd), got(want);
    q_store_generic()(e, acc, 0, kQMR, cols, by_row, 0, want.data(), ldy);
    fast(e, acc, 0, kQMR, cols, by_row, 0, got.data(), ldy);
    INFO("trial ", trial, ": ", tname(o.type), fq ? " q_scale " : " integer ", o.q_scale, " zp ", o.zero_point, " lo ",
         o.lo, " hi ", o.hi, " flo ", o.flo, " fhi ", o.fhi, by_row ? " by row" : " by column", " cols ", cols);
    CHECK(want == got);
  }
  // Out of the range the bound was derived for: no shortcut.
  QOutput o;
  o.type = QType::U8;
  o.scale = {1e-3};
  o.q_scale = 1e-30f;
  CHECK(q_epilogue(o, 1).fast_m.empty());
  o.q_scale = 0.1f;
  o.float_bias = {1e7f};
  CHECK(q_epilogue(o, 1).fast_m.empty());
  o.float_bias = {1.f};
  CHECK(!q_epilogue(o, 1).fast_m.empty());
  o.scale = {1e-45};
  CHECK(q_epilogue(o, 1).fast_m.empty());
}

TEST_CASE("pack_runs: AVX2 and AVX-512 equal the generic packer word for word") {
  std::vector<std::pair<const char*, QPackRunsFn>> fns;
  if (active_isa() >= Isa::avx2 && q_pack_runs_avx2()) fns.emplace_back("avx2", q_pack_runs_avx2());
  if (active_isa() >= Isa::avx512 && q_pack_runs_avx512()) fns.emplace_back("avx512", q_pack_runs_avx512());
  if (fns.empty()) return;  // nothing but the generic packer on this CPU
  std::mt19937 g(41);
  const int64_t len = 400;
  std::vector<int16_t> buf(size_t(len + 2 * kQRunSlack));
  for (auto& v : buf) v = int16_t(int(g() % 65536) - 32768);
  const int16_t* base = buf.data() + kQRunSlack;
  for (int trial = 0; trial < 300; ++trial) {
    const QPanelRuns runs = random_runs(trial, len, g);
    const int cols = runs.col[runs.n];
    const int64_t K = 1 + int64_t(g() % 9);
    std::vector<int64_t> koff(static_cast<size_t>(K));
    for (auto& o : koff) o = int64_t(g() % uint32_t(len / 2 + 1));
    koff[0] = 0;  // the source's first element
    if (K > 1) koff[size_t(K - 1)] = len / 2 - 1;  // and (with the largest run offsets) near its end
    const int64_t kp = q_pairs(K);
    std::vector<uint32_t> want(size_t(kp * kQNR), 7u);
    q_pack_runs_generic()(base, koff.data(), K, runs, 0, kp, want.data());
    for (const auto& [name, fn] : fns) {
      alignas(64) uint32_t got[5 * kQNR];
      std::fill(got, got + 5 * kQNR, 9u);
      fn(base, koff.data(), K, runs, 0, kp, got);
      INFO(name, " trial ", trial, ": stride ", runs.stride, ", ", runs.n, " runs, ", cols, " columns, K ", K);
      CHECK(std::memcmp(got, want.data(), want.size() * sizeof(uint32_t)) == 0);
    }
  }
}

// The AVX2 quad packer (whole-vector loads into kQRunSlack bytes around the source, blended per
// run) against the generic one: runs at stride 1 and 2, short panels, K % 4 != 0, taps at both
// ends of the source.
TEST_CASE("pack_quads: AVX2 equals the generic packer word for word") {
  const QPackQuadsFn avx2 = q_pack_quads_avx2();
  if (!avx2) return;  // VNNI's masked packer runs instead, or no AVX2
  std::mt19937 g(43);
  const int64_t len = 300;
  std::vector<uint8_t> buf(size_t(len + 2 * kQRunSlack));
  for (auto& v : buf) v = uint8_t(g());
  const uint8_t* base = buf.data() + kQRunSlack;
  for (int trial = 0; trial < 300; ++trial) {
    const QPanelRuns runs = random_runs(trial, len, g);
    const int cols = runs.col[runs.n];
    const int64_t K = 1 + int64_t(g() % 11);
    std::vector<int64_t> koff(static_cast<size_t>(K));
    for (auto& o : koff) o = int64_t(g() % uint32_t(len / 2 + 1));
    koff[0] = 0;
    if (K > 1) koff[size_t(K - 1)] = len / 2 - 1;
    const int64_t kq = q_quads(K);
    std::vector<uint32_t> want(size_t(kq * kQNR), 7u);
    q_pack_quads_generic()(base, koff.data(), K, runs, 0, kq, want.data());
    alignas(64) uint32_t got[3 * kQNR];
    std::fill(got, got + 3 * kQNR, 9u);
    avx2(base, koff.data(), K, runs, 0, kq, got);
    INFO("trial ", trial, ": stride ", runs.stride, ", ", runs.n, " runs, ", cols, " columns, K ", K);
    CHECK(std::memcmp(got, want.data(), want.size() * sizeof(uint32_t)) == 0);
  }
}

// The split itself: dense + rest = w byte for byte, both parts within the exact bound.
TEST_CASE("q_split_quad: dense + rest = w, |w0| + |w1| <= 128 in both") {
  for (int a = -128; a < 128; ++a)
    for (int b = -128; b < 128; ++b) {
      const uint32_t w = uint32_t(uint8_t(a)) | uint32_t(uint8_t(b)) << 8 | uint32_t(uint8_t(b)) << 16 | uint32_t(uint8_t(a)) << 24;
      uint32_t dense, rest;
      q_split_quad(w, dense, rest);
      for (int byte = 0; byte < 4; ++byte)
        REQUIRE(int8_t(dense >> (8 * byte)) + int8_t(rest >> (8 * byte)) == int8_t(w >> (8 * byte)));
      for (uint32_t part : {dense, rest})
        for (int p = 0; p < 2; ++p)
          REQUIRE(std::abs(int(int8_t(part >> (16 * p)))) + std::abs(int(int8_t(part >> (16 * p + 8)))) <= 128);
      REQUIRE((rest == 0) == (std::abs(a) + std::abs(b) <= 128));
    }
}

// describe() (what `nxrt inspect` prints for the 8-bit kernels) names the path taken.
TEST_CASE("QConv / QMatMul describe the path they took") {
  std::mt19937 g(47);
  const ConvShape s = shape_of(kConvCases[8]);  // ResNet's 3x3 64 -> 64: the split pays on trained-like weights
  const std::vector<int32_t> w_zp(size_t(s.out_c), 0);
  QOutput o;
  o.type = QType::I32;
  const auto bell = bell8(QType::S8, size_t(s.out_c * s.gemm_k()), g);
  const QConv q(QType::U8, 3, QType::S8, bell.data(), int64_t(bell.size()), w_zp, o);
  const std::string d = q.describe();
  INFO(d);
  if (!q.uses_quads()) CHECK(d.rfind("int16 pairs ", 0) == 0);
  else if (q_tile_wide_dpbusd(1, true)) CHECK(d.rfind("u8 x s8 quads ", 0) == 0);
  else CHECK(d.rfind("u8 x s8 split quads, rest ", 0) == 0);
  CHECK(q_conv_quads_available() == q.uses_quads());
  const auto wide = data8(QType::S8, size_t(s.out_c * s.gemm_k()), g);  // a third at +-127: the pairs on AVX2
  const QConv p(QType::U8, 3, QType::S8, wide.data(), int64_t(wide.size()), w_zp, o);
  if (!p.uses_quads()) CHECK(p.describe().rfind("int16 pairs ", 0) == 0);
  const QMatMul m(QType::U8, 3, QType::S8, wide.data(), 64, 9, std::vector<int32_t>(9, 0), o);
  CHECK(m.describe().rfind(m.uses_quads() ? "u8 x s8 quads " : "int16 pairs ", 0) == 0);
  // The kernel's taps known (64 channels: quads of them): the channel quads where VNNI runs.
  const QConv c(QType::U8, 3, QType::S8, bell.data(), int64_t(bell.size()), w_zp, o, nullptr, s.k_h * s.k_w);
  if (q_tile_wide_dpbusd(1, true)) CHECK(c.describe().rfind("u8 x s8 channel quads ", 0) == 0);
  else CHECK(c.describe() == q.describe());
  // ... and a shape with another kernel is refused, not read out of bounds.
  ConvShape s1 = s;
  s1.k_h = s1.k_w = 1;
  s1.in_c = s.in_c * 9;
  std::vector<uint8_t> x(size_t(s1.in_c * s1.in_h * s1.in_w)), y(size_t(s1.out_c * s1.out_h * s1.out_w) * 4);
  if (q_tile_wide_dpbusd(1, true)) {
    CHECK_THROWS_AS(c.run(s1, x.data(), y.data(), nullptr), std::invalid_argument);
    s1.pad_top = s1.pad_left = 0;  // a 1x1 stride-1 conv, which reads x in place, too
    CHECK_THROWS_AS(c.run(s1, x.data(), y.data(), nullptr), std::invalid_argument);
  }
}
