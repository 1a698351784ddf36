// Conv (1-D and 2-D, NCHW): weights packed at kernel creation when constant.
#include <algorithm>
#include <cstring>
#include <optional>
#include <span>

#include "conv.hpp"
#include "conv_winograd.hpp"
#include "conv_winograd_2x2.hpp"
#include "conv_winograd_2x2_lanes.hpp"
#include "conv_tap_rects.hpp"
#include "gemm.hpp"
#include "ops.hpp"
#include "ops_pool.hpp"

namespace nxrt::cpu {

// Spatial rank from what is known before run time; -1 if unknown.
int64_t conv_spatial_rank(const Node& n, size_t w_input) {
  auto w = n.input(w_input);
  if (w.present() && w.rank() >= 0) return w.rank() - 2;
  auto x = n.input(0);
  if (x.present() && x.rank() >= 0) return x.rank() - 2;
  if (auto k = n.attr("kernel_shape")) return int64_t(k->ints().size());
  return -1;
}

Check conv_geometry_check(const Node& n, size_t w_input) {
  const int64_t sr = conv_spatial_rank(n, w_input);
  if (sr < 0) return sdk::refuse(NXRT_REFUSE_SHAPE, "{}: rank of X and W unknown before run time", n.op_type());
  if (sr < 1 || sr > 2) return sdk::refuse(NXRT_REFUSE_SHAPE, "{} with {} spatial dims is not implemented (1-D and 2-D only)", n.op_type(), sr);
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID" && ap != "SAME_UPPER" && ap != "SAME_LOWER")
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: auto_pad '{}' is not valid", n.op_type(), ap);
  auto sized = [&](const char* name, size_t want) -> Check {
    auto a = n.attr(name);
    if (a && a->ints().size() != want)
      return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: {} has {} values, expected {}", n.op_type(), name, a->ints().size(), want);
    return std::nullopt;
  };
  if (auto r = sized("kernel_shape", size_t(sr))) return r;
  if (auto r = sized("strides", size_t(sr))) return r;
  if (auto r = sized("dilations", size_t(sr))) return r;
  if (auto r = sized("pads", size_t(2 * sr))) return r;
  for (auto v : n.attr_ints("strides"))
    if (v < 1) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: stride {} < 1", n.op_type(), v);
  for (auto v : n.attr_ints("dilations"))
    if (v < 1) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: dilation {} < 1", n.op_type(), v);
  for (auto v : n.attr_ints("pads"))
    if (v < 0) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: negative pad {}", n.op_type(), v);
  if (n.attr_int("group", 1) < 1) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: group < 1", n.op_type());
  return known_attrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
}

ConvAttrs read_conv_attrs(const Node& n, size_t w_input) {
  ConvAttrs a;
  a.sr = conv_spatial_rank(n, w_input);
  a.auto_pad = n.attr_string("auto_pad", "NOTSET");
  a.group = n.attr_int("group", 1);
  a.kernel_shape = n.attr_ints("kernel_shape");
  a.strides = n.attr_ints("strides");
  a.dilations = n.attr_ints("dilations");
  a.pads = n.attr_ints("pads");
  return a;
}

namespace {

Check conv_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kF32)) return r;
  return conv_geometry_check(n, 1);
}

// Output size and begin pad of one spatial dim.
void out_dim(const ConvAttrs& a, int64_t i, int64_t in, int64_t k, int64_t& out, int64_t& pad_begin) {
  const int64_t s = a.strides.empty() ? 1 : a.strides[size_t(i)];
  const int64_t d = a.dilations.empty() ? 1 : a.dilations[size_t(i)];
  const int64_t ek = (k - 1) * d + 1;
  if (a.auto_pad == "VALID") {
    pad_begin = 0;
    out = in >= ek ? (in - ek) / s + 1 : 0;
  } else if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
    out = (in + s - 1) / s;
    const int64_t total = std::max<int64_t>(0, (out - 1) * s + ek - in);
    pad_begin = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
  } else {
    const int64_t pb = a.pads.empty() ? 0 : a.pads[size_t(i)];
    const int64_t pe = a.pads.empty() ? 0 : a.pads[size_t(i + a.sr)];
    pad_begin = pb;
    const int64_t span = in + pb + pe - ek;
    out = span >= 0 ? span / s + 1 : 0;
  }
}

}  // namespace

std::optional<ConvShape> static_conv_shape(const ConvAttrs& a, const sdk::Value& x, std::span<const int64_t> wd,
                                           const char* op) {
  if (!x.present() || !x.static_shape()) return std::nullopt;
  try {
    return conv_shape(a, x.dims(), wd, op);
  } catch (const sdk::Error&) {
    return std::nullopt;  // a shape error: the run reports it
  }
}

ConvShape conv_shape(const ConvAttrs& a, std::span<const int64_t> xd, std::span<const int64_t> wd, const char* op) {
  ConvShape s;
  const size_t r = size_t(a.sr) + 2;
  if (xd.size() != r || wd.size() != r)
    sdk::fail(NXRT_INVALID_ARGUMENT, "{}: X {} and W {} must have rank {}", op, dims_str(xd), dims_str(wd), r);
  s.batch = xd[0];
  s.in_c = xd[1];
  s.out_c = wd[0];
  s.group = a.group;
  if (wd[1] * a.group != s.in_c || s.out_c % a.group != 0)
    sdk::fail(NXRT_INVALID_ARGUMENT, "{}: X {} / W {} do not fit group={}", op, dims_str(xd), dims_str(wd), a.group);
  for (int64_t i = 0; i < a.sr; ++i)
    if (!a.kernel_shape.empty() && a.kernel_shape[size_t(i)] != wd[size_t(2 + i)])
      sdk::fail(NXRT_INVALID_ARGUMENT, "{}: kernel_shape disagrees with W {}", op, dims_str(wd));
  const int64_t off = a.sr == 1 ? 1 : 0;  // 1-D runs as H = 1
  int64_t in[2] = {1, 1}, k[2] = {1, 1}, st[2] = {1, 1}, dl[2] = {1, 1}, outd[2] = {1, 1}, pb[2] = {0, 0};
  for (int64_t i = 0; i < a.sr; ++i) {
    in[i + off] = xd[size_t(2 + i)];
    k[i + off] = wd[size_t(2 + i)];
    st[i + off] = a.strides.empty() ? 1 : a.strides[size_t(i)];
    dl[i + off] = a.dilations.empty() ? 1 : a.dilations[size_t(i)];
    out_dim(a, i, in[i + off], k[i + off], outd[i + off], pb[i + off]);
  }
  s.in_h = in[0]; s.in_w = in[1];
  s.k_h = k[0]; s.k_w = k[1];
  s.stride_h = st[0]; s.stride_w = st[1];
  s.dil_h = dl[0]; s.dil_w = dl[1];
  s.out_h = outd[0]; s.out_w = outd[1];
  s.pad_top = pb[0]; s.pad_left = pb[1];
  return s;
}

namespace {

// conv2d of x * scale, the scale per channel ([N or 1, C, 1, 1] or [C, 1, 1]): one image at a
// time when it differs per image.
void conv2d_scaled_input(const ConvShape& s, const float* x, const PackedConvWeights& packed,
                         const ConstTensorView& scale, const float* bias, float* y, ThreadPool* pool,
                         const ConvPostOps& post) {
  if (scale.dtype() != NXRT_DTYPE_FLOAT32)
    sdk::fail(NXRT_INVALID_ARGUMENT, "Mul+Conv: the per-channel scale is {}, not float32", sdk::dtype_name(scale.dtype()));
  const int64_t n = scale.numel();
  if (n != s.in_c && n != s.batch * s.in_c)
    sdk::fail(NXRT_INVALID_ARGUMENT, "Mul+Conv: the per-channel scale {} has {} values for X's {} x {} channels",
              dims_str(scale.dims()), n, s.batch, s.in_c);
  if (n == s.in_c) {
    conv2d_channel_scaled(s, x, packed, scale.data<float>(), bias, y, pool, post);
    return;
  }
  ConvShape one = s;
  one.batch = 1;
  const int64_t x_image = s.in_c * s.in_h * s.in_w, y_image = s.out_c * s.out_h * s.out_w;
  for (int64_t b = 0; b < s.batch; ++b) {
    ConvPostOps pb = post;
    if (pb.residual) pb.residual += b * y_image;
    conv2d_channel_scaled(one, x + b * x_image, packed, scale.data<float>() + b * s.in_c, bias, y + b * y_image, pool,
                          pb);
  }
}

}  // namespace

// The Conv kernel, alone (io = ConvIo{}) or heading a fused group. Constant W (packed) and
// bias are prepacked buffers: made here on kernel_create, taken from the blob on kernel_import.
std::unique_ptr<Kernel> make_conv_kernel(const Node& n, CpuSession& session, const ConvIo& io, sdk::Prepacked& pp) {
  const ConvAttrs a = read_conv_attrs(n, 1);
  struct State {
    ConvAttrs a;
    ConvIo io;
    std::vector<int64_t> w_dims;
    std::shared_ptr<const PackedConvWeights> packed;  // when W is constant (a view of a prepacked buffer)
    std::optional<ConvShape> run_as;                  // the 1x1 shape a centre-tap-only conv runs as
    std::vector<int64_t> x_dims;                      // X's static shape, when the algorithm was chosen from it
    std::span<const float> bias;                      // when B is constant (a prepacked buffer)
    bool bias_const = false;
  } st;
  st.a = a;
  st.io = io;
  std::string description = "algorithm chosen per run (X's shape is not static)";
  auto w = n.input(1);
  if (!w.is_constant()) description = "W not constant: packed every run";
  if (w.is_constant()) {
    ConstTensorView t = w.constant();
    st.w_dims = t.dims();
    if (t.rank() != size_t(a.sr) + 2) sdk::fail(NXRT_INVALID_ARGUMENT, "Conv: W {} has the wrong rank", dims_str(t.dims()));
    ConvShape s;
    s.group = a.group;
    s.out_c = t.dim(0);
    s.in_c = t.dim(1) * a.group;
    s.k_h = a.sr == 2 ? t.dim(2) : 1;
    s.k_w = t.dim(t.rank() - 1);
    if (s.out_c % a.group != 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Conv: {} output channels not divisible by group {}", s.out_c, a.group);
    // With X's shape known, the kernel picks its algorithm here (Winograd, or the transposed
    // product for few output pixels) and derives what it reads then, not on the first run.
    std::optional<ConvShape> full;
    auto x = n.input(0);
    if (s.group == 1 && !conv_is_depthwise(s)) full = static_conv_shape(a, x, t.dims(), "Conv");
    // Dead taps: a dilated conv that reads only padding off its centre runs as that 1x1 conv.
    const std::optional<ConvShape> centre = full ? conv_centre_tap_only(*full) : std::nullopt;
    if (centre) {
      st.run_as = centre;
      full = centre;
    }
    const ConvShape ws = centre ? *centre : s;  // the weights as packed
    const bool no_winograd = full && conv_winograd_loses_threaded(*full, session.pool());
    const bool winograd = full && !no_winograd && conv_uses_winograd(*full);
    const bool winograd_2x2 = full && !no_winograd && conv_uses_winograd_2x2(*full);
    const bool tap_rects = full && !winograd && !winograd_2x2 && conv_uses_tap_rects(*full);
    const bool transposed_only = full && !winograd && !winograd_2x2 && !tap_rects && conv_uses_transposed(*full);
    if (centre || winograd || winograd_2x2 || tap_rects || transposed_only)
      st.x_dims.assign(x.dims().begin(), x.dims().end());
    // What the packed layout depends on: the weight shape, the grouping, the GEMM tile, the algorithm.
    pp.param("out_c", s.out_c);
    pp.param("in_c_per_group", s.icg());
    pp.param("k_h", s.k_h);
    pp.param("k_w", s.k_w);
    pp.param("centre_tap_only", centre ? 1 : 0);
    pp.param("group", s.group);
    pp.param("depthwise", conv_is_depthwise(s) ? 1 : 0);
    pp.param("gemm_mr", kGemmMR);
    pp.param("winograd", winograd ? 1 : 0);
    pp.param("winograd_2x2", winograd_2x2 ? 1 : 0);
    pp.param("winograd_2x2_lanes", winograd_2x2 && winograd_2x2_lanes_fit(*full) ? 1 : 0);
    pp.param("tap_rects", tap_rects ? 1 : 0);
    pp.param("transposed_only", transposed_only ? 1 : 0);
    pp.param("transposed_panel", full && conv_direct_panels64(*full) ? 64 : kGemmNR);
    PackedConvWeights view;
    if (winograd) {
      auto u = pp.buffer<float>("w_winograd", winograd_packed_floats(*full), [&](std::span<float> dst) {
        winograd_pack_weights(*full, static_cast<const float*>(t.raw()), dst.data());
      });
      view.winograd = u.data();
    } else if (winograd_2x2) {
      auto u = pp.buffer<float>("w_winograd_2x2", winograd_2x2_packed_floats(*full), [&](std::span<float> dst) {
        winograd_2x2_pack_weights(*full, static_cast<const float*>(t.raw()), dst.data());
      });
      view.winograd_2x2 = u.data();
    } else if (tap_rects) {
      auto u = pp.buffer<float>("w_tap_rects", tap_rects_packed_floats(*full), [&](std::span<float> dst) {
        tap_rects_pack_weights(*full, static_cast<const float*>(t.raw()), dst.data());
      });
      view.tap_rects = u.data();
    } else {
      auto pack = [&](float* dst) {
        const float* w = static_cast<const float*>(t.raw());  // W's data is read here only
        if (centre) pack_conv_weights_into(ws, conv_centre_tap_weights(s, w).data(), dst);
        else pack_conv_weights_into(ws, w, dst);
      };
      if (transposed_only) {
        // The transposed or direct product reads W^T alone: only it is kept (ResNet-18's
        // 512-channel 7x7 convs: 9.4 MB each instead of twice that).
        auto wt = pp.buffer<float>("w_t", conv_transposed_floats(*full), [&](std::span<float> dst) {
          AlignedFloats a(packed_conv_floats(ws));
          pack(a.data());
          pack_conv_weights_transposed(*full, a.data(), dst.data());
        });
        view = conv_weights_view(ws, nullptr);
        conv_set_prepacked_transposed(*full, view, wt.data());
      } else {
        auto packed = pp.buffer<float>("w", packed_conv_floats(ws), [&](std::span<float> dst) { pack(dst.data()); });
        view = conv_weights_view(ws, packed.data());
      }
    }
    st.packed = std::make_shared<const PackedConvWeights>(std::move(view));
    std::optional<ConvShape> shape = full ? full : static_conv_shape(a, x, t.dims(), "Conv");
    if (shape) description = (centre ? "dilated, centre tap only: " : "") + conv_describe(*shape, *st.packed, session.pool());
    if (shape && io.max_pool) {
      std::vector<int64_t> cd = {shape->batch, shape->out_c, shape->out_h, shape->out_w}, pd;
      try {
        const PoolShape ps = pool_shape(*io.max_pool, cd, "MaxPool", pd);
        description = conv_max_pool_fuses(*shape, *st.packed, ps, session.pool())
                          ? conv_max_pool_describe(*shape, *st.packed, session.pool())
                          : description + ", then max pool";
      } catch (const sdk::Error&) {
      }
    }
  }
  if (io.channel_scale >= 0) {
    // The scale goes into the weights' packed copy or x^T's packing each run
    // (conv2d_channel_scaled; ops_fusion_channel_scale.cpp claims no other shape).
    const sdk::Value xv = n.input(0);
    std::optional<ConvShape> fs;
    if (st.packed && !io.max_pool && !st.run_as) fs = static_conv_shape(a, xv, st.w_dims, "Conv");
    if (!fs || !conv_channel_scale_folds(*fs))
      sdk::fail(NXRT_UNSUPPORTED, "Conv: a per-channel scale of X folds only into a plain 1x1 conv of static shape");
    description = std::string(conv_pointwise_transposed(fs->out_c, fs->out_h * fs->out_w)
                                  ? "X scaled per input channel (the Mul) as x^T is packed; "
                                  : "X scaled per input channel (the Mul) in a copy of the packed weights each run; ") +
                  description;
  }
  auto bv = n.input(2);
  const bool bias_const = bv.present() && bv.is_constant();
  if (bias_const) {
    ConstTensorView t = bv.constant();
    if (t.dtype() != NXRT_DTYPE_FLOAT32) sdk::fail(NXRT_INVALID_ARGUMENT, "Conv: bias is {}", sdk::dtype_name(t.dtype()));
    st.bias = pp.buffer<float>("bias", size_t(t.numel()), [&](std::span<float> dst) {
      if (!dst.empty()) std::memcpy(dst.data(), t.raw(), dst.size() * sizeof(float));
    });
    st.bias_const = true;
  }
  // Only the prepacked copies are read from now on (unless the same value is also X or the
  // residual of a fused group): the host may free W and B.
  if (st.packed && io.w != io.x && io.w != io.residual) pp.capture(w);
  if (bias_const && io.b != io.x && io.b != io.residual) pp.capture(bv);
  ThreadPool* pool = session.pool();
  return make_kernel([st = std::move(st), pool](Context& ctx) {
    ConstTensorView x = ctx.input(size_t(st.io.x)), w = ctx.input(size_t(st.io.w));
    auto b = st.io.b >= 0 ? ctx.optional_input(size_t(st.io.b)) : std::nullopt;
    ConvShape s = conv_shape(st.a, x.dims(), w.dims(), "Conv");
    // Guard (never expected: X's shape is static): the 1x1 form or the Winograd weights were
    // derived for X's shape at kernel creation.
    if (!st.x_dims.empty() && !std::equal(x.dims().begin(), x.dims().end(), st.x_dims.begin(), st.x_dims.end()))
      sdk::fail(NXRT_INVALID_ARGUMENT, "Conv: input {} is not the shape the kernel was created for", dims_str(x.dims()));
    if (st.run_as) s = *st.run_as;
    if (st.packed && w.dims() != st.w_dims) sdk::fail(NXRT_INVALID_ARGUMENT, "Conv: W shape changed");
    const float* bias = nullptr;
    if (b) {
      if (b->numel() != s.out_c) sdk::fail(NXRT_INVALID_ARGUMENT, "Conv: bias {} must have {} values", dims_str(b->dims()), s.out_c);
      bias = st.bias_const ? st.bias.data() : b->data<float>();
    }
    int64_t od_buf[4] = {s.batch, s.out_c, s.out_h, s.out_w};
    std::span<const int64_t> od = st.a.sr == 2 ? std::span<const int64_t>(od_buf, 4)
                                               : std::span<const int64_t>(od_buf, 3);
    if (st.a.sr == 1) od_buf[2] = s.out_w;
    ConvPostOps post = st.io.post;
    std::optional<ConstTensorView> res;
    if (st.io.residual >= 0) {
      res = ctx.input(size_t(st.io.residual));
      if (res->dims().size() != od.size() || !std::equal(od.begin(), od.end(), res->dims().begin()))
        sdk::fail(NXRT_INVALID_ARGUMENT, "Conv+Add: the added input {} does not have the Conv's output shape {}",
                  dims_str(res->dims()), dims_str(od));
      post.residual = res->data<float>();
    }
    if (st.io.max_pool) {  // Conv [-> Relu | Clip | HardSwish] -> MaxPool
      if (st.a.sr != 2) sdk::fail(NXRT_INVALID_ARGUMENT, "Conv+MaxPool: a {}-D conv (2-D only)", st.a.sr);
      std::vector<int64_t> pd;
      const PoolShape ps = pool_shape(*st.io.max_pool, std::vector<int64_t>(od.begin(), od.end()), "MaxPool", pd);
      TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, pd);
      if (y.numel() == 0) return;
      if (st.packed) {
        conv2d_max_pool(s, x.data<float>(), *st.packed, bias, ps, y.data<float>(), pool, post);
      } else {
        PackedConvWeights pw = pack_conv_weights(s, w.data<float>());
        conv2d_max_pool(s, x.data<float>(), pw, bias, ps, y.data<float>(), pool, post);
      }
      return;
    }
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, od);
    if (y.numel() == 0) return;
    if (st.io.channel_scale >= 0) {
      conv2d_scaled_input(s, x.data<float>(), *st.packed, ctx.input(size_t(st.io.channel_scale)), bias,
                          y.data<float>(), pool, post);
      return;
    }
    if (st.packed) {
      conv2d(s, x.data<float>(), *st.packed, bias, y.data<float>(), pool, post);
    } else {
      PackedConvWeights pw = pack_conv_weights(s, w.data<float>());
      conv2d(s, x.data<float>(), pw, bias, y.data<float>(), pool, post);
    }
  }, std::move(description));
}

namespace {

std::unique_ptr<Kernel> conv_create(const Node& n, CpuSession& session, sdk::Prepacked& pp) {
  return make_conv_kernel(n, session, ConvIo{}, pp);
}

}  // namespace

void register_conv_ops(Registry& r) { r.add(Def{"Conv", "", 1, INT_MAX, conv_check, nullptr}, conv_create); }

}  // namespace nxrt::cpu
