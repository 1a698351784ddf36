// MaxPool, GlobalAveragePool, BatchNormalization, LayerNormalization, Softmax.
#include <algorithm>
#include <cmath>

#include "normalization.hpp"
#include "ops.hpp"
#include "pooling.hpp"
#include "softmax.hpp"

namespace nxrt::cpu {
namespace {

constexpr nxrt_dtype kF32[] = {NXRT_DTYPE_FLOAT32};
constexpr nxrt_dtype kPoolTypes[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_INT8, NXRT_DTYPE_UINT8};

// ---------------------------------------------------------------- MaxPool

Check maxpool_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kPoolTypes)) return r;
  if (auto r = no_outputs_from(n, 1, "Indices")) return r;
  return pool_geometry_check(n);
}

std::unique_ptr<Kernel> maxpool_create(const Node& n, CpuSession& session) {
  struct A {
    std::vector<int64_t> k, s, d, pads;
    std::string auto_pad;
    bool ceil = false;
  } a;
  a.k = n.attr_ints("kernel_shape");
  const size_t sr = a.k.size();
  a.s = n.attr_ints("strides", std::vector<int64_t>(sr, 1));
  a.d = n.attr_ints("dilations", std::vector<int64_t>(sr, 1));
  a.pads = n.attr_ints("pads", std::vector<int64_t>(2 * sr, 0));
  a.auto_pad = n.attr_string("auto_pad", "NOTSET");
  a.ceil = n.attr_int("ceil_mode", 0) != 0;
  ThreadPool* pool = session.pool();
  return make_kernel([a, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const size_t sr = a.k.size();
    if (x.rank() != sr + 2) sdk::fail(NXRT_INVALID_ARGUMENT, "MaxPool: X {} must have rank {}", dims_str(x.dims()), sr + 2);
    PoolShape s;
    s.batch = x.dim(0);
    s.channels = x.dim(1);
    s.spatial = int(sr);
    std::vector<int64_t> od = {x.dim(0), x.dim(1)};
    const size_t off = 3 - sr;  // right-align into the 3-D shape
    for (size_t i = 0; i < sr; ++i) {
      const int64_t in = x.dim(2 + i), k = a.k[i], st = a.s[i], dl = a.d[i], ek = (k - 1) * dl + 1;
      int64_t out = 0, pb = 0;
      if (a.auto_pad == "VALID") {
        out = in >= ek ? (in - ek) / st + 1 : 0;
      } else if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
        out = (in + st - 1) / st;
        const int64_t total = std::max<int64_t>(0, (out - 1) * st + ek - in);
        pb = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      } else {
        pb = a.pads[i];
        const int64_t span = in + a.pads[i] + a.pads[i + sr] - ek;
        if (span < 0) out = 0;
        else if (!a.ceil) out = span / st + 1;
        else {
          out = (span + st - 1) / st + 1;
          if ((out - 1) * st >= in + pb) --out;  // last window must start inside the input or left pad
        }
      }
      s.in[off + i] = in;
      s.out[off + i] = out;
      s.kernel[off + i] = k;
      s.stride[off + i] = st;
      s.dilation[off + i] = dl;
      s.pad_begin[off + i] = pb;
      od.push_back(out);
    }
    TensorView y = ctx.output(0, x.dtype(), od);
    if (y.numel() == 0) return;
    switch (x.dtype()) {
      case NXRT_DTYPE_FLOAT32: max_pool(s, x.data<float>(), y.data<float>(), pool); break;
      case NXRT_DTYPE_INT8: max_pool(s, x.data<int8_t>(), y.data<int8_t>(), pool); break;
      case NXRT_DTYPE_UINT8: max_pool(s, x.data<uint8_t>(), y.data<uint8_t>(), pool); break;
      default: sdk::fail(NXRT_INVALID_ARGUMENT, "MaxPool: dtype {}", sdk::dtype_name(x.dtype()));
    }
  });
}

// ------------------------------------------------------ GlobalAveragePool

std::unique_ptr<Kernel> gap_create(const Node&, CpuSession& session) {
  ThreadPool* pool = session.pool();
  return make_kernel([pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    if (x.rank() < 2) sdk::fail(NXRT_INVALID_ARGUMENT, "GlobalAveragePool: X {} must have rank >= 2", dims_str(x.dims()));
    std::vector<int64_t> od = {x.dim(0), x.dim(1)};
    int64_t spatial = 1;
    for (size_t i = 2; i < x.rank(); ++i) {
      od.push_back(1);
      spatial *= x.dim(i);
    }
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, od);
    global_average_pool(x.dim(0) * x.dim(1), spatial, x.data<float>(), y.data<float>(), pool);
  });
}

// ---------------------------------------------------- BatchNormalization

Check bn_check(const Node& n) {
  return first_refusal([&] { return sdk::require_dtypes(n, kF32); },
                       [&] { return no_outputs_from(n, 1, "running statistics (training mode)"); },
                       [&] { return attr_int_is(n, "training_mode", 0); },
                       [&] { return attr_int_is(n, "spatial", 1); });
}

std::unique_ptr<Kernel> bn_create(const Node& n, CpuSession& session) {
  struct State {
    float eps;
    bool folded = false;
    std::vector<float> mul, add;
  } st;
  st.eps = n.attr_float("epsilon", 1e-5f);
  ConstCopy c[4] = {copy_constant(n, 1), copy_constant(n, 2), copy_constant(n, 3), copy_constant(n, 4)};
  if (c[0].present && c[1].present && c[2].present && c[3].present) {
    const int64_t C = c[0].numel();
    if (c[1].numel() != C || c[2].numel() != C || c[3].numel() != C)
      sdk::fail(NXRT_INVALID_ARGUMENT, "BatchNormalization: parameter sizes differ");
    st.mul.resize(size_t(C));
    st.add.resize(size_t(C));
    batchnorm_fold(C, c[0].as<float>(), c[1].as<float>(), c[2].as<float>(), c[3].as<float>(), st.eps, st.mul.data(), st.add.data());
    st.folded = true;
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

// --------------------------------------------------------------- Softmax

std::unique_ptr<Kernel> softmax_create(const Node& n, CpuSession& session, bool opset13) {
  const int64_t axis = n.attr_int("axis", opset13 ? -1 : 1);
  ThreadPool* pool = session.pool();
  return make_kernel([axis, opset13, pool](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const int64_t r = int64_t(x.rank());
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    if (x.numel() == 0) return;
    if (r == 0) {
      y.data<float>()[0] = 1.f;
      return;
    }
    const int64_t ax = norm_axis(axis, r, "Softmax");
    int64_t outer = 1, mid = 1, inner = 1;
    for (int64_t i = 0; i < ax; ++i) outer *= x.dim(size_t(i));
    if (opset13) {
      mid = x.dim(size_t(ax));
      for (int64_t i = ax + 1; i < r; ++i) inner *= x.dim(size_t(i));
    } else {
      for (int64_t i = ax; i < r; ++i) mid *= x.dim(size_t(i));  // coerced to 2-D
    }
    softmax(outer, mid, inner, x.data<float>(), y.data<float>(), pool);
  });
}

}  // namespace

Check pool_geometry_check(const Node& n) {
  const std::string op(n.op_type());
  auto ks = n.attr_ints("kernel_shape");
  if (ks.empty()) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: kernel_shape is required", op);
  const size_t sr = ks.size();
  if (sr > 3) return sdk::refuse(NXRT_REFUSE_SHAPE, "{} with {} spatial dims is not implemented (1-3)", op, sr);
  auto x = n.input(0);
  if (x.rank() >= 0 && x.rank() != int64_t(sr) + 2)
    return sdk::refuse(NXRT_REFUSE_SHAPE, "{}: X rank {} does not match kernel_shape", op, x.rank());
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID" && ap != "SAME_UPPER" && ap != "SAME_LOWER")
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: auto_pad '{}' is not valid", op, ap);
  for (const char* name : {"strides", "dilations"}) {
    auto v = n.attr_ints(name);
    if (!v.empty() && v.size() != sr) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: {} has {} values, expected {}", op, name, v.size(), sr);
    for (auto e : v) if (e < 1) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: {} value {} < 1", op, name, e);
  }
  auto pads = n.attr_ints("pads");
  if (!pads.empty() && pads.size() != 2 * sr) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: pads has {} values, expected {}", op, pads.size(), 2 * sr);
  for (auto p : pads) if (p < 0) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: negative pad {}", op, p);
  for (auto k : ks) if (k < 1) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: kernel size {} < 1", op, k);
  return std::nullopt;
}

void register_nn_ops(Registry& r) {
  r.add(Def{"MaxPool", "", 1, INT_MAX, maxpool_check, maxpool_create});
  r.add(Def{"GlobalAveragePool", "", 1, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kF32); }, gap_create});
  r.add(Def{"BatchNormalization", "", 7, INT_MAX, bn_check, bn_create});
  r.add(Def{"LayerNormalization", "", 17, INT_MAX, ln_check, ln_create});
  r.add(Def{"Softmax", "", 1, 12, [](const Node& n) { return sdk::require_dtypes(n, kF32); },
            [](const Node& n, CpuSession& s) { return softmax_create(n, s, false); }});
  r.add(Def{"Softmax", "", 13, INT_MAX, [](const Node& n) { return sdk::require_dtypes(n, kF32); },
            [](const Node& n, CpuSession& s) { return softmax_create(n, s, true); }});
}

}  // namespace nxrt::cpu
