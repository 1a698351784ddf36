// The math of NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, in
// double, for inputs laid out [N][C][D] (C classes, D = product of the extra
// dims; D = 1 for [N][C]).
#pragma once
#include <cstdint>

namespace nxrt::cpu {

// logp = log_softmax of x over the class axis (max subtracted first). T: float or double.
template <typename T>
void log_softmax_classes(const T* x, int64_t N, int64_t C, int64_t D, T* logp);

// Per-element NLL: loss[n*D + d] = -logp[n][t][d] * weight[t] with t =
// target[n*D + d] (weight null: 1; ignore_index non-null and t equal to it: loss
// 0, weight 0); weight_sum gets the sum of the weights used. Returns false,
// with bad_target set, at the first target outside [0, C).
template <typename T>
bool nll_loss(const T* logp, int64_t N, int64_t C, int64_t D, const int64_t* target, const T* weight,
              const int64_t* ignore_index, double* loss, double& weight_sum, int64_t& bad_target);

// The sum of n losses, or their mean: divided by weight_sum when `weighted`
// (weights or ignore_index given), else by n.
double reduce_loss(const double* loss, int64_t n, bool mean, bool weighted, double weight_sum);

}  // namespace nxrt::cpu
