// Random ops: RandomUniform, RandomNormal, RandomUniformLike,
// RandomNormalLike, Bernoulli, Multinomial, and Dropout from opset 12 (where
// training_mode may turn it random; 7-11 is the identity in ops_shape.cpp).
// A node with a seed attribute draws the same values on every run; without
// one every run draws new values (random.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops.hpp"
#include "random.hpp"

namespace nxrt::cpu {
namespace {

// The generator of one run: fixed by the node's seed, or fresh.
struct SeedSpec {
  bool seeded = false;
  uint64_t seed = 0;
  Rng rng() const { return Rng(seeded ? seed : fresh_seed()); }
};

SeedSpec float_seed(const Node& n) {
  if (auto a = n.attr("seed")) return {true, seed_from_float(a->f())};
  return {};
}

// Input 0 is float32 or float64 (probabilities, log-probabilities).
Check float_input(const Node& n) {
  const auto t = n.input(0).dtype();
  if (t != NXRT_DTYPE_FLOAT32 && t != NXRT_DTYPE_FLOAT64)
    return sdk::refuse(NXRT_REFUSE_DTYPE, "{} input is {}, only float32/float64 are implemented", n.op_type(), sdk::dtype_name(t));
  return std::nullopt;
}

Check float_output(const Node& n) {
  const auto t = n.output(0).dtype();
  if (t != NXRT_DTYPE_FLOAT32 && t != NXRT_DTYPE_FLOAT64)
    return sdk::refuse(NXRT_REFUSE_DTYPE, "{} output is {}, only float32/float64 are implemented", n.op_type(), sdk::dtype_name(t));
  return std::nullopt;
}

// ------------------------------------------- RandomUniform(Like), RandomNormal(Like)

enum class Dist { Uniform, Normal };

Check random_check(const Node& n, Dist d, bool like) {
  if (auto r = float_output(n)) return r;
  if (!like && !n.has_attr("shape")) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: the shape attribute is missing", n.op_type());
  if (d == Dist::Uniform)
    return like ? known_attrs(n, {"dtype", "high", "low", "seed"}) : known_attrs(n, {"dtype", "high", "low", "seed", "shape"});
  return like ? known_attrs(n, {"dtype", "mean", "scale", "seed"}) : known_attrs(n, {"dtype", "mean", "scale", "seed", "shape"});
}

std::unique_ptr<Kernel> random_create(const Node& n, Dist d, bool like) {
  const nxrt_dtype dt = n.output(0).dtype();
  const SeedSpec seed = float_seed(n);
  const double a = d == Dist::Uniform ? n.attr_float("low", 0.f) : n.attr_float("mean", 0.f);
  const double b = d == Dist::Uniform ? n.attr_float("high", 1.f) : n.attr_float("scale", 1.f);
  if (d == Dist::Uniform && !(a <= b)) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: low {} is above high {}", n.op_type(), a, b);
  std::vector<int64_t> shape;
  if (!like) {
    shape = n.attr_ints("shape");
    for (auto v : shape)
      if (v < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: negative dim in shape {}", n.op_type(), dims_str(shape));
  }
  return make_kernel([=](Context& ctx) {
    TensorView y = ctx.output(0, dt, like ? ctx.input(0).dims() : std::span<const int64_t>(shape));
    Rng g = seed.rng();
    if (dt == NXRT_DTYPE_FLOAT32) {
      if (d == Dist::Uniform) fill_uniform(g, y.data<float>(), y.numel(), a, b);
      else fill_normal(g, y.data<float>(), y.numel(), a, b);
    } else {
      if (d == Dist::Uniform) fill_uniform(g, y.data<double>(), y.numel(), a, b);
      else fill_normal(g, y.data<double>(), y.numel(), a, b);
    }
  });
}

// --------------------------------------------------------------- Bernoulli

Check bernoulli_check(const Node& n) {
  if (auto r = float_input(n)) return r;
  bool ok = false;
  for (auto t : kNumBool) ok = ok || t == n.output(0).dtype();
  if (!ok) return sdk::refuse(NXRT_REFUSE_DTYPE, "Bernoulli output is {}", sdk::dtype_name(n.output(0).dtype()));
  return known_attrs(n, {"dtype", "seed"});
}

std::unique_ptr<Kernel> bernoulli_create(const Node& n, CpuSession&) {
  const nxrt_dtype dt = n.output(0).dtype();
  const SeedSpec seed = float_seed(n);
  return make_kernel([dt, seed](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const int64_t cnt = x.numel();
    std::vector<double> p(static_cast<size_t>(cnt));
    for (int64_t i = 0; i < cnt; ++i) p[size_t(i)] = x.dtype() == NXRT_DTYPE_FLOAT32 ? double(x.data<float>()[i]) : x.data<double>()[i];
    for (int64_t i = 0; i < cnt; ++i)
      if (!(p[size_t(i)] >= 0 && p[size_t(i)] <= 1))
        sdk::fail(NXRT_INVALID_ARGUMENT, "Bernoulli: probability {} at element {} is outside [0, 1]", p[size_t(i)], i);
    TensorView y = ctx.output(0, dt, x.dims());
    Rng g = seed.rng();
    dispatch_type(dt, "Bernoulli", [&](auto tag) {
      using T = decltype(tag);
      T* yp = y.data<T>();
      for (int64_t i = 0; i < cnt; ++i) yp[i] = g.bernoulli(p[size_t(i)]) ? T(1) : T(0);
    });
  });
}

// ------------------------------------------------------------- Multinomial

Check multinomial_check(const Node& n) {
  if (auto r = float_input(n)) return r;
  const auto t = n.output(0).dtype();
  if (t != NXRT_DTYPE_INT32 && t != NXRT_DTYPE_INT64) return sdk::refuse(NXRT_REFUSE_DTYPE, "Multinomial output is {}", sdk::dtype_name(t));
  return known_attrs(n, {"dtype", "sample_size", "seed"});
}

std::unique_ptr<Kernel> multinomial_create(const Node& n, CpuSession&) {
  const nxrt_dtype dt = n.output(0).dtype();
  const SeedSpec seed = float_seed(n);
  const int64_t samples = n.attr_int("sample_size", 1);
  if (samples < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Multinomial: sample_size {} is negative", samples);
  return make_kernel([dt, seed, samples](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    if (x.rank() != 2) sdk::fail(NXRT_INVALID_ARGUMENT, "Multinomial: input must be [batch, classes], got {}", dims_str(x.dims()));
    const int64_t batch = x.dim(0), classes = x.dim(1);
    TensorView y = ctx.output(0, dt, {batch, samples});
    Rng g = seed.rng();
    std::vector<double> row(static_cast<size_t>(classes));
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t c = 0; c < classes; ++c)
        row[size_t(c)] = x.dtype() == NXRT_DTYPE_FLOAT32 ? double(x.data<float>()[b * classes + c]) : x.data<double>()[b * classes + c];
      const bool ok = dt == NXRT_DTYPE_INT32 ? multinomial(g, row.data(), classes, samples, y.data<int32_t>() + b * samples)
                                             : multinomial(g, row.data(), classes, samples, y.data<int64_t>() + b * samples);
      if (!ok) sdk::fail(NXRT_INVALID_ARGUMENT, "Multinomial: batch row {} has no classes or a NaN log-probability", b);
    }
  });
}

// ------------------------------------------------------------ Dropout 12+

// Inputs: data, ratio (default 0.5), training_mode (default false), both
// possibly graph inputs, so the mode is decided per run. Training with a
// nonzero ratio keeps each element with probability 1 - ratio and scales it by
// 1 / (1 - ratio); otherwise Y = X and the mask is all true.
Check dropout_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kAllFixed, 0, 1)) return r;
  if (n.output(0).dtype() != n.input(0).dtype()) return sdk::refuse(NXRT_REFUSE_DTYPE, "Dropout: output dtype differs from input");
  if (auto r = known_attrs(n, {"seed"})) return r;
  if (n.has_output(1) && n.output(1).dtype() != NXRT_DTYPE_BOOL)
    return sdk::refuse(NXRT_REFUSE_DTYPE, "Dropout: mask output is {}, only bool is implemented", sdk::dtype_name(n.output(1).dtype()));
  if (n.has_input(1)) {
    const auto t = n.input(1).dtype();
    if (t != NXRT_DTYPE_FLOAT32 && t != NXRT_DTYPE_FLOAT64 && t != NXRT_DTYPE_FLOAT16)
      return sdk::refuse(NXRT_REFUSE_DTYPE, "Dropout: ratio is {}", sdk::dtype_name(t));
  }
  if (n.has_input(2)) {
    auto tm = n.input(2);
    if (tm.dtype() != NXRT_DTYPE_BOOL) return sdk::refuse(NXRT_REFUSE_DTYPE, "Dropout: training_mode is {}", sdk::dtype_name(tm.dtype()));
    const bool never_training = tm.is_constant() && tm.constant().numel() == 1 && !*tm.constant().data<bool>();
    const auto x = n.input(0).dtype();
    if (!never_training && x != NXRT_DTYPE_FLOAT32 && x != NXRT_DTYPE_FLOAT64)
      return sdk::refuse(NXRT_REFUSE_DTYPE, "Dropout: training mode on {} data is not implemented (float32/float64)", sdk::dtype_name(x));
  }
  return std::nullopt;
}

std::unique_ptr<Kernel> dropout_create(const Node& n, CpuSession&) {
  const bool want_mask = n.has_output(1);
  SeedSpec seed;
  if (auto a = n.attr("seed")) seed = {true, seed_from_int(a->i())};
  return make_kernel([want_mask, seed](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    double ratio = 0.5;
    if (auto r = ctx.optional_input(1)) {
      if (r->numel() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "Dropout: ratio must be a scalar, got {}", dims_str(r->dims()));
      ratio = r->dtype() == NXRT_DTYPE_FLOAT32   ? double(r->data<float>()[0])
              : r->dtype() == NXRT_DTYPE_FLOAT64 ? r->data<double>()[0]
                                                 : double(half_to_float(r->data<uint16_t>()[0]));
    }
    bool training = false;
    if (auto t = ctx.optional_input(2)) {
      if (t->numel() != 1) sdk::fail(NXRT_INVALID_ARGUMENT, "Dropout: training_mode must be a scalar, got {}", dims_str(t->dims()));
      training = t->data<bool>()[0];
    }
    TensorView y = ctx.output(0, x.dtype(), x.dims());
    bool* mask = want_mask ? ctx.output(1, NXRT_DTYPE_BOOL, x.dims()).data<bool>() : nullptr;
    const int64_t cnt = x.numel();
    if (!training || ratio == 0) {
      if (x.bytes()) std::memcpy(y.raw(), x.raw(), x.bytes());
      if (mask) std::fill(mask, mask + cnt, true);
      return;
    }
    if (!(ratio > 0 && ratio < 1)) sdk::fail(NXRT_INVALID_ARGUMENT, "Dropout: ratio {} must be in [0, 1)", ratio);
    if (x.dtype() != NXRT_DTYPE_FLOAT32 && x.dtype() != NXRT_DTYPE_FLOAT64)
      sdk::fail(NXRT_INVALID_ARGUMENT, "Dropout: training mode on {} data is not implemented", sdk::dtype_name(x.dtype()));
    std::vector<char> keep_buf(mask ? 0 : size_t(cnt));
    bool* keep = mask ? mask : reinterpret_cast<bool*>(keep_buf.data());
    Rng g = seed.rng();
    dropout_keep(g, ratio, cnt, keep);
    const double scale = 1.0 / (1.0 - ratio);
    if (x.dtype() == NXRT_DTYPE_FLOAT32) {
      const float s = float(scale);
      for (int64_t i = 0; i < cnt; ++i) y.data<float>()[i] = keep[i] ? x.data<float>()[i] * s : 0.f;
    } else {
      for (int64_t i = 0; i < cnt; ++i) y.data<double>()[i] = keep[i] ? x.data<double>()[i] * scale : 0.0;
    }
  });
}

}  // namespace

void register_random_ops(Registry& r) {
  r.add(Def{"RandomUniform", "", 1, INT_MAX, [](const Node& n) { return random_check(n, Dist::Uniform, false); },
            [](const Node& n, CpuSession&) { return random_create(n, Dist::Uniform, false); }});
  r.add(Def{"RandomNormal", "", 1, INT_MAX, [](const Node& n) { return random_check(n, Dist::Normal, false); },
            [](const Node& n, CpuSession&) { return random_create(n, Dist::Normal, false); }});
  r.add(Def{"RandomUniformLike", "", 1, INT_MAX, [](const Node& n) { return random_check(n, Dist::Uniform, true); },
            [](const Node& n, CpuSession&) { return random_create(n, Dist::Uniform, true); }});
  r.add(Def{"RandomNormalLike", "", 1, INT_MAX, [](const Node& n) { return random_check(n, Dist::Normal, true); },
            [](const Node& n, CpuSession&) { return random_create(n, Dist::Normal, true); }});
  r.add(Def{"Bernoulli", "", 15, INT_MAX, bernoulli_check, bernoulli_create});
  r.add(Def{"Multinomial", "", 7, INT_MAX, multinomial_check, multinomial_create});
  r.add(Def{"Dropout", "", 12, INT_MAX, dropout_check, dropout_create});
}

}  // namespace nxrt::cpu
