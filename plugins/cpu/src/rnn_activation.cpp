#include "rnn_activation.hpp"

#include <cctype>

namespace nxrt::cpu {
namespace {

struct Entry {
  RnnActivationKind kind;
  const char* name;
  bool has_alpha, has_beta;
  double alpha, beta;  // the ONNX defaults (those of the same-named ONNX ops)
};

constexpr Entry kEntries[] = {
    {RnnActivationKind::Relu, "Relu", false, false, 0.0, 0.0},
    {RnnActivationKind::Tanh, "Tanh", false, false, 0.0, 0.0},
    {RnnActivationKind::Sigmoid, "Sigmoid", false, false, 0.0, 0.0},
    {RnnActivationKind::Affine, "Affine", true, true, 1.0, 0.0},
    {RnnActivationKind::LeakyRelu, "LeakyRelu", true, false, 0.01, 0.0},
    {RnnActivationKind::ThresholdedRelu, "ThresholdedRelu", true, false, 1.0, 0.0},
    {RnnActivationKind::ScaledTanh, "ScaledTanh", true, true, 1.0, 1.0},
    {RnnActivationKind::HardSigmoid, "HardSigmoid", true, true, 0.2, 0.5},
    {RnnActivationKind::Elu, "Elu", true, false, 1.0, 0.0},
    {RnnActivationKind::Softsign, "Softsign", false, false, 0.0, 0.0},
    {RnnActivationKind::Softplus, "Softplus", false, false, 0.0, 0.0},
};

const Entry& entry_of(RnnActivationKind k) {
  for (const Entry& e : kEntries)
    if (e.kind == k) return e;
  return kEntries[1];
}

bool same_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

}  // namespace

std::optional<RnnActivationKind> rnn_activation_kind(std::string_view name) {
  for (const Entry& e : kEntries)
    if (same_ignoring_case(name, e.name)) return e.kind;
  return std::nullopt;
}

const char* rnn_activation_name(RnnActivationKind k) { return entry_of(k).name; }

RnnActivations resolve_rnn_activations(const std::vector<std::string>& names, const std::vector<float>& alphas,
                                       const std::vector<float>& betas, const std::vector<RnnActivationKind>& defaults,
                                       size_t directions) {
  RnnActivations out;
  const size_t per = defaults.size();
  std::vector<RnnActivationKind> kinds;
  if (names.empty()) {
    for (size_t d = 0; d < directions; ++d) kinds.insert(kinds.end(), defaults.begin(), defaults.end());
  } else {
    for (const std::string& n : names) {
      auto k = rnn_activation_kind(n);
      if (!k) {
        out.error = "unknown activation '" + n +
                    "' (expected Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, "
                    "Softsign or Softplus)";
        return out;
      }
      kinds.push_back(*k);
    }
    if (kinds.size() != per * directions && !(directions == 2 && kinds.size() == per)) {
      out.error = std::to_string(kinds.size()) + " activations given, " + std::to_string(per) + " per direction x " +
                  std::to_string(directions) + " direction(s) expected";
      return out;
    }
  }
  size_t ai = 0, bi = 0;
  for (RnnActivationKind k : kinds) {
    const Entry& e = entry_of(k);
    RnnActivation f{k, e.alpha, e.beta};
    if (e.has_alpha && ai < alphas.size()) f.alpha = alphas[ai++];
    if (e.has_beta && bi < betas.size()) f.beta = betas[bi++];
    out.functions.push_back(f);
  }
  if (ai != alphas.size() || bi != betas.size()) {
    out.functions.clear();
    out.error = "activation_alpha has " + std::to_string(alphas.size()) + " and activation_beta " +
                std::to_string(betas.size()) + " values, the activations take " + std::to_string(ai) + " and " +
                std::to_string(bi);
    return out;
  }
  if (out.functions.size() == per && directions == 2)  // one direction's list, used for both
    for (size_t i = 0; i < per; ++i) out.functions.push_back(out.functions[i]);
  return out;
}

}  // namespace nxrt::cpu
