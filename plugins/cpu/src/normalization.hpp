// BatchNormalization (inference: per-channel affine), LayerNormalization,
// InstanceNormalization, LRN and MeanVarianceNormalization.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "thread_pool.hpp"

namespace nxrt::cpu {

// Folds scale/bias/mean/var/epsilon into y = x * mul[c] + add[c].
void batchnorm_fold(int64_t channels, const float* scale, const float* bias, const float* mean, const float* var,
                    float epsilon, float* mul, float* add);
// x: [N][C][spatial]
void channel_affine(int64_t batch, int64_t channels, int64_t spatial, const float* x, const float* mul,
                    const float* add, float* y, ThreadPool* pool);

// BatchNormalization with training_mode=1 on x: [batch][channels][spatial]:
// each channel is normalised by its batch mean and biased variance (over
// batch and spatial, in double), y = (x - mean_b) * scale[c] / sqrt(var_b +
// epsilon) + bias[c]; running_mean/var (optional) get
// mean * momentum + mean_b * (1 - momentum), likewise for var.
void batchnorm_training(int64_t batch, int64_t channels, int64_t spatial, const float* x, const float* scale,
                        const float* bias, const float* mean, const float* var, double epsilon, double momentum,
                        float* y, float* running_mean, float* running_var, ThreadPool* pool);

// Normalises each of `rows` rows of `cols` elements: y = (x - mean) * inv_std * scale + bias,
// scale/bias of `cols` elements (bias may be null). mean/inv_std (optional) get one value per row.
void layer_norm(int64_t rows, int64_t cols, const float* x, const float* scale, const float* bias, float epsilon,
                float* y, float* mean_out, float* inv_std_out, ThreadPool* pool);

// InstanceNormalization of x: [batch][channels][spatial]: each plane is
// normalised by its own mean and (biased) variance, in double:
// y = (x - mean) * scale[c] / sqrt(var + epsilon) + bias[c].
void instance_norm(int64_t batch, int64_t channels, int64_t spatial, const float* x, const float* scale, const float* bias,
                   double epsilon, float* y, ThreadPool* pool);

// LRN across channels of x: [batch][channels][spatial]: y = x / (bias +
// alpha / size * sum of x^2 over channels [c - (size-1)/2, c + size/2])^beta,
// in double.
void lrn(int64_t batch, int64_t channels, int64_t spatial, int64_t size, double alpha, double beta, double bias,
         const float* x, float* y);

// MeanVarianceNormalization: y = (x - mean) / (sqrt(mean(x^2) - mean^2) +
// 1e-9), the means taken over the axes flagged in `axes` (one flag per dim).
void mean_variance_normalization(const float* x, std::span<const int64_t> dims, const std::vector<bool>& axes, float* y,
                                 ThreadPool* pool);

}  // namespace nxrt::cpu
