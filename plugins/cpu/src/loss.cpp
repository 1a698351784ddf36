#include "loss.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace nxrt::cpu {

template <typename T>
void log_softmax_classes(const T* xp, int64_t N, int64_t C, int64_t D, T* lp) {
  for (int64_t i = 0; i < N; ++i)
    for (int64_t d = 0; d < D; ++d) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < C; ++c) m = std::max(m, double(xp[(i * C + c) * D + d]));
      double s = 0;
      for (int64_t c = 0; c < C; ++c) s += std::exp(double(xp[(i * C + c) * D + d]) - m);
      const double ls = std::log(s) + m;
      for (int64_t c = 0; c < C; ++c) lp[size_t((i * C + c) * D + d)] = T(double(xp[(i * C + c) * D + d]) - ls);
    }
}

template <typename T>
bool nll_loss(const T* logp, int64_t N, int64_t C, int64_t D, const int64_t* target, const T* w, const int64_t* ignore,
              double* loss, double& weight_sum, int64_t& bad_target) {
  double wsum = 0;
  for (int64_t i = 0; i < N; ++i)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t t = target[size_t(i * D + d)];
      double l = 0, wt = 1;
      if (ignore && t == *ignore) {
        wt = 0;
      } else {
        if (t < 0 || t >= C) {
          bad_target = t;
          return false;
        }
        if (w) wt = double(w[t]);
        l = -double(logp[(i * C + t) * D + d]) * wt;
      }
      loss[size_t(i * D + d)] = l;
      wsum += wt;
    }
  weight_sum = wsum;
  return true;
}

double reduce_loss(const double* loss, int64_t n, bool mean, bool weighted, double weight_sum) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += loss[i];
  if (mean) s = weighted ? s / weight_sum : s / double(n);
  return s;
}

template void log_softmax_classes<float>(const float*, int64_t, int64_t, int64_t, float*);
template void log_softmax_classes<double>(const double*, int64_t, int64_t, int64_t, double*);
template bool nll_loss<float>(const float*, int64_t, int64_t, int64_t, const int64_t*, const float*, const int64_t*, double*,
                              double&, int64_t&);
template bool nll_loss<double>(const double*, int64_t, int64_t, int64_t, const int64_t*, const double*, const int64_t*,
                               double*, double&, int64_t&);

}  // namespace nxrt::cpu
