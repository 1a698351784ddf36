// BatchNormalization (inference: per-channel affine) and LayerNormalization.
#pragma once
#include <cstdint>

#include "thread_pool.hpp"

namespace nxrt::cpu {

// Folds scale/bias/mean/var/epsilon into y = x * mul[c] + add[c].
void batchnorm_fold(int64_t channels, const float* scale, const float* bias, const float* mean, const float* var,
                    float epsilon, float* mul, float* add);
// x: [N][C][spatial]
void channel_affine(int64_t batch, int64_t channels, int64_t spatial, const float* x, const float* mul,
                    const float* add, float* y, ThreadPool* pool);

// Normalises each of `rows` rows of `cols` elements: y = (x - mean) * inv_std * scale + bias,
// scale/bias of `cols` elements (bias may be null). mean/inv_std (optional) get one value per row.
void layer_norm(int64_t rows, int64_t cols, const float* x, const float* scale, const float* bias, float epsilon,
                float* y, float* mean_out, float* inv_std_out, ThreadPool* pool);

}  // namespace nxrt::cpu
