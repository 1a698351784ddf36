// Exact integer linear algebra behind MatMulInteger, ConvInteger,
// QLinearMatMul and QLinearConv: products of zero-point-shifted 8-bit values
// accumulated in int32 (exact: the float GEMM would round sums past 2^24),
// and the requantization of an int32 accumulator to 8 bits.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "conv.hpp"
#include "thread_pool.hpp"

namespace nxrt::cpu {

// C[m][n] = sum_k (A[m][k] - a_zp[m]) * (B[k][n] - b_zp[n]), A [M][K] and
// B [K][N] row-major, a_zp M values (per row), b_zp N values (per column).
// Sums wrap in int32 like the ONNX reference's int32 matmul.
template <typename TA, typename TB>
void gemm_integer(int64_t M, int64_t N, int64_t K, const TA* a, const int32_t* a_zp, const TB* b, const int32_t* b_zp,
                  int32_t* c, ThreadPool* pool);

// y[n][oc][oh][ow] = sum over the window of (x - x_zp) * (w[oc] - w_zp[oc])
// (groups, strides, dilations, begin pads from the shape); taps in the
// padding add nothing (they stand for x_zp). x [N][IC][H][W], w
// [OC][IC/g][KH][KW], w_zp OC values.
template <typename TX, typename TW>
void conv_integer(const ConvShape& s, const TX* x, int32_t x_zp, const TW* w, const int32_t* w_zp, int32_t* y,
                  ThreadPool* pool);

// saturate(round_half_even(acc * multiplier) + zero_point) to Q, in double
// (acc * multiplier is exact there for |acc| < 2^29 and a float multiplier).
template <typename Q>
Q requantize(int32_t acc, double multiplier, int32_t zero_point) {
  const double r = std::nearbyint(double(acc) * multiplier) + double(zero_point);
  if (r <= double(std::numeric_limits<Q>::lowest())) return std::numeric_limits<Q>::lowest();
  if (r >= double(std::numeric_limits<Q>::max())) return std::numeric_limits<Q>::max();
  return Q(r);
}

}  // namespace nxrt::cpu
