#include "normalization.hpp"

#include <cmath>

#include "simd.hpp"

namespace nxrt::cpu {

void batchnorm_fold(int64_t channels, const float* scale, const float* bias, const float* mean, const float* var,
                    float epsilon, float* mul, float* add) {
  for (int64_t c = 0; c < channels; ++c) {
    const float m = scale[c] / std::sqrt(var[c] + epsilon);
    mul[c] = m;
    add[c] = bias[c] - mean[c] * m;
  }
}

NXRT_CLONES
static void affine_plane(const float* x, float* y, int64_t n, float m, float a) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * m + a;
}

void channel_affine(int64_t batch, int64_t channels, int64_t spatial, const float* x, const float* mul,
                    const float* add, float* y, ThreadPool* pool) {
  const int64_t planes = batch * channels;
  const int t = threads_for(pool, double(planes) * double(spatial), 1 << 17);
  const int64_t tasks = t <= 1 ? 1 : std::min<int64_t>(planes, int64_t(t) * 4);
  auto body = [&](int64_t i) {
    int64_t b, e;
    split_range(planes, tasks, i, b, e);
    for (int64_t p = b; p < e; ++p) {
      const int64_t c = p % channels;
      affine_plane(x + p * spatial, y + p * spatial, spatial, mul[c], add[c]);
    }
  };
  if (tasks <= 1) body(0);
  else parallel_for(pool, tasks, body);
}

NXRT_CLONES
static void layer_norm_row(const float* x, const float* scale, const float* bias, float epsilon, float* y,
                           int64_t n, float* mean_out, float* inv_out) {
  // two passes in float with 16 partial sums (stash_type = float)
  float s[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) s[j] += x[i + j];
  float sum = 0.f;
  for (; i < n; ++i) sum += x[i];
  for (int j = 0; j < 16; ++j) sum += s[j];
  const float mean = sum / float(n);
  float q[16] = {};
  i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) {
      const float d = x[i + j] - mean;
      q[j] += d * d;
    }
  float var = 0.f;
  for (; i < n; ++i) {
    const float d = x[i] - mean;
    var += d * d;
  }
  for (int j = 0; j < 16; ++j) var += q[j];
  var /= float(n);
  const float inv = 1.f / std::sqrt(var + epsilon);
  if (bias) {
    for (int64_t k = 0; k < n; ++k) y[k] = (x[k] - mean) * inv * scale[k] + bias[k];
  } else {
    for (int64_t k = 0; k < n; ++k) y[k] = (x[k] - mean) * inv * scale[k];
  }
  if (mean_out) *mean_out = mean;
  if (inv_out) *inv_out = inv;
}

void layer_norm(int64_t rows, int64_t cols, const float* x, const float* scale, const float* bias, float epsilon,
                float* y, float* mean_out, float* inv_std_out, ThreadPool* pool) {
  const int t = threads_for(pool, double(rows) * double(cols), 1 << 15);
  const int64_t tasks = t <= 1 ? 1 : std::min<int64_t>(rows, int64_t(t) * 4);
  auto body = [&](int64_t i) {
    int64_t b, e;
    split_range(rows, tasks, i, b, e);
    for (int64_t r = b; r < e; ++r)
      layer_norm_row(x + r * cols, scale, bias, epsilon, y + r * cols, cols, mean_out ? mean_out + r : nullptr,
                     inv_std_out ? inv_std_out + r : nullptr);
  };
  if (tasks <= 1) body(0);
  else parallel_for(pool, tasks, body);
}

}  // namespace nxrt::cpu
