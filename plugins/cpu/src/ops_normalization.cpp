// Normalization: BatchNormalization (inference, folded into a per-channel
// affine; training_mode=1 from opset 14 with batch statistics), LayerNormalization, InstanceNormalization, LRN,
// MeanVarianceNormalization. float32.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <span>

#include "normalization.hpp"
#include "ops.hpp"

namespace nxrt::cpu {
namespace {

// ---------------------------------------------------- BatchNormalization

Check bn_check(const Node& n) {
  return first_refusal([&] { return sdk::require_dtypes(n, kF32); },
                       [&] { return no_outputs_from(n, 1, "running statistics (training mode)"); },
                       [&] { return attr_int_is(n, "training_mode", 0); },
                       [&] { return attr_int_is(n, "spatial", 1); });
}

// Opset 14+ with training_mode=1: batch statistics, optional running_mean and
// running_var outputs (1, 2).
Check bn_training_check(const Node& n) {
  return first_refusal([&] { return sdk::require_dtypes(n, kF32); },
                       [&] { return no_outputs_from(n, 3, "unknown"); },
                       [&] { return known_attrs(n, {"epsilon", "momentum", "training_mode"}); },
                       [&] { return attr_int_is(n, "training_mode", 1); });
}

std::unique_ptr<Kernel> bn_training_create(const Node& n, CpuSession& session) {
  const double eps = n.attr_float("epsilon", 1e-5f), momentum = n.attr_float("momentum", 0.9f);
  const bool want_mean = n.has_output(1), want_var = n.has_output(2);
  ThreadPool* pool = session.pool();
  return make_kernel([eps, momentum, want_mean, want_var, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    if (x.rank() < 2) sdk::fail(NXRT_INVALID_ARGUMENT, "BatchNormalization: X {} must have rank >= 2", dims_str(x.dims()));
    const int64_t N = x.dim(0), C = x.dim(1);
    const int64_t spatial = C ? x.numel() / std::max<int64_t>(1, N * C) : 0;
    ConstTensorView sc = ctx.input(1), b = ctx.input(2), m = ctx.input(3), v = ctx.input(4);
    if (sc.numel() != C || b.numel() != C || m.numel() != C || v.numel() != C)
      sdk::fail(NXRT_INVALID_ARGUMENT, "BatchNormalization: parameters must have {} values", C);
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    float* rm = want_mean ? ctx.output(1, NXRT_DTYPE_FLOAT32, {C}).data<float>() : nullptr;
    float* rv = want_var ? ctx.output(2, NXRT_DTYPE_FLOAT32, {C}).data<float>() : nullptr;
    batchnorm_training(N, C, spatial, x.data<float>(), sc.data<float>(), b.data<float>(), m.data<float>(), v.data<float>(), eps,
                       momentum, y.data<float>(), rm, rv, pool);
  });
}

// Constant scale/B/mean/var are folded once into per-channel mul and add, a prepacked buffer
// (made here on kernel_create, the blob's on kernel_import).
std::unique_ptr<Kernel> bn_create(const Node& n, CpuSession& session, sdk::Prepacked& pp) {
  struct State {
    float eps;
    bool folded = false;
    std::span<const float> mul, add;
  } st;
  st.eps = n.attr_float("epsilon", 1e-5f);
  bool all_constant = true;
  for (size_t i = 1; i <= 4; ++i) all_constant = all_constant && n.input(i).present() && n.input(i).is_constant();
  if (all_constant) {
    const ConstTensorView c[4] = {n.input(1).constant(), n.input(2).constant(), n.input(3).constant(), n.input(4).constant()};
    const int64_t C = c[0].numel();
    if (c[1].numel() != C || c[2].numel() != C || c[3].numel() != C)
      sdk::fail(NXRT_INVALID_ARGUMENT, "BatchNormalization: parameter sizes differ");
    uint32_t eps_bits;
    std::memcpy(&eps_bits, &st.eps, sizeof eps_bits);
    pp.param("C", C);
    pp.param("epsilon_bits", eps_bits);
    auto folded = pp.buffer<float>("mul_add", size_t(2 * C), [&](std::span<float> dst) {
      batchnorm_fold(C, c[0].data<float>(), c[1].data<float>(), c[2].data<float>(), c[3].data<float>(), st.eps, dst.data(),
                     dst.data() + C);
    });
    st.mul = folded.first(size_t(C));
    st.add = folded.subspan(size_t(C));
    st.folded = true;
    // Only the folded copy is read from now on: the host may free the parameters (unless one
    // of them is also X).
    for (size_t i = 1; i <= 4; ++i)
      if (n.input(i).raw() != n.input(0).raw()) pp.capture(n.input(i));
  }
  ThreadPool* pool = session.pool();
  return make_kernel([st = std::move(st), pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    if (x.rank() < 2) sdk::fail(NXRT_INVALID_ARGUMENT, "BatchNormalization: X {} must have rank >= 2", dims_str(x.dims()));
    const int64_t N = x.dim(0), C = x.dim(1);
    const int64_t spatial = C ? x.numel() / std::max<int64_t>(1, N * C) : 0;
    std::vector<float> mul, add;
    const float *pm = st.mul.data(), *pa = st.add.data();
    if (!st.folded) {
      ConstTensorView sc = ctx.input(1), b = ctx.input(2), m = ctx.input(3), v = ctx.input(4);
      if (sc.numel() != C || b.numel() != C || m.numel() != C || v.numel() != C)
        sdk::fail(NXRT_INVALID_ARGUMENT, "BatchNormalization: parameters must have {} values", C);
      mul.resize(size_t(C));
      add.resize(size_t(C));
      batchnorm_fold(C, sc.data<float>(), b.data<float>(), m.data<float>(), v.data<float>(), st.eps, mul.data(), add.data());
      pm = mul.data();
      pa = add.data();
    } else if (int64_t(st.mul.size()) != C) {
      sdk::fail(NXRT_INVALID_ARGUMENT, "BatchNormalization: X has {} channels, parameters {}", C, st.mul.size());
    }
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    if (y.numel() == 0) return;
    channel_affine(N, C, spatial, x.data<float>(), pm, pa, y.data<float>(), pool);
  });
}

// ---------------------------------------------------- LayerNormalization

Check ln_check(const Node& n) {
  return first_refusal([&] { return sdk::require_dtypes(n, kF32); },
                       [&] { return attr_int_is(n, "stash_type", 1); });
}

// Expands `src` (dims sd) to the trailing shape td (unidirectional broadcast).
std::vector<float> expand_to(const float* src, std::span<const int64_t> sd, std::span<const int64_t> td) {
  const int64_t total = sdk::element_count(td);
  std::vector<float> out(static_cast<size_t>(total));
  if (sd.size() > td.size()) sdk::fail(NXRT_INVALID_ARGUMENT, "LayerNormalization: scale/bias {} does not broadcast to {}", dims_str(sd), dims_str(td));
  std::vector<int64_t> stride(td.size(), 0);
  int64_t m = 1;
  for (size_t i = sd.size(); i-- > 0;) {
    const size_t ti = i + (td.size() - sd.size());
    if (sd[i] != 1 && sd[i] != td[ti])
      sdk::fail(NXRT_INVALID_ARGUMENT, "LayerNormalization: scale/bias {} does not broadcast to {}", dims_str(sd), dims_str(td));
    stride[ti] = sd[i] == 1 ? 0 : m;
    m *= sd[i];
  }
  std::vector<int64_t> idx(td.size(), 0);
  for (int64_t o = 0; o < total; ++o) {
    int64_t off = 0;
    for (size_t i = 0; i < td.size(); ++i) off += idx[i] * stride[i];
    out[size_t(o)] = src[off];
    for (size_t i = td.size(); i-- > 0;) {
      if (++idx[i] < td[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

std::unique_ptr<Kernel> ln_create(const Node& n, CpuSession& session) {
  const int64_t axis = n.attr_int("axis", -1);
  const float eps = n.attr_float("epsilon", 1e-5f);
  const bool has_mean = n.has_output(1), has_inv = n.has_output(2);
  ThreadPool* pool = session.pool();
  return make_kernel([axis, eps, has_mean, has_inv, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0), scale = ctx.input(1);
    auto bias = ctx.optional_input(2);
    const int64_t r = int64_t(x.rank());
    const int64_t ax = norm_axis(axis, r, "LayerNormalization");
    int64_t rows = 1, cols = 1;
    for (int64_t i = 0; i < ax; ++i) rows *= x.dim(size_t(i));
    for (int64_t i = ax; i < r; ++i) cols *= x.dim(size_t(i));
    std::span<const int64_t> nd(x.dims().data() + ax, size_t(r - ax));
    std::vector<float> sbuf, bbuf;
    const float* sp = scale.data<float>();
    if (scale.numel() != cols || scale.rank() > size_t(r - ax)) {
      sbuf = expand_to(sp, scale.dims(), nd);
      sp = sbuf.data();
    }
    const float* bp = nullptr;
    if (bias) {
      bp = bias->data<float>();
      if (bias->numel() != cols || bias->rank() > size_t(r - ax)) {
        bbuf = expand_to(bp, bias->dims(), nd);
        bp = bbuf.data();
      }
    }
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    std::vector<int64_t> sd(x.dims());
    for (int64_t i = ax; i < r; ++i) sd[size_t(i)] = 1;
    float* mean = has_mean ? ctx.output(1, NXRT_DTYPE_FLOAT32, sd).data<float>() : nullptr;
    float* inv = has_inv ? ctx.output(2, NXRT_DTYPE_FLOAT32, sd).data<float>() : nullptr;
    if (x.numel() == 0) return;
    layer_norm(rows, cols, x.data<float>(), sp, bp, eps, y.data<float>(), mean, inv, pool);
  });
}

// --------------------------------------------------- InstanceNormalization

std::unique_ptr<Kernel> instnorm_create(const Node& n, CpuSession& s) {
  const double eps = n.attr_float("epsilon", 1e-5f);
  ThreadPool* pool = s.pool();
  return make_kernel([eps, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0), sc = ctx.input(1), bi = ctx.input(2);
    if (x.rank() < 2) sdk::fail(NXRT_INVALID_ARGUMENT, "InstanceNormalization: X {} must have rank >= 2", dims_str(x.dims()));
    const int64_t nb = x.dim(0), ch = x.dim(1);
    if (sc.numel() != ch || bi.numel() != ch)
      sdk::fail(NXRT_INVALID_ARGUMENT, "InstanceNormalization: scale/B must have {} elements", ch);
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    const int64_t planes = nb * ch;
    if (planes == 0) return;
    instance_norm(nb, ch, x.numel() / planes, x.data<float>(), sc.data<float>(), bi.data<float>(), eps, y.data<float>(), pool);
  });
}

// --------------------------------------------------------------------- LRN

std::unique_ptr<Kernel> lrn_create(const Node& n, CpuSession&) {
  const double alpha = n.attr_float("alpha", 1e-4f), beta = n.attr_float("beta", 0.75f), bias = n.attr_float("bias", 1.f);
  const int64_t size = n.attr_int("size", 1);
  return make_kernel([alpha, beta, bias, size](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    if (x.rank() < 3) sdk::fail(NXRT_INVALID_ARGUMENT, "LRN: input must have rank >= 3");
    const int64_t N = x.dim(0), C = x.dim(1), sp = x.numel() / std::max<int64_t>(1, N * C);
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    lrn(N, C, sp, size, alpha, beta, bias, x.data<float>(), y.data<float>());
  });
}

// ----------------------------------------------- MeanVarianceNormalization

std::unique_ptr<Kernel> mvn_create(const Node& n, CpuSession& s) {
  const std::vector<int64_t> axes = n.attr_ints("axes", {0, 2, 3});
  ThreadPool* pool = s.pool();
  return make_kernel([axes, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const int64_t r = int64_t(x.rank());
    std::vector<bool> flags(size_t(r), false);
    for (auto a : axes) flags[size_t(norm_axis(a, r, "MeanVarianceNormalization"))] = true;
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    mean_variance_normalization(x.data<float>(), x.dims(), flags, y.data<float>(), pool);
  });
}

}  // namespace

void register_normalization_ops(Registry& r) {
  r.add(Def{"BatchNormalization", "", 7, 13, bn_check, nullptr}, bn_create);
  r.add(Def{"BatchNormalization", "", 14, INT_MAX,
            [](const Node& n) { return n.attr_int("training_mode", 0) != 0 ? bn_training_check(n) : bn_check(n); },
            nullptr},
        [](const Node& n, CpuSession& s, sdk::Prepacked& pp) {
          return n.attr_int("training_mode", 0) != 0 ? bn_training_create(n, s) : bn_create(n, s, pp);
        });
  r.add(Def{"LayerNormalization", "", 17, INT_MAX, ln_check, ln_create});
  r.add(Def{"InstanceNormalization", "", 6, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kF32)) return c;
              return known_attrs(n, {"epsilon"});
            },
            instnorm_create});
  r.add(Def{"LRN", "", 1, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kF32)) return c;
              return known_attrs(n, {"alpha", "beta", "bias", "size"});
            },
            lrn_create});
  r.add(Def{"MeanVarianceNormalization", "", 9, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kF32)) return c;
              return known_attrs(n, {"axes"});
            },
            mvn_create});
}

}  // namespace nxrt::cpu
