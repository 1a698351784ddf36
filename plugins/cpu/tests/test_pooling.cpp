#include <doctest/doctest.h>

#include <limits>

#include "pooling.hpp"
#include "util.hpp"

using namespace nxrt::cpu;
using namespace nxrt::cpu::test;

template <typename T>
static std::vector<T> naive_pool(const PoolShape& s, const std::vector<T>& x) {
  const int64_t planes = s.batch * s.channels, ip = s.in[0] * s.in[1] * s.in[2], op = s.out[0] * s.out[1] * s.out[2];
  std::vector<T> y(size_t(planes * op));
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t a = 0; a < s.out[0]; ++a)
      for (int64_t b = 0; b < s.out[1]; ++b)
        for (int64_t c = 0; c < s.out[2]; ++c) {
          T m = std::numeric_limits<T>::lowest();
          for (int64_t i = 0; i < s.kernel[0]; ++i)
            for (int64_t j = 0; j < s.kernel[1]; ++j)
              for (int64_t k = 0; k < s.kernel[2]; ++k) {
                int64_t d = a * s.stride[0] - s.pad_begin[0] + i * s.dilation[0];
                int64_t h = b * s.stride[1] - s.pad_begin[1] + j * s.dilation[1];
                int64_t w = c * s.stride[2] - s.pad_begin[2] + k * s.dilation[2];
                if (d < 0 || h < 0 || w < 0 || d >= s.in[0] || h >= s.in[1] || w >= s.in[2]) continue;
                m = std::max(m, x[size_t(p * ip + (d * s.in[1] + h) * s.in[2] + w)]);
              }
          y[size_t(p * op + (a * s.out[1] + b) * s.out[2] + c)] = m;
        }
  return y;
}

static PoolShape pool2d(int64_t c, int64_t h, int64_t w, int64_t k, int64_t stride, int64_t pad, int64_t dil, bool ceil_mode) {
  PoolShape s;
  s.batch = 2; s.channels = c;
  s.in[1] = h; s.in[2] = w;
  s.kernel[1] = s.kernel[2] = k;
  s.stride[1] = s.stride[2] = stride;
  s.dilation[1] = s.dilation[2] = dil;
  s.pad_begin[1] = s.pad_begin[2] = pad;
  for (int i = 1; i < 3; ++i) {
    int64_t span = s.in[i] + 2 * pad - ((k - 1) * dil + 1);
    s.out[i] = ceil_mode ? (span + stride - 1) / stride + 1 : span / stride + 1;
    if (ceil_mode && (s.out[i] - 1) * stride >= s.in[i] + pad) --s.out[i];
  }
  return s;
}

TEST_CASE("max_pool matches the naive pool") {
  ThreadPool tp(2);
  for (auto s : {pool2d(3, 9, 10, 3, 2, 1, 1, false), pool2d(3, 9, 10, 3, 2, 1, 1, true), pool2d(4, 8, 8, 2, 2, 0, 1, false),
                 pool2d(2, 10, 10, 3, 1, 2, 2, false), pool2d(64, 56, 56, 3, 2, 1, 1, false),
                 pool2d(3, 11, 13, 3, 3, 1, 1, true), pool2d(2, 9, 11, 5, 1, 2, 1, false),  // stride 3; SPPF's 5x5/1
                 // The AVX-512 plane kernel (stride 1 or 2): ResNet's stem pool (7 chunks a row), odd
                 // and chunk-edge widths, kernels 1-3 at stride 2 with and without pads, ceil mode.
                 pool2d(2, 112, 112, 3, 2, 1, 1, false), pool2d(2, 9, 33, 3, 2, 1, 1, false),
                 pool2d(2, 7, 65, 3, 2, 0, 1, true), pool2d(2, 6, 37, 2, 2, 0, 1, false), pool2d(2, 6, 47, 2, 2, 1, 1, true),
                 pool2d(2, 5, 34, 1, 2, 0, 1, false), pool2d(2, 8, 40, 3, 1, 1, 1, false), pool2d(2, 5, 18, 4, 2, 1, 1, false)}) {
    auto x = random_floats(size_t(s.batch * s.channels * s.in[1] * s.in[2]), 3);
    std::vector<float> y(size_t(s.batch * s.channels * s.out[1] * s.out[2]));
    max_pool(s, x.data(), y.data(), &tp);
    CHECK(y == naive_pool(s, x));
  }
  {  // NaNs are skipped (each window here keeps a number), on one thread and two
    PoolShape s = pool2d(3, 12, 50, 3, 2, 1, 1, false);
    s.kernel[1] = 2;  // 2 x 3 windows
    s.out[1] = (12 + 1 - 2) / 2 + 1;
    auto x = random_floats(size_t(s.batch * s.channels * 12 * 50), 4);
    for (size_t i = 0; i < x.size(); i += 7) x[i] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> y(size_t(s.batch * s.channels * s.out[1] * s.out[2]));
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &tp}) {
      max_pool(s, x.data(), y.data(), p);
      CHECK(y == naive_pool(s, x));
    }
  }
  // 1-D and 3-D through the generic path, int8
  PoolShape s;
  s.batch = 1; s.channels = 2; s.spatial = 3;
  s.in[0] = 4; s.in[1] = 5; s.in[2] = 6;
  s.kernel[0] = s.kernel[1] = s.kernel[2] = 2;
  s.out[0] = 3; s.out[1] = 4; s.out[2] = 5;
  std::vector<int8_t> x(size_t(2 * 4 * 5 * 6));
  for (size_t i = 0; i < x.size(); ++i) x[i] = int8_t((i * 37) % 251 - 125);
  std::vector<int8_t> y(size_t(2 * 3 * 4 * 5));
  max_pool(s, x.data(), y.data(), nullptr);
  CHECK(y == naive_pool(s, x));
}

// The 2-D 8-bit paths (rows, then columns; stride 2 and windows up to 3 wide by byte permutes
// where AVX-512 VBMI runs: rows over 64 columns, tails, a window past the last column): stride
// 1 / 2 / 3, pads up to the kernel's size - 1 (windows clipped at both ends), ceil mode, values
// at the type's extremes.
TEST_CASE("max_pool: uint8 / int8 2-D equal the naive pool") {
  ThreadPool tp(2);
  for (auto s : {pool2d(3, 9, 10, 3, 2, 1, 1, false), pool2d(3, 9, 10, 3, 2, 1, 1, true), pool2d(4, 8, 8, 2, 2, 0, 1, false),
                 pool2d(2, 11, 7, 3, 1, 2, 1, false), pool2d(2, 12, 13, 5, 3, 4, 1, true), pool2d(1, 1, 1, 1, 1, 0, 1, false),
                 pool2d(64, 112, 112, 3, 2, 1, 1, false), pool2d(2, 7, 150, 3, 2, 1, 1, true),
                 pool2d(2, 5, 65, 3, 2, 0, 1, false), pool2d(2, 6, 66, 3, 2, 2, 1, true), pool2d(2, 6, 33, 2, 2, 1, 1, false),
                 pool2d(2, 4, 129, 1, 2, 0, 1, false)}) {
    const size_t n = size_t(s.batch * s.channels * s.in[1] * s.in[2]), m = size_t(s.batch * s.channels * s.out[1] * s.out[2]);
    std::vector<uint8_t> xu(n);
    std::vector<int8_t> xs(n);
    for (size_t i = 0; i < n; ++i) {
      xu[i] = uint8_t(i % 7 == 0 ? 0 : i % 11 == 0 ? 255 : (i * 37 + i / 5) % 251);
      xs[i] = int8_t(xu[i] ^ 0x80);
    }
    std::vector<uint8_t> yu(m);
    std::vector<int8_t> ys(m);
    max_pool(s, xu.data(), yu.data(), &tp);
    max_pool(s, xs.data(), ys.data(), nullptr);
    CHECK(yu == naive_pool(s, xu));
    CHECK(ys == naive_pool(s, xs));
  }
}

TEST_CASE("global_average_pool") {
  auto x = random_floats(3 * 49, 9);
  std::vector<float> y(3);
  global_average_pool(3, 49, x.data(), y.data(), nullptr);
  for (int p = 0; p < 3; ++p) {
    double s = 0;
    for (int i = 0; i < 49; ++i) s += x[size_t(p * 49 + i)];
    CHECK(y[size_t(p)] == doctest::Approx(s / 49).epsilon(1e-5));
  }
}

TEST_CASE("global_max_pool: NaN propagates, threaded") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {1, 5, 2, -1, nan, 3, nan, 1, 2, -7, -8, -9};
  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    std::vector<float> y(4);
    global_max_pool(4, 3, x.data(), y.data(), p);
    CHECK(y[0] == 5.f);
    CHECK(std::isnan(y[1]));
    CHECK(std::isnan(y[2]));
    CHECK(y[3] == -7.f);
  }
}

TEST_CASE("average_pool: padding excluded or counted, dilation") {
  PoolShape s;
  s.spatial = 1;
  s.in[2] = 4;
  s.kernel[2] = 3;
  s.pad_begin[2] = s.pad_end[2] = 1;
  s.out[2] = 4;
  const std::vector<float> x = {1, 2, 3, 4};
  std::vector<float> y(4);
  average_pool(s, false, x.data(), y.data(), nullptr);  // windows [p,1,2] [1,2,3] [2,3,4] [3,4,p]
  CHECK(worst(y, {1.5f, 2.f, 3.f, 3.5f}, 1e-6, 1e-7) <= 1.0);
  average_pool(s, true, x.data(), y.data(), nullptr);
  CHECK(worst(y, {1.f, 2.f, 3.f, 7.f / 3.f}, 1e-6, 1e-7) <= 1.0);
  PoolShape d;
  d.spatial = 1;
  d.in[2] = 4;
  d.kernel[2] = 2;
  d.dilation[2] = 2;  // taps i, i + 2
  d.out[2] = 2;
  std::vector<float> y2(2);
  average_pool(d, false, x.data(), y2.data(), nullptr);
  CHECK(y2 == std::vector<float>{2.f, 3.f});
  // 2-D, 2 planes, threaded: 2x2 windows, stride 2 over 4x4 planes of 0..15 and 16..31.
  PoolShape q;
  q.batch = 2;
  q.in[1] = q.in[2] = 4;
  q.kernel[1] = q.kernel[2] = 2;
  q.stride[1] = q.stride[2] = 2;
  q.out[1] = q.out[2] = 2;
  std::vector<float> x2(32);
  for (size_t i = 0; i < x2.size(); ++i) x2[i] = float(i);
  ThreadPool pool(2);
  std::vector<float> y3(8);
  average_pool(q, false, x2.data(), y3.data(), &pool);
  CHECK(y3 == std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f, 18.5f, 20.5f, 26.5f, 28.5f});
}

// The channels-last 8-bit pool (x [batch][h][w][channels]: the channels-last conv's output)
// into NCHW planes, against max_pool over the same values in planes: 16-128 channels (a last
// block of 16-48), kernels 1-5, strides 1-3, pads to kernel - 1, dilation 2, ceil mode, maps
// of 1 to 70 columns (16-pixel groups, a 6-pixel tail), 2 images, 1-3 threads, both types.
TEST_CASE("max_pool_channels_last equals max_pool over planes") {
  PoolShape probe;
  probe.channels = 16;
  if (!max_pool_channels_last_ok(probe)) return;  // no AVX-512 BW here
  ThreadPool two(2), three(3);
  int n_case = 0;
  for (auto s : {pool2d(64, 112, 112, 3, 2, 1, 1, false), pool2d(16, 9, 10, 3, 2, 1, 1, true),
                 pool2d(48, 8, 8, 2, 2, 0, 1, false), pool2d(80, 11, 7, 3, 1, 2, 1, false),
                 pool2d(128, 12, 13, 5, 3, 4, 1, true), pool2d(32, 1, 1, 1, 1, 0, 1, false),
                 pool2d(16, 10, 70, 3, 2, 1, 2, false), pool2d(96, 6, 38, 2, 1, 1, 1, true)}) {
    const int64_t C = s.channels, in_plane = s.in[1] * s.in[2];
    const size_t n = size_t(s.batch * C * in_plane), m = size_t(s.batch * C * s.out[1] * s.out[2]);
    std::vector<uint8_t> planes(n), last(n);
    for (size_t i = 0; i < n; ++i) planes[i] = uint8_t(i % 7 == 0 ? 0 : i % 11 == 0 ? 255 : (i * 37 + i / 5) % 251);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t p = 0; p < in_plane; ++p)
          last[size_t((b * in_plane + p) * C + c)] = planes[size_t((b * C + c) * in_plane + p)];
    std::vector<int8_t> planes_s(n), last_s(n);
    for (size_t i = 0; i < n; ++i) {
      planes_s[i] = int8_t(planes[i] ^ 0x80);
      last_s[i] = int8_t(last[i] ^ 0x80);
    }
    std::vector<uint8_t> want(m);
    std::vector<int8_t> want_s(m);
    max_pool(s, planes.data(), want.data(), nullptr);
    max_pool(s, planes_s.data(), want_s.data(), nullptr);
    INFO("case ", n_case++);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &two, &three}) {
      std::vector<uint8_t> got(m, 0xcd);
      std::vector<int8_t> got_s(m, 0x55);
      max_pool_channels_last(s, last.data(), got.data(), p);
      max_pool_channels_last(s, last_s.data(), got_s.data(), p);
      CHECK(got == want);
      CHECK(got_s == want_s);
    }
  }
  probe.channels = 24;  // not whole vectors of 16
  CHECK(!max_pool_channels_last_ok(probe));
}
