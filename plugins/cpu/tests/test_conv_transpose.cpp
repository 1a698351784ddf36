// ConvTranspose scatter on small 1-D / 2-D cases worked out by hand.
#include <doctest/doctest.h>

#include <vector>

#include "conv_transpose.hpp"

using namespace nxrt::cpu;

namespace {
ConvTransposeShape shape_1d(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t out) {
  ConvTransposeShape s;
  s.in[2] = in;
  s.kernel[2] = k;
  s.stride[2] = stride;
  s.pad_begin[2] = pad;
  s.out[2] = out;
  return s;
}
}  // namespace

TEST_CASE("conv_transpose 1-D: strides, padding, bias") {
  const std::vector<float> x = {1, 2, 3}, w = {1, 1};
  std::vector<float> y(6);
  conv_transpose(shape_1d(3, 2, 2, 0, 6), x.data(), w.data(), nullptr, y.data(), nullptr);
  CHECK(y == std::vector<float>{1, 1, 2, 2, 3, 3});  // stride 2: taps do not overlap
  y.assign(4, 0.f);
  conv_transpose(shape_1d(3, 2, 1, 0, 4), x.data(), w.data(), nullptr, y.data(), nullptr);
  CHECK(y == std::vector<float>{1, 3, 5, 3});
  y.assign(2, 0.f);
  const float bias = 10;
  conv_transpose(shape_1d(3, 2, 1, 1, 2), x.data(), w.data(), &bias, y.data(), nullptr);  // pads 1 + 1 crop the ends
  CHECK(y == std::vector<float>{13, 15});
  ConvTransposeShape d = shape_1d(2, 2, 1, 0, 4);
  d.dilation[2] = 2;  // taps at 0 and 2
  const std::vector<float> w2 = {1, 10};
  y.assign(4, 0.f);
  conv_transpose(d, x.data(), w2.data(), nullptr, y.data(), nullptr);
  CHECK(y == std::vector<float>{1, 2, 10, 20});
}

TEST_CASE("conv_transpose 2-D with groups, threaded") {
  // 2 input channels, 2 groups, 1 output channel per group; 2x2 input, 1x1 kernels, stride 2 -> 3x3 (output_padding 0).
  ConvTransposeShape s;
  s.in_channels = 2;
  s.groups = 2;
  s.in[1] = s.in[2] = 2;
  s.stride[1] = s.stride[2] = 2;
  s.out[1] = s.out[2] = 3;
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8}, w = {2, -1};
  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    std::vector<float> y(18, 99.f);
    conv_transpose(s, x.data(), w.data(), nullptr, y.data(), p);
    CHECK(y == std::vector<float>{2, 0, 4, 0, 0, 0, 6, 0, 8, -5, 0, -6, 0, 0, 0, -7, 0, -8});
  }
}
