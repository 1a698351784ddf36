// Smaller kernels behind newly claimed ONNX cases: bfloat16 rounding, mixed
// type Pow, MaxPool indices with both storage orders, BatchNormalization in
// training mode.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "elementwise.hpp"
#include "normalization.hpp"
#include "pooling.hpp"
#include "tensor_ops.hpp"

using namespace nxrt::cpu;

namespace {
uint32_t bits_of(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

TEST_CASE("float_to_bfloat16: nearest even and truncation") {
  // 0x3F80'8000: exactly half way between bf16 0x3F80 and 0x3F81 -> even (0x3F80); truncation also 0x3F80.
  CHECK(float_to_bfloat16(float_of(0x3F808000u), Bf16Round::NearestEven) == 0x3F80);
  // 0x3F81'8000: half way between 0x3F81 and 0x3F82 -> even 0x3F82; truncation 0x3F81.
  CHECK(float_to_bfloat16(float_of(0x3F818000u), Bf16Round::NearestEven) == 0x3F82);
  CHECK(float_to_bfloat16(float_of(0x3F818000u), Bf16Round::Truncate) == 0x3F81);
  // Just above half way rounds up; just below rounds down.
  CHECK(float_to_bfloat16(float_of(0x3F808001u), Bf16Round::NearestEven) == 0x3F81);
  CHECK(float_to_bfloat16(float_of(0x3F807FFFu), Bf16Round::NearestEven) == 0x3F80);
  // The largest float rounds to infinity, keeps its sign; infinities stay.
  CHECK(float_to_bfloat16(std::numeric_limits<float>::max(), Bf16Round::NearestEven) == 0x7F80);
  CHECK(float_to_bfloat16(-std::numeric_limits<float>::max(), Bf16Round::NearestEven) == 0xFF80);
  CHECK(float_to_bfloat16(std::numeric_limits<float>::max(), Bf16Round::Truncate) == 0x7F7F);
  CHECK(float_to_bfloat16(-std::numeric_limits<float>::infinity(), Bf16Round::Truncate) == 0xFF80);
  // NaN stays NaN (a payload only in the low bits must not truncate to infinity).
  const uint16_t nan_bits = float_to_bfloat16(float_of(0x7F800001u), Bf16Round::Truncate);
  CHECK(std::isnan(bfloat16_to_float(nan_bits)));
  CHECK(bfloat16_to_float(0x3F80) == 1.0f);
  CHECK(bits_of(bfloat16_to_float(0xC0A0)) == 0xC0A00000u);  // -5
}

TEST_CASE("cast: float32 -> bfloat16 honours the rounding mode, bfloat16 -> float32 is exact") {
  const std::vector<float> x = {0.48033667f, 0.49968487f, -0.21087195f};
  std::vector<uint16_t> rne(3), trunc(3);
  cast(x.data(), Elem::F32, rne.data(), Elem::BF16, 3, Bf16Round::NearestEven);
  cast(x.data(), Elem::F32, trunc.data(), Elem::BF16, 3, Bf16Round::Truncate);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(trunc[i] == uint16_t(bits_of(x[i]) >> 16));
    CHECK(rne[i] == float_to_bfloat16(x[i], Bf16Round::NearestEven));
  }
  CHECK(rne[0] == trunc[0] + 1);  // 0x3EF5EEB0: the low half 0xEEB0 > 0x8000 rounds up
  std::vector<float> back(3);
  cast(trunc.data(), Elem::BF16, back.data(), Elem::F32, 3);
  for (size_t i = 0; i < 3; ++i) CHECK(bits_of(back[i]) == (bits_of(x[i]) & 0xFFFF0000u));
}

TEST_CASE("pow_mixed: integer powers exact, float exponents through double") {
  CHECK(pow_mixed<int32_t, int32_t>(3, 6) == 729);
  CHECK(pow_mixed<int64_t, int64_t>(-2, 63) == std::numeric_limits<int64_t>::min());
  CHECK(pow_mixed<uint8_t, uint64_t>(3, 5u) == uint8_t(243));
  CHECK(pow_mixed<int8_t, int32_t>(3, 5) == int8_t(int16_t(243) - 256));  // wraps like numpy
  CHECK(pow_mixed<int64_t, int64_t>(3, 39) == 4052555153018976267LL);
  CHECK(pow_mixed<int32_t, int32_t>(2, -1) == 0);
  CHECK(pow_mixed<int32_t, int32_t>(-1, -3) == -1);
  CHECK(pow_mixed<int32_t, float>(2, 0.5f) == 1);      // 1.414 truncates
  CHECK(pow_mixed<int32_t, float>(3, 6.f) == 729);
  CHECK(pow_mixed<int64_t, float>(2, 70.f) == std::numeric_limits<int64_t>::max());  // saturates
  CHECK(pow_mixed<float, int64_t>(2.f, -2) == 0.25f);
  CHECK(pow_mixed<float, uint32_t>(1.5f, 3u) == 3.375f);
}

TEST_CASE("max_pool_with_indices: row- and column-major indices, batch and channel offsets") {
  // Two planes of 3x4 (batch 1, channels 2), 2x2 windows, stride 2: 1x2 outputs per plane.
  PoolShape s;
  s.batch = 1; s.channels = 2; s.spatial = 2;
  s.in[1] = 3; s.in[2] = 4; s.out[1] = 1; s.out[2] = 2;
  s.kernel[1] = 2; s.kernel[2] = 2; s.stride[1] = 2; s.stride[2] = 2;
  const std::vector<float> x = {1, 9, 2, 3,  //
                                4, 5, 8, 8,  // ties: the first (row-major scan) wins
                                0, 0, 0, 0,  //
                                -1, -2, -3, -4,  //
                                -5, -6, -7, -0.5f,  //
                                7, 7, 7, 7};
  std::vector<float> y(4);
  std::vector<int64_t> rm(4), cm(4);
  max_pool_with_indices(s, false, x.data(), y.data(), rm.data(), nullptr);
  CHECK(y == std::vector<float>{9, 8, -1, -0.5f});
  // plane 0: 9 at (0,1) -> 1; 8 at (1,2) -> 6. plane 1 (offset 12): -1 at (0,0); -0.5 at (1,3) -> 7.
  CHECK(rm == std::vector<int64_t>{1, 6, 12, 19});
  max_pool_with_indices(s, true, x.data(), y.data(), cm.data(), nullptr);
  // column-major: h + w * H (H = 3): (0,1) -> 3; (1,2) -> 7; (0,0) -> 0; (1,3) -> 10; plus the plane offset.
  CHECK(cm == std::vector<int64_t>{3, 7, 12, 22});
}

TEST_CASE("max_pool_with_indices: padding is never selected, 1-D") {
  PoolShape s;
  s.batch = 1; s.channels = 1; s.spatial = 1;
  s.in[2] = 3; s.out[2] = 2; s.kernel[2] = 2; s.stride[2] = 2; s.pad_begin[2] = 1; s.pad_end[2] = 0;
  const std::vector<int8_t> x = {-100, -50, 3};
  std::vector<int8_t> y(2);
  std::vector<int64_t> idx(2);
  max_pool_with_indices(s, false, x.data(), y.data(), idx.data(), nullptr);
  CHECK(y == std::vector<int8_t>{-100, 3});
  CHECK(idx == std::vector<int64_t>{0, 2});
}

TEST_CASE("batchnorm_training: batch statistics, biased variance, running averages") {
  // batch 2, channels 2, spatial 2. Channel 0 values {1, 3, 5, 7}: mean 4, biased var 5.
  // Channel 1 values {2, 2, 2, 2}: mean 2, var 0.
  const std::vector<float> x = {1, 3, 2, 2, 5, 7, 2, 2};
  const std::vector<float> scale = {2, 1}, bias = {0.5f, -1}, mean = {1, 1}, var = {1, 2};
  std::vector<float> y(8), rm(2), rv(2);
  batchnorm_training(2, 2, 2, x.data(), scale.data(), bias.data(), mean.data(), var.data(), 1e-5, 0.9, y.data(), rm.data(),
                     rv.data(), nullptr);
  const double inv = 1.0 / std::sqrt(5.0 + 1e-5);
  const double c0[4] = {1, 3, 5, 7};
  const size_t at0[4] = {0, 1, 4, 5};
  for (int i = 0; i < 4; ++i) CHECK(y[at0[i]] == doctest::Approx((c0[i] - 4) * inv * 2 + 0.5).epsilon(1e-6));
  for (size_t i : {2u, 3u, 6u, 7u}) CHECK(y[i] == doctest::Approx(-1.0));
  CHECK(rm[0] == doctest::Approx(1 * 0.9 + 4 * 0.1));
  CHECK(rm[1] == doctest::Approx(1 * 0.9 + 2 * 0.1));
  CHECK(rv[0] == doctest::Approx(1 * 0.9 + 5 * 0.1));
  CHECK(rv[1] == doctest::Approx(2 * 0.9 + 0 * 0.1));
}
