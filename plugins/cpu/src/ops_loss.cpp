// Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (weights,
// ignore_index, reduction none/sum/mean, optional log_prob output). float32,
// float64. The math is in loss.cpp.
#include <cstring>
#include <string>

#include "loss.hpp"
#include "ops.hpp"

namespace nxrt::cpu {
namespace {

// ------------------------------------------------------ NLL loss, SCE loss

enum class LossRed { None, Sum, Mean };

struct LossArgs {
  LossRed red = LossRed::Mean;
  bool has_ignore = false;
  int64_t ignore = 0;
};

LossArgs loss_args(const Node& n) {
  LossArgs a;
  const std::string r = n.attr_string("reduction", "mean");
  a.red = r == "none" ? LossRed::None : r == "sum" ? LossRed::Sum : LossRed::Mean;
  a.has_ignore = n.has_attr("ignore_index");
  a.ignore = n.attr_int("ignore_index", 0);
  return a;
}

Check loss_check(const Node& n, bool sce) {
  if (auto r = sdk::require_dtypes(n, kFloat, 0, 1)) return r;
  if (auto r = index_dtype(n, 1, "target")) return r;
  if (n.has_input(2) && n.input(2).dtype() != n.input(0).dtype())
    return sdk::refuse(NXRT_REFUSE_DTYPE, "{}: weight dtype differs from input", n.op_type());
  for (size_t i = 0; i < n.output_count(); ++i)
    if (n.has_output(i) && n.output(i).dtype() != n.input(0).dtype())
      return sdk::refuse(NXRT_REFUSE_DTYPE, "{}: output {} dtype differs from input", n.op_type(), i);
  if (!sce)
    if (auto r = no_outputs_from(n, 1, "none")) return r;
  const std::string r = n.attr_string("reduction", "mean");
  if (r != "none" && r != "sum" && r != "mean") return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: reduction '{}'", n.op_type(), r);
  return known_attrs(n, {"reduction", "ignore_index"});
}

// logp: [N, C, D] log-probabilities; writes the loss (shape of target, or a scalar).
template <typename T>
void nll(Context& ctx, const LossArgs& a, const T* logp, int64_t N, int64_t C, int64_t D, const ConstTensorView& target_t,
         const std::optional<ConstTensorView>& weight_t, size_t out_index) {
  const auto target = read_ints(target_t, "NegativeLogLikelihoodLoss", "target");
  if (int64_t(target.size()) != N * D) sdk::fail(NXRT_INVALID_ARGUMENT, "loss: target {} does not match input", dims_str(target_t.dims()));
  const T* w = nullptr;
  if (weight_t) {
    if (weight_t->numel() != C) sdk::fail(NXRT_INVALID_ARGUMENT, "loss: weight must have {} elements", C);
    w = weight_t->data<T>();
  }
  std::vector<double> loss(target.size());
  double wsum = 0;
  int64_t bad = 0;
  if (!nll_loss(logp, N, C, D, target.data(), w, a.has_ignore ? &a.ignore : nullptr, loss.data(), wsum, bad))
    sdk::fail(NXRT_INVALID_ARGUMENT, "loss: target {} out of range [0, {})", bad, C);
  if (a.red == LossRed::None) {
    TensorView y = ctx.output(out_index, sdk::dtype_of<T>(), target_t.dims());
    T* yp = y.data<T>();
    for (size_t i = 0; i < loss.size(); ++i) yp[i] = T(loss[i]);
    return;
  }
  const double s = reduce_loss(loss.data(), int64_t(loss.size()), a.red == LossRed::Mean, w || a.has_ignore, wsum);
  TensorView y = ctx.output(out_index, sdk::dtype_of<T>(), std::span<const int64_t>());
  y.data<T>()[0] = T(s);
}

std::unique_ptr<Kernel> loss_create(const Node& n, CpuSession&, bool sce) {
  const LossArgs a = loss_args(n);
  const bool log_prob_out = sce && n.has_output(1);
  return make_kernel([a, sce, log_prob_out](Context& ctx) {
    ConstTensorView x = ctx.input(0), target = ctx.input(1);
    auto weight = ctx.optional_input(2);
    if (x.rank() < 2) sdk::fail(NXRT_INVALID_ARGUMENT, "loss: input must have rank >= 2");
    const int64_t N = x.dim(0), C = x.dim(1), D = C && N ? x.numel() / (N * C) : 0;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      if (!sce) {
        nll<T>(ctx, a, xp, N, C, D, target, weight, 0);
        return;
      }
      // log_softmax over C.
      std::vector<T> lp(static_cast<size_t>(x.numel()));
      log_softmax_classes(xp, N, C, D, lp.data());
      nll<T>(ctx, a, lp.data(), N, C, D, target, weight, 0);
      if (log_prob_out) {
        TensorView o = ctx.output(1, x.dtype(), x.dims());
        std::memcpy(o.raw(), lp.data(), lp.size() * sizeof(T));
      }
    };
    if (x.dtype() == NXRT_DTYPE_FLOAT32) run(float{});
    else run(double{});
  });
}

}  // namespace

void register_loss_ops(Registry& r) {
  r.add(Def{"NegativeLogLikelihoodLoss", "", 12, INT_MAX, [](const Node& n) { return loss_check(n, false); },
            [](const Node& n, CpuSession& s) { return loss_create(n, s, false); }});
  r.add(Def{"SoftmaxCrossEntropyLoss", "", 12, INT_MAX, [](const Node& n) { return loss_check(n, true); },
            [](const Node& n, CpuSession& s) { return loss_create(n, s, true); }});
}

}  // namespace nxrt::cpu
