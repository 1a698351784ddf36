// ConvTranspose as a direct scatter: every input element adds w * x to the
// output positions its kernel taps reach. One thread per (image, output
// channel) plane; the inner loop runs along the input row. NC... layout,
// 1-3 spatial dims right-aligned into 3 (unused ones: size 1, kernel 1).
#pragma once
#include <cstdint>

#include "thread_pool.hpp"

namespace nxrt::cpu {

struct ConvTransposeShape {
  int64_t batch = 1, in_channels = 1;
  int64_t group_out_channels = 1;  // W is [in_channels][group_out_channels][kernel...]
  int64_t groups = 1;              // output channels: group_out_channels * groups
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, dilation[3] = {1, 1, 1}, pad_begin[3] = {0, 0, 0};
};

// y[n][m][o] = bias[m] + sum over input positions i and taps t with
// o = i * stride - pad_begin + t * dilation of x[n][c][i] * w[c][m % group][t],
// c in m's group. bias may be null.
void conv_transpose(const ConvTransposeShape& s, const float* x, const float* w, const float* bias, float* y,
                    ThreadPool* pool);

}  // namespace nxrt::cpu
