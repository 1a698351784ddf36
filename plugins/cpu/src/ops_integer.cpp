// Integer and quantized linear algebra: MatMulInteger, ConvInteger (int32
// out), QLinearMatMul, QLinearConv (8-bit out, requantized). 8-bit inputs
// (uint8/int8, mixed), zero points per tensor, per row / column (MatMul) or
// per output channel (Conv W); the math is in integer_linalg.cpp.
// When the weights and every scale / zero point are constants (X's / A's zero point per
// tensor), the kernel is a QConv / QMatMul (qlinear.hpp) prepared at creation: weights
// packed once, the fast 8-bit GEMM with the requantization in its store, bit-identical to
// the exact path below, which serves every other case.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "conv_int8_winograd.hpp"
#include "integer_linalg.hpp"
#include "ops.hpp"
#include "qlinear.hpp"
#include "qlinear_prepacked.hpp"

namespace nxrt::cpu {
namespace {

constexpr nxrt_dtype k8Bit[] = {NXRT_DTYPE_UINT8, NXRT_DTYPE_INT8};

// Refuses unless input i (when present) is uint8 or int8; with `like`, the
// dtype of input `like` too (a zero point has its tensor's type).
Check eight_bit(const Node& n, size_t i, const char* what, int like = -1) {
  auto v = n.input(i);
  if (!v.present()) return std::nullopt;
  if (v.dtype() != NXRT_DTYPE_UINT8 && v.dtype() != NXRT_DTYPE_INT8)
    return sdk::refuse(NXRT_REFUSE_DTYPE, "{} input {} ({}) is {}, only uint8/int8 are implemented", n.op_type(), i, what,
                       sdk::dtype_name(v.dtype()));
  if (like >= 0 && v.dtype() != n.input(size_t(like)).dtype())
    return sdk::refuse(NXRT_REFUSE_DTYPE, "{}: {} is {}, its tensor {}", n.op_type(), what, sdk::dtype_name(v.dtype()),
                       sdk::dtype_name(n.input(size_t(like)).dtype()));
  return std::nullopt;
}

// A zero point as int32 values, expanded to `count` (per tensor: one value
// repeated; else exactly `count` values). Absent: zeros.
std::vector<int32_t> zero_points(const std::optional<ConstTensorView>& t, int64_t count, const char* op, const char* what) {
  std::vector<int32_t> v(size_t(std::max<int64_t>(count, 0)), 0);
  if (!t) return v;
  if (t->numel() != 1 && t->numel() != count)
    sdk::fail(NXRT_INVALID_ARGUMENT, "{}: {} has {} values, expected 1 or {}", op, what, t->numel(), count);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t j = t->numel() == 1 ? 0 : i;
    v[size_t(i)] = t->dtype() == NXRT_DTYPE_UINT8 ? int32_t(t->data<uint8_t>()[j]) : int32_t(t->data<int8_t>()[j]);
  }
  return v;
}

// A scale as `count` doubles (one value repeated, or exactly count).
std::vector<double> scales(const ConstTensorView& t, int64_t count, const char* op, const char* what) {
  if (t.dtype() != NXRT_DTYPE_FLOAT32) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: {} must be float32", op, what);
  if (t.numel() != 1 && t.numel() != count)
    sdk::fail(NXRT_INVALID_ARGUMENT, "{}: {} has {} values, expected 1 or {}", op, what, t.numel(), count);
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[size_t(i)] = t.data<float>()[t.numel() == 1 ? 0 : i];
  return v;
}

// Calls f(TA{}, TB{}) with the C++ types of two 8-bit dtypes.
template <typename F>
void dispatch_8bit2(nxrt_dtype a, nxrt_dtype b, F&& f) {
  auto with_b = [&](auto ta) {
    if (b == NXRT_DTYPE_UINT8) f(ta, uint8_t{});
    else f(ta, int8_t{});
  };
  if (a == NXRT_DTYPE_UINT8) with_b(uint8_t{});
  else with_b(int8_t{});
}

// ------------------------------------------------------- prepared kernels

// Input i as a constant: absent (ok, std::nullopt inside), constant (its view), or not
// constant (returns false).
bool constant_or_absent(const Node& n, size_t i, std::optional<ConstTensorView>& out) {
  out.reset();
  if (i >= n.input_count()) return true;
  auto v = n.input(i);
  if (!v.present()) return true;
  if (!v.is_constant()) return false;
  out = v.constant();
  return true;
}

QType qtype_of(nxrt_dtype t) { return t == NXRT_DTYPE_UINT8 ? QType::U8 : QType::S8; }

// A constant zero point / scale with 1 or `count` values (absent zero point: zeros), else nullopt.
std::optional<std::vector<int32_t>> const_zero_points(const std::optional<ConstTensorView>& t, int64_t count) {
  if (t && t->numel() != 1 && t->numel() != count) return std::nullopt;
  return zero_points(t, count, "", "");
}
std::optional<std::vector<double>> const_scales(const std::optional<ConstTensorView>& t, int64_t count) {
  if (!t || t->dtype() != NXRT_DTYPE_FLOAT32 || (t->numel() != 1 && t->numel() != count)) return std::nullopt;
  return scales(*t, count, "", "");
}

// Both operands' dtypes and every quantization parameter of a MatMul form constant, B 2-D,
// a_zero_point per tensor: the prepared QMatMul, else null. bias_scales: QLinearMatMul's
// (a_scale, b_scale, y_scale, y_zero_point inputs), else an int32 output.
std::shared_ptr<const QMatMul> prepare_matmul(const Node& n, size_t a_in, size_t azp_in, size_t b_in, size_t bzp_in,
                                              bool qlinear, sdk::Prepacked& pp) {
  std::optional<ConstTensorView> b, azp, bzp;
  if (!constant_or_absent(n, b_in, b) || !b || b->dims().size() != 2) return nullptr;
  if (!constant_or_absent(n, azp_in, azp) || (azp && azp->numel() != 1)) return nullptr;
  if (!constant_or_absent(n, bzp_in, bzp)) return nullptr;
  const int64_t K = b->dims()[0], N = b->dims()[1];
  const auto a_zp = const_zero_points(azp, 1), b_zp = const_zero_points(bzp, N);
  if (!a_zp || !b_zp) return nullptr;
  QOutput out;
  out.type = QType::I32;
  if (qlinear) {
    std::optional<ConstTensorView> as, bs, ys, yz;
    if (!constant_or_absent(n, 1, as) || !constant_or_absent(n, 4, bs) || !constant_or_absent(n, 6, ys) ||
        !constant_or_absent(n, 7, yz) || !yz)
      return nullptr;
    const auto a_scale = const_scales(as, 1), b_scale = const_scales(bs, N), y_scale = const_scales(ys, 1);
    const auto y_zp = const_zero_points(yz, 1);
    if (!a_scale || !b_scale || !y_scale || !y_zp || as->numel() != 1) return nullptr;
    out.type = qtype_of(yz->dtype());
    out.zero_point = (*y_zp)[0];
    for (int64_t c = 0; c < N; ++c) out.scale.push_back((*a_scale)[0] * (*b_scale)[size_t(c)] / (*y_scale)[0]);
  }
  PrepackedQStore store(pp);
  auto q = std::make_shared<const QMatMul>(qtype_of(n.input(a_in).dtype()), (*a_zp)[0], qtype_of(b->dtype()), b->raw(), K, N,
                                           *b_zp, std::move(out), &store);
  if (n.input(b_in).raw() != n.input(a_in).raw()) pp.capture(n.input(b_in));  // only the packed copy is read from now on
  return q;
}

// Runs a prepared matmul: A [..., M, K] (or [K]) times the constant B [K, N].
void run_prepared_matmul(Context& ctx, const QMatMul& q, const ConstTensorView& a, nxrt_dtype y_type, const char* op,
                         ThreadPool* pool) {
  std::vector<int64_t> ad = a.dims();
  if (ad.empty() || ad.back() != q.K())
    sdk::fail(NXRT_INVALID_ARGUMENT, "{}: A {} and B [{},{}] disagree on K", op, dims_str(ad), q.K(), q.N());
  std::vector<int64_t> od = ad;
  od.back() = q.N();
  TensorView y = ctx.output(0, y_type, od);
  const int64_t rows = q.K() ? a.numel() / q.K() : sdk::element_count(std::span(ad).first(ad.size() - 1));
  if (y.numel() == 0) return;
  q.run(rows, a.raw(), y.raw(), pool);
}

// ------------------------------------------------------------ MatMul forms

// Batched matmul geometry with numpy broadcasting of the batch dims (1-D
// operands promoted and their unit dim dropped, as MatMul).
struct MatMulShape {
  int64_t M = 1, N = 1, K = 1;
  std::vector<int64_t> out;                  // Y's dims
  std::vector<int64_t> a_offsets, b_offsets;  // element offset of each batch's A and B
};

MatMulShape matmul_shape(const ConstTensorView& a, const ConstTensorView& b, const char* op) {
  std::vector<int64_t> ad = a.dims(), bd = b.dims();
  if (ad.empty() || bd.empty()) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: scalar operands", op);
  const bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  if (a1) ad.insert(ad.begin(), 1);
  if (b1) bd.push_back(1);
  MatMulShape s;
  s.M = ad[ad.size() - 2];
  s.K = ad.back();
  s.N = bd.back();
  if (bd[bd.size() - 2] != s.K)
    sdk::fail(NXRT_INVALID_ARGUMENT, "{}: A {} and B {} disagree on K", op, dims_str(a.dims()), dims_str(b.dims()));
  const std::vector<std::vector<int64_t>> batch = {std::vector<int64_t>(ad.begin(), ad.end() - 2),
                                                   std::vector<int64_t>(bd.begin(), bd.end() - 2)};
  std::vector<int64_t> bo;
  if (!broadcast_shapes(batch, bo))
    sdk::fail(NXRT_INVALID_ARGUMENT, "{}: batch dims of A {} and B {} do not broadcast", op, dims_str(a.dims()), dims_str(b.dims()));
  const auto as = broadcast_strides(batch[0], bo), bs = broadcast_strides(batch[1], bo);
  const int64_t count = sdk::element_count(bo);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rem = i, ao = 0, bof = 0;
    for (size_t d = bo.size(); d-- > 0;) {
      const int64_t k = rem % bo[d];
      rem /= bo[d];
      ao += k * as[d];
      bof += k * bs[d];
    }
    s.a_offsets.push_back(ao * s.M * s.K);
    s.b_offsets.push_back(bof * s.K * s.N);
  }
  s.out = bo;
  if (!a1) s.out.push_back(s.M);
  if (!b1) s.out.push_back(s.N);
  return s;
}

// Every batch's int32 product into acc (batches x M x N).
void matmul_integer_run(const ConstTensorView& a, const ConstTensorView& b, const MatMulShape& s,
                        const std::vector<int32_t>& azp, const std::vector<int32_t>& bzp, int32_t* acc, ThreadPool* pool) {
  dispatch_8bit2(a.dtype(), b.dtype(), [&](auto ta, auto tb) {
    using TA = decltype(ta);
    using TB = decltype(tb);
    for (size_t i = 0; i < s.a_offsets.size(); ++i)
      gemm_integer(s.M, s.N, s.K, a.data<TA>() + s.a_offsets[i], azp.data(), b.data<TB>() + s.b_offsets[i], bzp.data(),
                   acc + int64_t(i) * s.M * s.N, pool);
  });
}

Check matmul_integer_check(const Node& n) {
  return first_refusal([&] { return eight_bit(n, 0, "A"); }, [&] { return eight_bit(n, 1, "B"); },
                       [&] { return eight_bit(n, 2, "a_zero_point", 0); }, [&] { return eight_bit(n, 3, "b_zero_point", 1); },
                       [&] { return n.output(0).dtype() == NXRT_DTYPE_INT32 ? Check{} : sdk::refuse(NXRT_REFUSE_DTYPE, "MatMulInteger: Y is not int32"); },
                       [&] { return attrs_in(n, {}); });
}

std::unique_ptr<Kernel> matmul_integer_create(const Node& n, CpuSession& session, sdk::Prepacked& pp) {
  ThreadPool* pool = session.pool();
  if (auto q = prepare_matmul(n, 0, 2, 1, 3, false, pp))
    return make_kernel([pool, q](Context& ctx) { run_prepared_matmul(ctx, *q, ctx.input(0), NXRT_DTYPE_INT32, "MatMulInteger", pool); },
                       q->describe());
  return make_kernel([pool](Context& ctx) {
    ConstTensorView a = ctx.input(0), b = ctx.input(1);
    const MatMulShape s = matmul_shape(a, b, "MatMulInteger");
    const auto azp = zero_points(ctx.optional_input(2), s.M, "MatMulInteger", "a_zero_point");
    const auto bzp = zero_points(ctx.optional_input(3), s.N, "MatMulInteger", "b_zero_point");
    TensorView y = ctx.output(0, NXRT_DTYPE_INT32, s.out);
    if (y.numel() == 0) return;
    matmul_integer_run(a, b, s, azp, bzp, y.data<int32_t>(), pool);
  });
}

Check qlinear_matmul_check(const Node& n) {
  return first_refusal([&] { return eight_bit(n, 0, "a"); }, [&] { return input_dtype_is(n, 1, NXRT_DTYPE_FLOAT32, "a_scale"); },
                       [&] { return eight_bit(n, 2, "a_zero_point", 0); }, [&] { return eight_bit(n, 3, "b"); },
                       [&] { return input_dtype_is(n, 4, NXRT_DTYPE_FLOAT32, "b_scale"); },
                       [&] { return eight_bit(n, 5, "b_zero_point", 3); }, [&] { return input_dtype_is(n, 6, NXRT_DTYPE_FLOAT32, "y_scale"); },
                       [&] { return eight_bit(n, 7, "y_zero_point"); },
                       [&] { return n.output(0).dtype() == n.input(7).dtype() ? Check{} : sdk::refuse(NXRT_REFUSE_DTYPE, "QLinearMatMul: y differs from y_zero_point's dtype"); },
                       [&] { return attrs_in(n, {}); });
}

// y = saturate(round((a - a_zp)(b - b_zp) * a_scale * b_scale / y_scale) + y_zp);
// a_scale/a_zp per tensor or per row, b_scale/b_zp per tensor or per column.
std::unique_ptr<Kernel> qlinear_matmul_create(const Node& n, CpuSession& session, sdk::Prepacked& pp) {
  ThreadPool* pool = session.pool();
  if (auto q = prepare_matmul(n, 0, 2, 3, 5, true, pp)) {
    const nxrt_dtype yt = n.input(7).dtype();
    return make_kernel([pool, q, yt](Context& ctx) { run_prepared_matmul(ctx, *q, ctx.input(0), yt, "QLinearMatMul", pool); },
                       q->describe());
  }
  return make_kernel([pool](Context& ctx) {
    const char* op = "QLinearMatMul";
    ConstTensorView a = ctx.input(0), b = ctx.input(3), ys = ctx.input(6), yz = ctx.input(7);
    const MatMulShape s = matmul_shape(a, b, op);
    const auto as = scales(ctx.input(1), s.M, op, "a_scale"), bs = scales(ctx.input(4), s.N, op, "b_scale");
    const auto azp = zero_points(ctx.input(2), s.M, op, "a_zero_point");
    const auto bzp = zero_points(ctx.input(5), s.N, op, "b_zero_point");
    const double y_scale = scales(ys, 1, op, "y_scale")[0];
    const int32_t y_zp = zero_points(yz, 1, op, "y_zero_point")[0];
    TensorView y = ctx.output(0, yz.dtype(), s.out);
    if (y.numel() == 0) return;
    std::vector<int32_t> acc(size_t(y.numel()));
    matmul_integer_run(a, b, s, azp, bzp, acc.data(), pool);
    auto store = [&](auto* yp) {
      using Q = std::remove_pointer_t<decltype(yp)>;
      for (size_t i = 0; i < acc.size(); ++i) {
        const int64_t m = int64_t(i) / s.N % s.M, col = int64_t(i) % s.N;
        yp[i] = requantize<Q>(acc[i], as[size_t(m)] * bs[size_t(col)] / y_scale, y_zp);
      }
    };
    if (yz.dtype() == NXRT_DTYPE_UINT8) store(y.data<uint8_t>());
    else store(y.data<int8_t>());
  });
}

// -------------------------------------------------------------- Conv forms

// The int32 convolution of X and W (zero points: X per tensor, W per tensor
// or per output channel) for one call; returns the shape.
ConvShape conv_integer_run(const ConvAttrs& attrs, const ConstTensorView& x, const ConstTensorView& w,
                           const std::optional<ConstTensorView>& xz, const std::optional<ConstTensorView>& wz, const char* op,
                           std::vector<int32_t>& acc, std::vector<int64_t>& od, ThreadPool* pool) {
  const ConvShape s = conv_shape(attrs, x.dims(), w.dims(), op);
  const int32_t x_zp = zero_points(xz, 1, op, "x_zero_point")[0];
  const auto w_zp = zero_points(wz, s.out_c, op, "w_zero_point");
  od = {s.batch, s.out_c};
  if (attrs.sr == 2) od.push_back(s.out_h);
  od.push_back(s.out_w);
  acc.assign(size_t(sdk::element_count(od)), 0);
  if (acc.empty()) return s;
  dispatch_8bit2(x.dtype(), w.dtype(), [&](auto tx, auto tw) {
    using TX = decltype(tx);
    using TW = decltype(tw);
    conv_integer(s, x.data<TX>(), x_zp, w.data<TW>(), w_zp.data(), acc.data(), pool);
  });
  return s;
}

// Constant W, x_zero_point per tensor, constant w_zero_point (and for QLinearConv constant
// scales, y_zero_point and B): the prepared QConv, else null.
std::shared_ptr<const QConv> prepare_conv(const Node& n, const ConvAttrs& attrs, bool qlinear, std::vector<int64_t>& w_dims,
                                          sdk::Prepacked& pp) {
  const size_t w_in = qlinear ? 3 : 1, xzp_in = 2, wzp_in = qlinear ? 5 : 3;
  std::optional<ConstTensorView> w, xz, wz;
  if (!constant_or_absent(n, w_in, w) || !w || w->dims().size() < 3) return nullptr;
  if (!constant_or_absent(n, xzp_in, xz) || (xz && xz->numel() != 1) || !constant_or_absent(n, wzp_in, wz)) return nullptr;
  const int64_t oc = w->dims()[0];
  const auto x_zp = const_zero_points(xz, 1), w_zp = const_zero_points(wz, oc);
  if (!x_zp || !w_zp) return nullptr;
  QOutput out;
  out.type = QType::I32;
  if (qlinear) {
    std::optional<ConstTensorView> xs, ws, ys, yz, b;
    if (!constant_or_absent(n, 1, xs) || !constant_or_absent(n, 4, ws) || !constant_or_absent(n, 6, ys) ||
        !constant_or_absent(n, 7, yz) || !yz || !constant_or_absent(n, 8, b))
      return nullptr;
    const auto x_scale = const_scales(xs, 1), w_scale = const_scales(ws, oc), y_scale = const_scales(ys, 1);
    const auto y_zp = const_zero_points(yz, 1);
    if (!x_scale || !w_scale || !y_scale || !y_zp || xs->numel() != 1 || ys->numel() != 1) return nullptr;
    if (b && (b->dtype() != NXRT_DTYPE_INT32 || b->numel() != oc)) return nullptr;
    out.type = qtype_of(yz->dtype());
    out.zero_point = (*y_zp)[0];
    for (int64_t c = 0; c < oc; ++c) out.scale.push_back((*x_scale)[0] * (*w_scale)[size_t(c)] / (*y_scale)[0]);
    if (b) out.bias.assign(b->data<int32_t>(), b->data<int32_t>() + oc);
  }
  w_dims = w->dims();
  // x's shape known: the path run() takes for it.
  const auto shape = static_conv_shape(attrs, n.input(0), w_dims, qlinear ? "QLinearConv" : "ConvInteger");
  PrepackedQStore store(pp);
  auto q = std::make_shared<const QConv>(qtype_of(n.input(0).dtype()), (*x_zp)[0], qtype_of(w->dtype()), w->raw(),
                                         w->numel(), *w_zp, std::move(out), &store, conv_taps(w_dims),
                                         shape ? &*shape : nullptr);
  if (n.input(w_in).raw() != n.input(0).raw()) pp.capture(n.input(w_in));  // only the packed copy is read from now on
  return q;
}

void run_prepared_conv(Context& ctx, const QConv& q, const ConvAttrs& attrs, const std::vector<int64_t>& w_dims,
                       nxrt_dtype y_type, const char* op, ThreadPool* pool) {
  ConstTensorView x = ctx.input(0);
  const ConvShape s = conv_shape(attrs, x.dims(), w_dims, op);
  std::vector<int64_t> od = {s.batch, s.out_c};
  if (attrs.sr == 2) od.push_back(s.out_h);
  od.push_back(s.out_w);
  TensorView y = ctx.output(0, y_type, od);
  if (y.numel() == 0) return;
  q.run(s, x.raw(), y.raw(), pool);
}

Check conv_integer_check(const Node& n) {
  return first_refusal([&] { return eight_bit(n, 0, "x"); }, [&] { return eight_bit(n, 1, "w"); },
                       [&] { return eight_bit(n, 2, "x_zero_point", 0); }, [&] { return eight_bit(n, 3, "w_zero_point", 1); },
                       [&] { return n.output(0).dtype() == NXRT_DTYPE_INT32 ? Check{} : sdk::refuse(NXRT_REFUSE_DTYPE, "ConvInteger: y is not int32"); },
                       [&] { return conv_geometry_check(n, 1); });
}

std::unique_ptr<Kernel> conv_integer_create(const Node& n, CpuSession& session, sdk::Prepacked& pp) {
  const ConvAttrs attrs = read_conv_attrs(n, 1);
  ThreadPool* pool = session.pool();
  std::vector<int64_t> w_dims;
  if (auto q = prepare_conv(n, attrs, false, w_dims, pp))
    return make_kernel([attrs, pool, q, w_dims](Context& ctx) {
      run_prepared_conv(ctx, *q, attrs, w_dims, NXRT_DTYPE_INT32, "ConvInteger", pool);
    }, q->describe());
  return make_kernel([attrs, pool](Context& ctx) {
    std::vector<int32_t> acc;
    std::vector<int64_t> od;
    conv_integer_run(attrs, ctx.input(0), ctx.input(1), ctx.optional_input(2), ctx.optional_input(3), "ConvInteger", acc, od, pool);
    TensorView y = ctx.output(0, NXRT_DTYPE_INT32, od);
    if (!acc.empty()) std::copy(acc.begin(), acc.end(), y.data<int32_t>());
  });
}

Check qlinear_conv_check(const Node& n) {
  return first_refusal([&] { return eight_bit(n, 0, "x"); }, [&] { return input_dtype_is(n, 1, NXRT_DTYPE_FLOAT32, "x_scale"); },
                       [&] { return eight_bit(n, 2, "x_zero_point", 0); }, [&] { return eight_bit(n, 3, "w"); },
                       [&] { return input_dtype_is(n, 4, NXRT_DTYPE_FLOAT32, "w_scale"); },
                       [&] { return eight_bit(n, 5, "w_zero_point", 3); }, [&] { return input_dtype_is(n, 6, NXRT_DTYPE_FLOAT32, "y_scale"); },
                       [&] { return eight_bit(n, 7, "y_zero_point"); }, [&] { return input_dtype_is(n, 8, NXRT_DTYPE_INT32, "B"); },
                       [&] { return n.output(0).dtype() == n.input(7).dtype() ? Check{} : sdk::refuse(NXRT_REFUSE_DTYPE, "QLinearConv: y differs from y_zero_point's dtype"); },
                       [&] { return conv_geometry_check(n, 3); });
}

// y = saturate(round((conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale[oc] / y_scale) + y_zp).
std::unique_ptr<Kernel> qlinear_conv_create(const Node& n, CpuSession& session, sdk::Prepacked& pp) {
  const ConvAttrs attrs = read_conv_attrs(n, 3);
  ThreadPool* pool = session.pool();
  std::vector<int64_t> w_dims;
  if (auto q = prepare_conv(n, attrs, true, w_dims, pp)) {
    const nxrt_dtype yt = n.input(7).dtype();
    return make_kernel([attrs, pool, q, w_dims, yt](Context& ctx) {
      run_prepared_conv(ctx, *q, attrs, w_dims, yt, "QLinearConv", pool);
    }, q->describe());
  }
  return make_kernel([attrs, pool](Context& ctx) {
    const char* op = "QLinearConv";
    ConstTensorView x = ctx.input(0), w = ctx.input(3), yz = ctx.input(7);
    std::vector<int32_t> acc;
    std::vector<int64_t> od;
    const ConvShape s = conv_integer_run(attrs, x, w, ctx.input(2), ctx.input(5), op, acc, od, pool);
    const double x_scale = scales(ctx.input(1), 1, op, "x_scale")[0], y_scale = scales(ctx.input(6), 1, op, "y_scale")[0];
    const auto w_scale = scales(ctx.input(4), s.out_c, op, "w_scale");
    const int32_t y_zp = zero_points(yz, 1, op, "y_zero_point")[0];
    std::vector<int32_t> bias(size_t(s.out_c), 0);
    if (auto bt = ctx.optional_input(8)) {
      if (bt->numel() != s.out_c) sdk::fail(NXRT_INVALID_ARGUMENT, "QLinearConv: B has {} values, expected {}", bt->numel(), s.out_c);
      std::copy(bt->data<int32_t>(), bt->data<int32_t>() + s.out_c, bias.begin());
    }
    TensorView y = ctx.output(0, yz.dtype(), od);
    if (acc.empty()) return;
    const int64_t plane = s.out_h * s.out_w;
    auto store = [&](auto* yp) {
      using Q = std::remove_pointer_t<decltype(yp)>;
      for (size_t i = 0; i < acc.size(); ++i) {
        const size_t oc = size_t(int64_t(i) / plane % s.out_c);
        const int32_t v = int32_t(uint32_t(acc[i]) + uint32_t(bias[oc]));
        yp[i] = requantize<Q>(v, x_scale * w_scale[oc] / y_scale, y_zp);
      }
    };
    if (yz.dtype() == NXRT_DTYPE_UINT8) store(y.data<uint8_t>());
    else store(y.data<int8_t>());
  });
}

}  // namespace

void register_integer_ops(Registry& r) {
  r.add(Def{"MatMulInteger", "", 10, INT_MAX, matmul_integer_check, nullptr}, matmul_integer_create);
  r.add(Def{"QLinearMatMul", "", 10, INT_MAX, qlinear_matmul_check, nullptr}, qlinear_matmul_create);
  r.add(Def{"ConvInteger", "", 10, INT_MAX, conv_integer_check, nullptr}, conv_integer_create);
  r.add(Def{"QLinearConv", "", 10, INT_MAX, qlinear_conv_check, nullptr}, qlinear_conv_create);
}

}  // namespace nxrt::cpu
