#include "normalization.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "simd.hpp"
#include "tensor_ops.hpp"

namespace nxrt::cpu {

void batchnorm_fold(int64_t channels, const float* scale, const float* bias, const float* mean, const float* var,
                    float epsilon, float* mul, float* add) {
  for (int64_t c = 0; c < channels; ++c) {
    const float m = scale[c] / std::sqrt(var[c] + epsilon);
    mul[c] = m;
    add[c] = bias[c] - mean[c] * m;
  }
}

void batchnorm_training(int64_t batch, int64_t channels, int64_t spatial, const float* x, const float* scale,
                        const float* bias, const float* mean, const float* var, double epsilon, double momentum,
                        float* y, float* running_mean, float* running_var, ThreadPool* pool) {
  const int parts = threads_for(pool, double(batch) * double(channels) * double(spatial) * 2, 65536.0);
  parallel_ranges(pool, channels, parts, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const double count = double(batch) * double(spatial);
      double sum = 0;
      for (int64_t b = 0; b < batch; ++b) {
        const float* p = x + (b * channels + c) * spatial;
        for (int64_t i = 0; i < spatial; ++i) sum += p[i];
      }
      const double m = count > 0 ? sum / count : 0.0;
      double sq = 0;
      for (int64_t b = 0; b < batch; ++b) {
        const float* p = x + (b * channels + c) * spatial;
        for (int64_t i = 0; i < spatial; ++i) sq += (p[i] - m) * (p[i] - m);
      }
      const double v = count > 0 ? sq / count : 0.0;
      const double mul = double(scale[c]) / std::sqrt(v + epsilon), add = double(bias[c]) - m * mul;
      for (int64_t b = 0; b < batch; ++b) {
        const float* p = x + (b * channels + c) * spatial;
        float* q = y + (b * channels + c) * spatial;
        for (int64_t i = 0; i < spatial; ++i) q[i] = float(p[i] * mul + add);
      }
      if (running_mean) running_mean[c] = float(double(mean[c]) * momentum + m * (1 - momentum));
      if (running_var) running_var[c] = float(double(var[c]) * momentum + v * (1 - momentum));
    }
  });
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

void instance_norm(int64_t batch, int64_t channels, int64_t spatial, const float* x, const float* scale, const float* bias,
                   double epsilon, float* y, ThreadPool* pool) {
  const int64_t planes = batch * channels, sp = spatial, ch = channels;
  const double eps = epsilon;
  const int parts = threads_for(pool, double(planes * sp) * 3, 65536.0);
  parallel_ranges(pool, planes, parts, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const float* r = x + p * sp;
      double mean = 0;
      for (int64_t i = 0; i < sp; ++i) mean += r[i];
      mean /= double(sp);
      double var = 0;
      for (int64_t i = 0; i < sp; ++i) var += (r[i] - mean) * (r[i] - mean);
      var /= double(sp);
      const double g = double(scale[p % ch]) / std::sqrt(var + eps), bb = bias[p % ch];
      float* o = y + p * sp;
      for (int64_t i = 0; i < sp; ++i) o[i] = float((r[i] - mean) * g + bb);
    }
  });
}

void lrn(int64_t batch, int64_t channels, int64_t spatial, int64_t size, double alpha, double beta, double bias,
         const float* x, float* y) {
  const int64_t N = batch, C = channels, sp = spatial;
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  for (int64_t nn = 0; nn < N; ++nn)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < sp; ++s) {
        double sq = 0;
        for (int64_t cc = std::max<int64_t>(0, c - lo); cc <= std::min(C - 1, c + hi); ++cc) {
          const double v = x[(nn * C + cc) * sp + s];
          sq += v * v;
        }
        const int64_t off = (nn * C + c) * sp + s;
        y[off] = float(x[off] / std::pow(bias + alpha / double(size) * sq, beta));
      }
}

void mean_variance_normalization(const float* x, std::span<const int64_t> dims, const std::vector<bool>& axes, float* y,
                                 ThreadPool* pool) {
  std::vector<int64_t> md(dims.begin(), dims.end());
  int64_t m = 1, numel = 1;
  for (size_t d = 0; d < md.size(); ++d) {
    numel *= md[d];
    if (axes[d]) md[d] = 1;
    m *= md[d];
  }
  std::vector<float> mean(static_cast<size_t>(m)), meansq(static_cast<size_t>(m));
  std::vector<float> sq(static_cast<size_t>(numel));
  for (size_t i = 0; i < sq.size(); ++i) sq[i] = x[i] * x[i];
  reduce<float>(ReduceOp::Mean, x, dims, axes, mean.data(), pool);
  reduce<float>(ReduceOp::Mean, sq.data(), dims, axes, meansq.data(), pool);
  const std::array<std::vector<int64_t>, 2> st = {contiguous_strides(dims), broadcast_strides(md, dims)};
  broadcast_rows<2>(dims, st, pool, [&](int64_t o, int64_t cnt, const int64_t* off, const int64_t* in) {
    for (int64_t i = 0; i < cnt; ++i) {
      const int64_t k = off[1] + i * in[1];
      const double mu = mean[size_t(k)];
      const double sd = std::sqrt(std::max(0.0, double(meansq[size_t(k)]) - mu * mu));
      y[o + i] = float((double(x[off[0] + i * in[0]]) - mu) / (sd + 1e-9));
    }
  });
}

}  // namespace nxrt::cpu
