// QDQ groups: the patterns static quantization tools (ONNX Runtime's quantize_static, the
// exporters of QAT frameworks) write, claimed as one 8-bit kernel each:
//
//   DequantizeLinear(x) + DequantizeLinear(W) [+ DequantizeLinear(B) | B] -> Conv
//       [-> Relu | Clip] [-> QuantizeLinear]                      QConv (qlinear.hpp)
//       [-> Relu | Clip] -> MaxPool -> QuantizeLinear             QConv + 8-bit max_pool
//   DequantizeLinear(a) + DequantizeLinear(W) -> MatMul [-> Add(bias)]
//       [-> Relu | Clip] [-> QuantizeLinear]                      QMatMul
//   DequantizeLinear(a) + DequantizeLinear(b) -> Add [-> Relu | Clip] [-> QuantizeLinear]
//                                                                 one elementwise pass
//   DequantizeLinear(x) -> MaxPool -> QuantizeLinear              8-bit max_pool [+ a table]
//
// x / a / b are 8-bit with one scale and zero point (constants), W constant 8-bit per tensor
// or per output channel (Conv axis 0, MatMul axis 1). Conv and MatMul accumulate the exact
// integer products and requantize once (with QuantizeLinear) or dequantize (without), so
// they differ from the nodes run one by one (float sums of dequantized values) by at most
// one quantization step where a value lies on a rounding boundary. With a MaxPool between
// the float output and QuantizeLinear (ResNet's stem), the store quantizes each float value
// as the QuantizeLinear node does (QOutput::q_scale) and the pool runs on the 8-bit values:
// quantization is monotonic, so max then quantize = quantize then max, and the result is
// bit-identical to the group's float output, MaxPool and QuantizeLinear run one by one. The Add pass does the
// nodes' own float operations in their order and is bit-identical to them. A MaxPool between
// DequantizeLinear and QuantizeLinear (how ONNX Runtime's quantizer writes one) pools the 8-bit
// values (dequantization is non-decreasing: max then dequantize = dequantize then max), then
// maps each through a 256-entry table that the nodes' own DequantizeLinear and QuantizeLinear
// made (none when it is the identity, as with equal scales and zero points): bit-identical.
//
// Claimed only under the rules of ops_fusion.cpp (closed view, each intermediate read by the
// next node only, every node one the registry claims on its own).
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "conv_int8_winograd.hpp"
#include "fusion_view.hpp"
#include "ops.hpp"
#include "ops_pool.hpp"
#include "qlinear.hpp"
#include "qlinear_prepacked.hpp"
#include "quantize.hpp"

namespace nxrt::cpu {
using namespace fusion;

namespace {

// One scale and zero point of an 8-bit tensor.
struct QParams {
  float scale = 1.f;
  int32_t zp = 0;
  nxrt_dtype type = NXRT_DTYPE_UINT8;
};

bool is_8bit(nxrt_dtype t) { return t == NXRT_DTYPE_UINT8 || t == NXRT_DTYPE_INT8; }

int32_t int_at(const ConstTensorView& t, int64_t i) {
  switch (t.dtype()) {
    case NXRT_DTYPE_UINT8: return t.data<uint8_t>()[i];
    case NXRT_DTYPE_INT8: return t.data<int8_t>()[i];
    case NXRT_DTYPE_INT32: return t.data<int32_t>()[i];
    default: return 0;
  }
}

// A constant input `i` of n with 1 or `count` elements of dtype `t` (count 0: exactly 1).
std::optional<ConstTensorView> const_input(const Node& n, size_t i, nxrt_dtype t, int64_t count = 1) {
  if (i >= n.input_count()) return std::nullopt;
  auto v = n.input(i);
  if (!v.present() || !v.is_constant() || v.dtype() != t) return std::nullopt;
  ConstTensorView c = v.constant();
  if (c.numel() != 1 && c.numel() != count) return std::nullopt;
  if (c.numel() > 1 && c.dims().size() != 1) return std::nullopt;
  return c;
}

bool good_scale(float s) { return std::isfinite(s) && s > 0.f; }

// DequantizeLinear of an 8-bit tensor with one constant scale and zero point.
bool per_tensor_dq(const Node& d, QParams& p) {
  if (!is_op(d, "DequantizeLinear") || d.input_count() < 2 || d.output_count() != 1 || !d.has_output(0)) return false;
  auto x = d.input(0);
  if (!x.present() || !is_8bit(x.dtype()) || d.output(0).dtype() != NXRT_DTYPE_FLOAT32) return false;
  auto s = const_input(d, 1, NXRT_DTYPE_FLOAT32);
  if (!s || s->numel() != 1 || !good_scale(s->data<float>()[0])) return false;
  p = {s->data<float>()[0], 0, x.dtype()};
  if (d.input_count() > 2 && d.input(2).present()) {
    auto z = const_input(d, 2, x.dtype());
    if (!z || z->numel() != 1) return false;
    p.zp = int_at(*z, 0);
  }
  return true;
}

// QuantizeLinear of a float32 tensor to 8 bits with one constant scale and zero point.
bool per_tensor_q(const Node& q, QParams& p) {
  if (!is_op(q, "QuantizeLinear") || q.input_count() < 2 || q.output_count() != 1 || !q.has_output(0)) return false;
  const nxrt_dtype t = q.output(0).dtype();
  if (!is_8bit(t) || q.input(0).dtype() != NXRT_DTYPE_FLOAT32) return false;
  auto s = const_input(q, 1, NXRT_DTYPE_FLOAT32);
  if (!s || s->numel() != 1 || !good_scale(s->data<float>()[0])) return false;
  p = {s->data<float>()[0], 0, t};
  if (q.input_count() > 2 && q.input(2).present()) {
    auto z = const_input(q, 2, t);
    if (!z || z->numel() != 1) return false;
    p.zp = int_at(*z, 0);
  }
  return true;
}

// DequantizeLinear of constant 8-bit weights, per tensor or per channel along `axis`.
struct WeightDq {
  sdk::Value value{nullptr, nullptr};  // the constant w (the DequantizeLinear's input)
  ConstTensorView w;
  std::vector<float> scale;   // one per channel
  std::vector<int32_t> zp;    // one per channel
};

bool weight_dq(const Node& d, int64_t axis, WeightDq& out) {
  if (!is_op(d, "DequantizeLinear") || d.input_count() < 2 || d.output_count() != 1 || !d.has_output(0)) return false;
  auto wv = d.input(0);
  if (!wv.present() || !wv.is_constant() || !is_8bit(wv.dtype()) || d.output(0).dtype() != NXRT_DTYPE_FLOAT32)
    return false;
  ConstTensorView w = wv.constant();
  const auto dims = w.dims();
  if (int64_t(dims.size()) <= axis) return false;
  const int64_t channels = dims[size_t(axis)];
  auto s = const_input(d, 1, NXRT_DTYPE_FLOAT32, channels);
  if (!s) return false;
  if (s->numel() > 1) {
    int64_t a = d.attr_int("axis", 1);
    if (a < 0) a += int64_t(dims.size());
    if (a != axis) return false;
  }
  std::optional<ConstTensorView> z;
  if (d.input_count() > 2 && d.input(2).present()) {
    z = const_input(d, 2, w.dtype(), channels);
    if (!z || z->numel() != s->numel()) return false;
  }
  out.value = wv;
  out.w = w;
  out.scale.resize(size_t(channels));
  out.zp.assign(size_t(channels), 0);
  for (int64_t c = 0; c < channels; ++c) {
    const int64_t k = s->numel() == 1 ? 0 : c;
    out.scale[size_t(c)] = s->data<float>()[k];
    if (!good_scale(out.scale[size_t(c)])) return false;
    if (z) out.zp[size_t(c)] = int_at(*z, k);
  }
  return true;
}

// A Conv bias: constant float32 [C], or DequantizeLinear of constant int32 [C] (per-tensor
// or per-channel scale, zero point 0), as float32 values computed as DequantizeLinear does.
// `int_bias` holds the int32 values when their scale is x_scale * w_scale[c] (as
// quantization tools write it), so the 8-bit output can add them exactly.
struct BiasDq {
  std::vector<float> values;
  std::vector<float> scale;  // empty: a float bias
  std::vector<int32_t> ints;
};

bool bias_dq(const Node& d, int64_t channels, BiasDq& out) {
  if (!is_op(d, "DequantizeLinear") || d.input_count() < 2 || d.output_count() != 1 || !d.has_output(0)) return false;
  auto bv = d.input(0);
  if (!bv.present() || !bv.is_constant() || bv.dtype() != NXRT_DTYPE_INT32) return false;
  ConstTensorView b = bv.constant();
  if (b.numel() != channels || b.dims().size() != 1) return false;
  auto s = const_input(d, 1, NXRT_DTYPE_FLOAT32, channels);
  if (!s) return false;
  if (d.input_count() > 2 && d.input(2).present()) {
    auto z = const_input(d, 2, NXRT_DTYPE_INT32, channels);
    if (!z) return false;
    for (int64_t i = 0; i < z->numel(); ++i)
      if (z->data<int32_t>()[i] != 0) return false;
  }
  for (int64_t c = 0; c < channels; ++c) {
    const float sc = s->data<float>()[s->numel() == 1 ? 0 : c];
    out.scale.push_back(sc);
    out.ints.push_back(b.data<int32_t>()[c]);
    out.values.push_back(float(int64_t(out.ints.back())) * sc);
  }
  return true;
}

// Everything a QDQ group's kernel needs, read from its nodes at claim and at kernel creation.
struct QdqMatch {
  enum class Kind { None, Conv, MatMul, Add, Pool } kind = Kind::None;
  std::vector<size_t> nodes;  // view positions
  size_t anchor = 0;
  QParams x, x2, y;           // x2: the Add's second input
  sdk::Value x_value{nullptr, nullptr}, x2_value{nullptr, nullptr};
  WeightDq w;
  BiasDq bias;
  bool has_bias = false, has_q = false, clamp = false;
  std::optional<size_t> pool;  // Conv: the MaxPool between the float output and QuantizeLinear
  float lo = 0.f, hi = 0.f;
};

using OkFn = std::function<bool(size_t)>;

std::map<ValueKey, size_t> producer_index(const sdk::Graph& g) {
  std::map<ValueKey, size_t> p;
  for (size_t i = 0; i < g.node_count(); ++i) {
    Node n = g.node(i);
    for (size_t o = 0; o < n.output_count(); ++o)
      if (n.has_output(o)) p[n.output(o).raw()] = i;
  }
  return p;
}

// The node making input `slot` of node `at`, when that node's only use is this one.
std::optional<size_t> sole_producer(const sdk::Graph& g, const ViewIndex& ix, const std::map<ValueKey, size_t>& prod,
                                    size_t at, size_t slot, const OkFn& ok) {
  Node n = g.node(at);
  if (slot >= n.input_count() || !n.input(slot).present()) return std::nullopt;
  auto v = n.input(slot);
  auto it = prod.find(v.raw());
  if (it == prod.end() || !ok(it->second)) return std::nullopt;
  auto use = sole_use(ix, v.raw());
  if (!use || use->first != at || use->second != slot) return std::nullopt;
  return it->second;
}

// After the anchor: [Relu | Clip] [QuantizeLinear], each the sole reader of the last value.
void follow_tail(const sdk::Graph& g, const ViewIndex& ix, QdqMatch& m, const OkFn& ok) {
  sdk::Value v = g.node(m.anchor).output(0);
  auto next = [&]() -> std::optional<size_t> {
    auto use = sole_use(ix, v.raw());
    if (!use || !ok(use->first) || use->second != 0) return std::nullopt;
    return use->first;
  };
  auto step = next();
  if (step) {
    Node a = g.node(*step);
    if (a.output_count() == 1 && a.has_output(0)) {
      if (auto b = activation_bounds(a, g.opset(""))) {
        m.nodes.push_back(*step);
        m.clamp = true;
        m.lo = b->first;
        m.hi = b->second;
        v = a.output(0);
        step = next();
      }
    }
  }
  if (step && per_tensor_q(g.node(*step), m.y)) {
    m.nodes.push_back(*step);
    m.has_q = true;
  }
}

// After a float Conv [-> Relu | Clip]: MaxPool (no Indices, 2 spatial dims) -> QuantizeLinear,
// each the sole reader of the value before it.
void follow_pool(const sdk::Graph& g, const ViewIndex& ix, QdqMatch& m, const OkFn& ok) {
  sdk::Value v = g.node(m.nodes.back()).output(0);
  auto use = sole_use(ix, v.raw());
  if (!use || !ok(use->first) || use->second != 0) return;
  Node p = g.node(use->first);
  if (!is_op(p, "MaxPool") || p.output_count() < 1 || !p.has_output(0) || (p.output_count() > 1 && p.has_output(1)) ||
      p.attr_ints("kernel_shape").size() != 2 || v.rank() != 4)
    return;
  auto qu = sole_use(ix, p.output(0).raw());
  if (!qu || !ok(qu->first) || qu->second != 0) return;
  QParams y;
  if (!per_tensor_q(g.node(qu->first), y)) return;
  m.pool = use->first;
  m.nodes.push_back(use->first);
  m.nodes.push_back(qu->first);
  m.y = y;
  m.has_q = true;
}

QdqMatch match_conv(const sdk::Graph& g, const ViewIndex& ix, const std::map<ValueKey, size_t>& prod, size_t c,
                    const OkFn& ok) {
  QdqMatch m;
  Node cn = g.node(c);
  if (cn.input_count() < 2 || cn.output_count() != 1 || !cn.has_output(0) || cn.output(0).dtype() != NXRT_DTYPE_FLOAT32)
    return {};
  auto px = sole_producer(g, ix, prod, c, 0, ok);
  auto pw = sole_producer(g, ix, prod, c, 1, ok);
  if (!px || !pw || !per_tensor_dq(g.node(*px), m.x) || g.node(*px).input(0).is_constant()) return {};
  if (!weight_dq(g.node(*pw), 0, m.w) || m.w.w.dims().size() < 3) return {};
  m.x_value = g.node(*px).input(0);
  m.nodes = {*px, *pw};
  const int64_t oc = m.w.w.dims()[0];
  if (cn.input_count() > 2 && cn.input(2).present()) {
    auto b = cn.input(2);
    if (b.is_constant()) {
      if (b.dtype() != NXRT_DTYPE_FLOAT32) return {};
      ConstTensorView t = b.constant();
      if (t.numel() != oc) return {};
      m.bias.values.assign(t.data<float>(), t.data<float>() + oc);
    } else {
      auto pb = sole_producer(g, ix, prod, c, 2, ok);
      if (!pb || !bias_dq(g.node(*pb), oc, m.bias)) return {};
      m.nodes.push_back(*pb);
    }
    m.has_bias = true;
  }
  m.kind = QdqMatch::Kind::Conv;
  m.anchor = c;
  m.nodes.push_back(c);
  follow_tail(g, ix, m, ok);
  if (!m.has_q) follow_pool(g, ix, m, ok);
  return m;
}

QdqMatch match_matmul(const sdk::Graph& g, const ViewIndex& ix, const std::map<ValueKey, size_t>& prod, size_t mm,
                      const OkFn& ok) {
  QdqMatch m;
  Node mn = g.node(mm);
  if (mn.input_count() != 2 || mn.output_count() != 1 || !mn.has_output(0) || mn.output(0).dtype() != NXRT_DTYPE_FLOAT32)
    return {};
  auto pa = sole_producer(g, ix, prod, mm, 0, ok);
  auto pw = sole_producer(g, ix, prod, mm, 1, ok);
  if (!pa || !pw || !per_tensor_dq(g.node(*pa), m.x) || g.node(*pa).input(0).is_constant()) return {};
  if (!weight_dq(g.node(*pw), 1, m.w) || m.w.w.dims().size() != 2) return {};
  m.x_value = g.node(*pa).input(0);
  if (m.x_value.rank() < 2) return {};  // a 1-D A drops its unit dim: left to the nodes
  m.nodes = {*pa, *pw, mm};
  m.kind = QdqMatch::Kind::MatMul;
  m.anchor = mm;
  // [Add(bias over N)] moves the anchor forward.
  sdk::Value v = mn.output(0);
  if (auto use = sole_use(ix, v.raw()); use && ok(use->first)) {
    Node add = g.node(use->first);
    const size_t other = 1 - use->second;
    if (is_op(add, "Add") && add.input_count() == 2 && add.output_count() == 1 && add.has_output(0) &&
        add.input(other).raw() != v.raw() && add.input(other).is_constant() &&
        add.input(other).dtype() == NXRT_DTYPE_FLOAT32 && add.output(0).rank() == v.rank() && v.rank() >= 1) {
      ConstTensorView b = add.input(other).constant();
      const auto bd = b.dims();
      const int64_t n = m.w.w.dims()[1];
      const bool over_n = !bd.empty() && bd.size() <= size_t(v.rank()) && bd.back() == n &&
                          std::all_of(bd.begin(), bd.end() - 1, [](int64_t d) { return d == 1; });
      if (over_n) {
        m.bias.values.assign(b.data<float>(), b.data<float>() + n);
        m.has_bias = true;
        m.nodes.push_back(use->first);
        m.anchor = use->first;
      }
    }
  }
  follow_tail(g, ix, m, ok);
  return m;
}

QdqMatch match_add(const sdk::Graph& g, const ViewIndex& ix, const std::map<ValueKey, size_t>& prod, size_t ad,
                   const OkFn& ok) {
  QdqMatch m;
  Node an = g.node(ad);
  if (an.input_count() != 2 || an.output_count() != 1 || !an.has_output(0) || an.output(0).dtype() != NXRT_DTYPE_FLOAT32)
    return {};
  auto pa = sole_producer(g, ix, prod, ad, 0, ok);
  auto pb = sole_producer(g, ix, prod, ad, 1, ok);
  if (!pa || !pb || *pa == *pb || !per_tensor_dq(g.node(*pa), m.x) || !per_tensor_dq(g.node(*pb), m.x2)) return {};
  m.x_value = g.node(*pa).input(0);
  m.x2_value = g.node(*pb).input(0);
  if (m.x_value.is_constant() || m.x2_value.is_constant() || !same_static_shape(m.x_value, m.x2_value) ||
      !same_static_shape(m.x_value, an.output(0)))
    return {};
  m.nodes = {*pa, *pb, ad};
  m.kind = QdqMatch::Kind::Add;
  m.anchor = ad;
  follow_tail(g, ix, m, ok);
  return m;
}

// DequantizeLinear -> MaxPool (2 spatial dims, no Indices) -> QuantizeLinear.
QdqMatch match_maxpool(const sdk::Graph& g, const ViewIndex& ix, const std::map<ValueKey, size_t>& prod, size_t i,
                       const OkFn& ok) {
  QdqMatch m;
  Node p = g.node(i);
  if (p.input_count() != 1 || p.output_count() < 1 || !p.has_output(0) || (p.output_count() > 1 && p.has_output(1)) ||
      p.attr_ints("kernel_shape").size() != 2 || p.output(0).dtype() != NXRT_DTYPE_FLOAT32)
    return {};
  auto pd = sole_producer(g, ix, prod, i, 0, ok);
  if (!pd || !per_tensor_dq(g.node(*pd), m.x) || g.node(*pd).input(0).is_constant()) return {};
  m.x_value = g.node(*pd).input(0);
  if (m.x_value.rank() != 4) return {};
  auto qu = sole_use(ix, p.output(0).raw());
  if (!qu || !ok(qu->first) || qu->second != 0 || !per_tensor_q(g.node(qu->first), m.y)) return {};
  m.nodes = {*pd, i, qu->first};
  m.kind = QdqMatch::Kind::Pool;
  m.anchor = i;
  m.has_q = true;
  return m;
}

QdqMatch match_at(const sdk::Graph& g, const ViewIndex& ix, const std::map<ValueKey, size_t>& prod, size_t i,
                  const OkFn& ok) {
  Node n = g.node(i);
  if (is_op(n, "MaxPool")) return match_maxpool(g, ix, prod, i, ok);
  if (is_op(n, "Conv")) return match_conv(g, ix, prod, i, ok);
  if (is_op(n, "MatMul")) return match_matmul(g, ix, prod, i, ok);
  if (is_op(n, "Add")) return match_add(g, ix, prod, i, ok);
  return {};
}

QType qtype(nxrt_dtype t) { return t == NXRT_DTYPE_UINT8 ? QType::U8 : QType::S8; }

// A float bound quantized as QuantizeLinear would (infinite: the type's own limit).
template <typename Q>
int32_t quantized_bound(float v, const QParams& y) {
  if (std::isinf(v)) return v < 0 ? std::numeric_limits<Q>::lowest() : std::numeric_limits<Q>::max();
  return saturate_round<Q>(std::nearbyint(v / y.scale) + float(y.zp));
}

// What the accumulator of channel c becomes (conv and matmul alike).
QOutput output_of(const QdqMatch& m) {
  const size_t channels = m.w.scale.size();
  QOutput o;
  o.scale.resize(channels);
  if (m.has_q && !m.pool) {
    o.type = qtype(m.y.type);
    o.zero_point = m.y.zp;
    for (size_t c = 0; c < channels; ++c) o.scale[c] = double(m.x.scale) * double(m.w.scale[c]) / double(m.y.scale);
    if (m.has_bias) {
      o.bias.resize(channels);
      for (size_t c = 0; c < channels; ++c) {
        const float want = m.x.scale * m.w.scale[c];  // the scale quantization tools give an int32 bias
        if (!m.bias.scale.empty() && m.bias.scale[c] == want) o.bias[c] = m.bias.ints[c];
        else o.bias[c] = int32_t(std::clamp(std::nearbyint(double(m.bias.values[c]) / (double(m.x.scale) * m.w.scale[c])),
                                            -2147483648.0, 2147483647.0));
      }
    }
    if (m.clamp) {
      if (m.y.type == NXRT_DTYPE_UINT8) {
        o.lo = quantized_bound<uint8_t>(m.lo, m.y);
        o.hi = quantized_bound<uint8_t>(m.hi, m.y);
      } else {
        o.lo = quantized_bound<int8_t>(m.lo, m.y);
        o.hi = quantized_bound<int8_t>(m.hi, m.y);
      }
    }
  } else {
    o.type = QType::F32;
    for (size_t c = 0; c < channels; ++c) o.scale[c] = double(m.x.scale) * double(m.w.scale[c]);
    if (m.has_bias) o.float_bias = m.bias.values;
    if (m.clamp) {
      o.flo = m.lo;
      o.fhi = m.hi;
    }
    if (m.pool) {  // the float value through QuantizeLinear, in the store (the pool runs after it)
      o.type = qtype(m.y.type);
      o.zero_point = m.y.zp;
      o.q_scale = m.y.scale;
    }
  }
  return o;
}

nxrt_dtype out_dtype(const QdqMatch& m) { return m.has_q ? m.y.type : nxrt_dtype(NXRT_DTYPE_FLOAT32); }

// Conv [-> Relu | Clip] -> MaxPool -> QuantizeLinear: the conv's 8-bit values (the float
// output quantized in the store) into a per-thread buffer, then the 8-bit max pool into y.
// A channels-last conv (an RGB stem) leaves its values channels-last for the pool, which
// transposes its 4x smaller output instead (cnn_int8's stem: its transposes and the pool over
// planes ~115 us of its 535 on 1 thread).
std::unique_ptr<Kernel> conv_pool_kernel(const ConvAttrs& attrs, const PoolAttrs& pa, int x_index,
                                         const std::vector<int64_t>& wd, std::shared_ptr<const QConv> conv,
                                         nxrt_dtype x_type, nxrt_dtype y_type, ThreadPool* pool, std::string what) {
  PoolShape probe;  // what max_pool_channels_last_ok asks of a 2-D pool of these channels
  probe.channels = wd[0];
  const bool channels_last = conv->uses_nhwc() && pa.k.size() == 2 && max_pool_channels_last_ok(probe);
  what += channels_last ? ", then the 8-bit max pool over its channels-last output" : ", then the 8-bit max pool";
  return make_kernel([attrs, pa, x_index, wd, conv, x_type, y_type, pool, channels_last](Context& ctx) {
    ConstTensorView x = ctx.input(size_t(x_index));
    if (x.dtype() != x_type) sdk::fail(NXRT_INVALID_ARGUMENT, "Conv (QDQ group): x is {}, expected {}", sdk::dtype_name(x.dtype()), sdk::dtype_name(x_type));
    const ConvShape s = conv_shape(attrs, x.dims(), wd, "Conv (QDQ group)");
    const std::vector<int64_t> cd = {s.batch, s.out_c, s.out_h, s.out_w};
    std::vector<int64_t> od;
    const PoolShape ps = pool_shape(pa, cd, "MaxPool (QDQ group)", od);
    TensorView y = ctx.output(0, y_type, od);
    if (y.numel() == 0) return;
    thread_local std::vector<uint8_t> buf;  // kept across runs: no page faults per run
    buf.resize(size_t(s.batch * s.out_c * s.out_h * s.out_w));
    if (channels_last && max_pool_channels_last_ok(ps)) {
      conv->run_channels_last(s, x.raw(), buf.data(), pool);
      if (y_type == NXRT_DTYPE_UINT8) max_pool_channels_last(ps, buf.data(), y.data<uint8_t>(), pool);
      else max_pool_channels_last(ps, reinterpret_cast<const int8_t*>(buf.data()), y.data<int8_t>(), pool);
      return;
    }
    conv->run(s, x.raw(), buf.data(), pool);
    if (y_type == NXRT_DTYPE_UINT8) max_pool(ps, buf.data(), y.data<uint8_t>(), pool);
    else max_pool(ps, reinterpret_cast<const int8_t*>(buf.data()), y.data<int8_t>(), pool);
  }, std::move(what));
}

// The weights' packed tiles are prepacked buffers (kernel cache); the quantized weights
// themselves are not read after creation: the host may free them.
void capture_weights(const QdqMatch& m, sdk::Prepacked& pp) {
  if (m.w.value.raw() != m.x_value.raw()) pp.capture(m.w.value);
}

std::unique_ptr<Kernel> conv_kernel(const sdk::Graph& sg, const QdqMatch& m, CpuSession& session, sdk::Prepacked& pp) {
  Node cn = sg.node(m.anchor);
  const ConvAttrs attrs = read_conv_attrs(cn, 1);
  const int x_index = group_input_index(sg, m.x_value);
  std::vector<int64_t> wd(m.w.w.dims().begin(), m.w.w.dims().end());
  PrepackedQStore store(pp);
  // x's shape known: the path run() takes for it.
  const std::optional<ConvShape> shape = static_conv_shape(attrs, m.x_value, wd, "Conv (QDQ group)");
  auto conv = std::make_shared<const QConv>(qtype(m.x.type), m.x.zp, qtype(m.w.w.dtype()), m.w.w.raw(), m.w.w.numel(),
                                            m.w.zp, output_of(m), &store, conv_taps(wd),
                                            shape ? &*shape : nullptr);
  capture_weights(m, pp);
  const nxrt_dtype x_type = m.x.type, y_type = out_dtype(m);
  ThreadPool* pool = session.pool();
  std::string what = "8-bit conv, " + conv->describe();
  if (shape && !conv->uses_winograd(*shape) && conv->reads_b_in_place(*shape))
    what += ", B read in place from the interleaved copy";
  if (m.pool)
    return conv_pool_kernel(attrs, read_pool_attrs(sg.node(*m.pool)), x_index, wd, conv, x_type, y_type, pool, what);
  return make_kernel([attrs, x_index, wd, conv, x_type, y_type, pool](Context& ctx) {
    ConstTensorView x = ctx.input(size_t(x_index));
    if (x.dtype() != x_type) sdk::fail(NXRT_INVALID_ARGUMENT, "Conv (QDQ group): x is {}, expected {}", sdk::dtype_name(x.dtype()), sdk::dtype_name(x_type));
    const ConvShape s = conv_shape(attrs, x.dims(), wd, "Conv (QDQ group)");
    std::vector<int64_t> od = {s.batch, s.out_c};
    if (attrs.sr == 2) od.push_back(s.out_h);
    od.push_back(s.out_w);
    TensorView y = ctx.output(0, y_type, od);
    if (y.numel() == 0) return;
    conv->run(s, x.raw(), y.raw(), pool);
  }, what);
}

std::unique_ptr<Kernel> matmul_kernel(const sdk::Graph& sg, const QdqMatch& m, CpuSession& session, sdk::Prepacked& pp) {
  const int a_index = group_input_index(sg, m.x_value);
  const int64_t K = m.w.w.dims()[0], N = m.w.w.dims()[1];
  PrepackedQStore store(pp);
  auto mm = std::make_shared<const QMatMul>(qtype(m.x.type), m.x.zp, qtype(m.w.w.dtype()), m.w.w.raw(), K, N, m.w.zp,
                                            output_of(m), &store);
  capture_weights(m, pp);
  const nxrt_dtype a_type = m.x.type, y_type = out_dtype(m);
  ThreadPool* pool = session.pool();
  return make_kernel([a_index, mm, K, N, a_type, y_type, pool](Context& ctx) {
    ConstTensorView a = ctx.input(size_t(a_index));
    auto ad = a.dims();
    if (a.dtype() != a_type || ad.size() < 2 || ad.back() != K)
      sdk::fail(NXRT_INVALID_ARGUMENT, "MatMul (QDQ group): A is {} {}, expected {} [..., M, {}]", sdk::dtype_name(a.dtype()),
                dims_str(ad), sdk::dtype_name(a_type), K);
    std::vector<int64_t> od(ad.begin(), ad.end());
    od.back() = N;
    TensorView y = ctx.output(0, y_type, od);
    if (y.numel() == 0) return;
    mm->run(a.numel() / K, a.raw(), y.raw(), pool);
  }, "8-bit matmul, " + mm->describe());
}

// DequantizeLinear twice, Add, [clamp], [QuantizeLinear]: one pass in registers doing the
// nodes' own float operations in their order (qdq_add, quantize.hpp), so the result is
// bit-identical to the nodes and each value is read and written once.
template <typename A, typename B, typename Y>
void qdq_add_pass(const A* a, const B* b, Y* y, int64_t n, const QdqMatch& m, ThreadPool* pool) {
  QdqAddParams p;
  p.a_scale = m.x.scale;
  p.b_scale = m.x2.scale;
  p.a_zp = m.x.zp;
  p.b_zp = m.x2.zp;
  p.y_scale = m.y.scale;
  p.y_zp = m.y.zp;
  p.clamp = m.clamp;
  p.lo = m.lo;
  p.hi = m.hi;
  // Split from 8K values a thread: on one thread the pass reads the half of its inputs the
  // other core just wrote (a 7x7x512 Add: 3.6 us alone on 1 thread, ~10 us after 2-thread convs).
  parallel_ranges(pool, n, threads_for(pool, double(n), 8192.0),
                  [&](int64_t i0, int64_t i1) { qdq_add(a + i0, b + i0, y + i0, i1 - i0, p); });
}

std::unique_ptr<Kernel> add_kernel(const sdk::Graph& sg, const QdqMatch& m, CpuSession& session) {
  const int a_index = group_input_index(sg, m.x_value), b_index = group_input_index(sg, m.x2_value);
  const nxrt_dtype y_type = out_dtype(m);
  ThreadPool* pool = session.pool();
  return make_kernel([a_index, b_index, m, y_type, pool](Context& ctx) {
    ConstTensorView a = ctx.input(size_t(a_index)), b = ctx.input(size_t(b_index));
    if (a.dtype() != m.x.type || b.dtype() != m.x2.type || !std::ranges::equal(a.dims(), b.dims()))
      sdk::fail(NXRT_INVALID_ARGUMENT, "Add (QDQ group): inputs {} {} and {} {} differ from the model's", sdk::dtype_name(a.dtype()),
                dims_str(a.dims()), sdk::dtype_name(b.dtype()), dims_str(b.dims()));
    TensorView y = ctx.output(0, y_type, a.dims());
    const int64_t n = a.numel();
    if (n == 0) return;
    auto with_y = [&](auto* ap, auto* bp) {
      if (y_type == NXRT_DTYPE_FLOAT32) qdq_add_pass(ap, bp, y.data<float>(), n, m, pool);
      else if (y_type == NXRT_DTYPE_UINT8) qdq_add_pass(ap, bp, y.data<uint8_t>(), n, m, pool);
      else qdq_add_pass(ap, bp, y.data<int8_t>(), n, m, pool);
    };
    auto with_b = [&](auto* ap) {
      if (b.dtype() == NXRT_DTYPE_UINT8) with_y(ap, b.data<uint8_t>());
      else with_y(ap, b.data<int8_t>());
    };
    if (a.dtype() == NXRT_DTYPE_UINT8) with_b(a.data<uint8_t>());
    else with_b(a.data<int8_t>());
  });
}

// q(dq(v)) for every 8-bit v of x's type, by the nodes' own functions (so exact), as y's type.
template <typename X, typename Y>
std::vector<uint8_t> requant_table(const QdqMatch& m) {
  std::array<X, 256> v;
  for (int i = 0; i < 256; ++i) v[size_t(i)] = X(std::numeric_limits<X>::lowest() + i);
  std::array<float, 256> f;
  const X xz = X(m.x.zp);
  const Y yz = Y(m.y.zp);
  dequantize_linear(v.data(), 256, &m.x.scale, &xz, QuantAxis{}, f.data());
  std::array<Y, 256> q;
  quantize_linear(f.data(), 256, &m.y.scale, &yz, QuantAxis{}, q.data());
  std::vector<uint8_t> t(256);
  for (int i = 0; i < 256; ++i) t[size_t(uint8_t(v[size_t(i)]))] = uint8_t(q[size_t(i)]);
  return t;
}

std::unique_ptr<Kernel> maxpool_kernel(const sdk::Graph& sg, const QdqMatch& m, CpuSession& session) {
  const PoolAttrs pa = read_pool_attrs(sg.node(m.anchor));
  const int x_index = group_input_index(sg, m.x_value);
  const bool xu = m.x.type == NXRT_DTYPE_UINT8, yu = m.y.type == NXRT_DTYPE_UINT8;
  std::vector<uint8_t> table = xu ? (yu ? requant_table<uint8_t, uint8_t>(m) : requant_table<uint8_t, int8_t>(m))
                                  : (yu ? requant_table<int8_t, uint8_t>(m) : requant_table<int8_t, int8_t>(m));
  bool identity = xu == yu;  // same type and every byte maps to itself
  for (int i = 0; i < 256 && identity; ++i) identity = table[size_t(i)] == uint8_t(i);
  if (identity) table.clear();
  ThreadPool* pool = session.pool();
  const nxrt_dtype x_type = m.x.type, y_type = m.y.type;
  return make_kernel([pa, x_index, table, x_type, y_type, pool](Context& ctx) {
    ConstTensorView x = ctx.input(size_t(x_index));
    if (x.dtype() != x_type)
      sdk::fail(NXRT_INVALID_ARGUMENT, "MaxPool (QDQ group): x is {}, expected {}", sdk::dtype_name(x.dtype()), sdk::dtype_name(x_type));
    std::vector<int64_t> xd(x.dims().begin(), x.dims().end()), od;
    const PoolShape ps = pool_shape(pa, xd, "MaxPool (QDQ group)", od);
    TensorView y = ctx.output(0, y_type, od);
    const int64_t n = y.numel();
    if (n == 0) return;
    // Pooled bytes of x's type: straight into y when the types match, else a buffer.
    thread_local std::vector<uint8_t> buf;  // kept across runs
    uint8_t* pooled = static_cast<uint8_t*>(y.raw());
    if (x_type != y_type) {
      buf.resize(size_t(n));
      pooled = buf.data();
    }
    if (x_type == NXRT_DTYPE_UINT8) max_pool(ps, x.data<uint8_t>(), pooled, pool);
    else max_pool(ps, x.data<int8_t>(), reinterpret_cast<int8_t*>(pooled), pool);
    if (table.empty()) return;
    uint8_t* out = static_cast<uint8_t*>(y.raw());
    parallel_ranges(pool, n, threads_for(pool, double(n), 1 << 18), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) out[i] = table[pooled[i]];
    });
  }, table.empty() ? "8-bit max pool" : "8-bit max pool + requantization table");
}

}  // namespace

std::vector<std::vector<size_t>> claim_qdq_groups(const sdk::Graph& g, const ViewIndex& ix,
                                                  const std::function<bool(size_t)>& ok) {
  std::vector<std::vector<size_t>> groups;
  const auto prod = producer_index(g);
  std::vector<char> taken(g.node_count(), 0);
  const OkFn ok_free = [&](size_t j) { return !taken[j] && ok(j); };
  for (size_t i = 0; i < g.node_count(); ++i) {
    if (!ok_free(i)) continue;
    QdqMatch m = match_at(g, ix, prod, i, ok_free);
    if (m.kind == QdqMatch::Kind::None) continue;
    for (size_t p : m.nodes) taken[p] = 1;
    groups.push_back(m.nodes);
  }
  return groups;
}

std::unique_ptr<Kernel> create_qdq_kernel(const sdk::Graph& sg, CpuSession& session, sdk::Prepacked& pp) {
  bool any_dq = false;
  for (size_t i = 0; i < sg.node_count(); ++i) any_dq |= is_op(sg.node(i), "DequantizeLinear");
  if (!any_dq) return nullptr;
  const ViewIndex ix = index_view(sg);
  const auto prod = producer_index(sg);
  const OkFn all = [](size_t) { return true; };
  for (size_t i = 0; i < sg.node_count(); ++i) {
    QdqMatch m = match_at(sg, ix, prod, i, all);
    if (m.kind == QdqMatch::Kind::None) continue;
    if (m.nodes.size() != sg.node_count())
      sdk::fail(NXRT_UNSUPPORTED, "group of {} nodes is not a QDQ group this plugin fuses ({} on the pattern)",
                sg.node_count(), m.nodes.size());
    Node last = sg.node(m.nodes.back());
    if (sg.output_count() != 1 || sg.output(0).raw() != last.output(0).raw())
      sdk::fail(NXRT_UNSUPPORTED, "QDQ group must have exactly one output, its last value ({} outputs)", sg.output_count());
    switch (m.kind) {
      case QdqMatch::Kind::Conv: return conv_kernel(sg, m, session, pp);
      case QdqMatch::Kind::MatMul: return matmul_kernel(sg, m, session, pp);
      case QdqMatch::Kind::Add: return add_kernel(sg, m, session);
      case QdqMatch::Kind::Pool: return maxpool_kernel(sg, m, session);
      case QdqMatch::Kind::None: break;
    }
  }
  sdk::fail(NXRT_UNSUPPORTED, "group of {} nodes with DequantizeLinear is not a QDQ group this plugin fuses", sg.node_count());
}

}  // namespace nxrt::cpu
