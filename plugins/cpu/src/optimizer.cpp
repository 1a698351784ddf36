#include "optimizer.hpp"

#include <cmath>

namespace nxrt::cpu {

void adagrad_step(int64_t m, const float* xp, const float* gp, const float* vp, double R, int64_t T, double decay,
                  double norm, double eps, float* xn, float* vn) {
  const double rr = R / (1 + double(T) * decay);
  for (int64_t i = 0; i < m; ++i) {
    const double gr = norm * xp[i] + gp[i], h = vp[i] + gr * gr;
    vn[i] = float(h);
    xn[i] = float(xp[i] - rr * gr / (std::sqrt(h) + eps));
  }
}

void momentum_step(int64_t m, const float* xp, const float* gp, const float* vp, double R, int64_t T, double alpha,
                   double beta, double norm, bool nesterov, float* xn, float* vn) {
  const double ba = T > 0 ? beta : 1.0;
  for (int64_t i = 0; i < m; ++i) {
    const double gr = norm * xp[i] + gp[i], vv = alpha * vp[i] + ba * gr;
    vn[i] = float(vv);
    xn[i] = float(nesterov ? xp[i] - R * (gr + alpha * vv) : xp[i] - R * vv);
  }
}

void adam_step(int64_t m, const float* xp, const float* gp, const float* vp, const float* hp, double R, int64_t T,
               double alpha, double beta, double norm, double norm_post, double eps, float* xn, float* vn, float* hn) {
  const double ra = T > 0 ? R * std::sqrt(1 - std::pow(beta, double(T))) / (1 - std::pow(alpha, double(T))) : R;
  for (int64_t i = 0; i < m; ++i) {
    const double gr = norm * xp[i] + gp[i];
    const double vv = alpha * vp[i] + (1 - alpha) * gr, hh = beta * hp[i] + (1 - beta) * gr * gr;
    vn[i] = float(vv);
    hn[i] = float(hh);
    xn[i] = float((1 - norm_post) * (xp[i] - ra * (vv / (std::sqrt(hh) + eps))));
  }
}

}  // namespace nxrt::cpu
