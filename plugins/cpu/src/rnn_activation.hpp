// The activation functions of ONNX RNN/GRU/LSTM (the `activations`,
// `activation_alpha`, `activation_beta` attributes), resolved once at kernel
// creation into a kind and its parameters so the per-element cost is a switch.
#pragma once

#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nxrt::cpu {

enum class RnnActivationKind {
  Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus
};

struct RnnActivation {
  RnnActivationKind kind = RnnActivationKind::Tanh;
  double alpha = 0.0;
  double beta = 0.0;

  double operator()(double x) const {
    switch (kind) {
      case RnnActivationKind::Relu: return x > 0.0 ? x : 0.0;
      case RnnActivationKind::Tanh: return std::tanh(x);
      case RnnActivationKind::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
      case RnnActivationKind::Affine: return alpha * x + beta;
      case RnnActivationKind::LeakyRelu: return x >= 0.0 ? x : alpha * x;
      case RnnActivationKind::ThresholdedRelu: return x > alpha ? x : 0.0;
      case RnnActivationKind::ScaledTanh: return alpha * std::tanh(beta * x);
      case RnnActivationKind::HardSigmoid: {
        const double v = alpha * x + beta;
        return v < 0.0 ? 0.0 : v > 1.0 ? 1.0 : v;
      }
      case RnnActivationKind::Elu: return x >= 0.0 ? x : alpha * std::expm1(x);
      case RnnActivationKind::Softsign: return x / (1.0 + std::fabs(x));
      case RnnActivationKind::Softplus: return x > 0.0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    }
    return x;
  }
};

// The ONNX name (matched case-insensitively, as ONNX Runtime does); nullopt if unknown.
std::optional<RnnActivationKind> rnn_activation_kind(std::string_view name);
const char* rnn_activation_name(RnnActivationKind k);

// The activations of one node, per direction: `per_direction` functions (RNN 1,
// GRU 2, LSTM 3) times `directions`. `names` empty means the defaults for every
// direction; a bidirectional node may also give one direction's list, used for
// both. alpha/beta values are consumed in order by the functions that take them
// (Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu), each
// falling back to its ONNX default when the list has run out. Leftover values,
// unknown names and a wrong count are errors (`error` says which).
struct RnnActivations {
  std::vector<RnnActivation> functions;  // [direction * per_direction + i]
  std::string error;                     // empty on success
};
RnnActivations resolve_rnn_activations(const std::vector<std::string>& names, const std::vector<float>& alphas,
                                       const std::vector<float>& betas, const std::vector<RnnActivationKind>& defaults,
                                       size_t directions);

}  // namespace nxrt::cpu
