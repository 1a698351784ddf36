// One update step of the ai.onnx.preview.training optimizers on m elements,
// in double: x, gradient g and state(s) in, updated x and state(s) out.
// norm: the L2 regularisation coefficient (the gradient used is norm * x + g).
#pragma once
#include <cstdint>

namespace nxrt::cpu {

// Adagrad: h' = h + g^2, x' = x - r * g / (sqrt(h') + eps), r = rate / (1 + t * decay).
void adagrad_step(int64_t m, const float* x, const float* g, const float* h, double rate, int64_t t, double decay,
                  double norm, double eps, float* x_out, float* h_out);

// Momentum: v' = alpha * v + beta' * g (beta' = 1 on the first step, t == 0),
// x' = x - rate * v' (standard) or x - rate * (g + alpha * v') (nesterov).
void momentum_step(int64_t m, const float* x, const float* g, const float* v, double rate, int64_t t, double alpha,
                   double beta, double norm, bool nesterov, float* x_out, float* v_out);

// Adam: v' = alpha * v + (1 - alpha) * g, h' = beta * h + (1 - beta) * g^2,
// x' = (1 - norm_post) * (x - r * v' / (sqrt(h') + eps)) with the bias-corrected
// rate r (rate itself when t == 0).
void adam_step(int64_t m, const float* x, const float* g, const float* v, const float* h, double rate, int64_t t,
               double alpha, double beta, double norm, double norm_post, double eps, float* x_out, float* v_out,
               float* h_out);

}  // namespace nxrt::cpu
