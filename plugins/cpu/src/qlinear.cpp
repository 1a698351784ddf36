#include "qlinear.hpp"

#include <cmath>
#include <cstring>

#include "integer_linalg.hpp"

namespace nxrt::cpu {
namespace {

size_t at_or_0(const auto& v, int64_t c) { return v.size() == 1 ? 0 : size_t(c); }

template <typename Q>
Q requant_clamped(int32_t v, double scale, const QOutput& o) {
  Q q = requantize<Q>(v, scale, o.zero_point);
  return Q(std::min<int32_t>(std::max<int32_t>(q, o.lo), o.hi));
}

// One accumulator of channel c to y[at].
inline void store_one(const QOutput& o, int32_t a, int64_t c, void* y, int64_t at) {
  const int32_t v = o.bias.empty() ? a : int32_t(uint32_t(a) + uint32_t(o.bias[size_t(c)]));
  switch (o.type) {
    case QType::I32: static_cast<int32_t*>(y)[at] = v; return;
    case QType::F32: {
      float f = float(double(v) * o.scale[at_or_0(o.scale, c)]);
      if (!o.float_bias.empty()) f += o.float_bias[size_t(c)];
      static_cast<float*>(y)[at] = std::min(std::max(f, o.flo), o.fhi);
      return;
    }
    case QType::U8: static_cast<uint8_t*>(y)[at] = requant_clamped<uint8_t>(v, o.scale[at_or_0(o.scale, c)], o); return;
    case QType::S8: static_cast<int8_t*>(y)[at] = requant_clamped<int8_t>(v, o.scale[at_or_0(o.scale, c)], o); return;
  }
}

template <typename F>
void with_types(QType a, QType b, F&& f) {
  auto with_b = [&](auto ta) {
    if (b == QType::U8) f(ta, uint8_t{});
    else f(ta, int8_t{});
  };
  if (a == QType::U8) with_b(uint8_t{});
  else with_b(int8_t{});
}

}  // namespace

void q_store_channel(const QOutput& o, const int32_t* acc, int64_t count, int64_t c, void* y, int64_t at) {
  for (int64_t i = 0; i < count; ++i) store_one(o, acc[i], c, y, at + i);
}

void q_store_row(const QOutput& o, const int32_t* acc, int64_t count, int64_t c, void* y, int64_t at) {
  for (int64_t i = 0; i < count; ++i) store_one(o, acc[i], c + i, y, at + i);
}

QConv::QConv(QType x_type, int32_t x_zp, QType w_type, const void* w, int64_t w_count, std::vector<int32_t> w_zp,
             QOutput out)
    : x_type_(x_type), w_type_(w_type), x_zp_(x_zp), w_(size_t(w_count)), w_zp_(std::move(w_zp)), out_(std::move(out)) {
  if (w_count) std::memcpy(w_.data(), w, size_t(w_count));
}
QConv::~QConv() = default;

void QConv::run(const ConvShape& s, const void* x, void* y, ThreadPool* pool) const {
  const int64_t plane = s.out_h * s.out_w, total = s.batch * s.out_c * plane;
  if (total == 0) return;
  std::vector<int32_t> acc(static_cast<size_t>(total));
  with_types(x_type_, w_type_, [&](auto tx, auto tw) {
    using TX = decltype(tx);
    using TW = decltype(tw);
    conv_integer(s, static_cast<const TX*>(x), x_zp_, reinterpret_cast<const TW*>(w_.data()), w_zp_.data(), acc.data(),
                 pool);
  });
  for (int64_t t = 0; t < s.batch * s.out_c; ++t) q_store_channel(out_, acc.data() + t * plane, plane, t % s.out_c, y, t * plane);
}

QMatMul::QMatMul(QType a_type, int32_t a_zp, QType b_type, const void* b, int64_t K, int64_t N, std::vector<int32_t> b_zp,
                 QOutput out)
    : a_type_(a_type), b_type_(b_type), a_zp_(a_zp), K_(K), N_(N), b_(size_t(K * N)), b_zp_(std::move(b_zp)),
      out_(std::move(out)) {
  if (K * N != 0) std::memcpy(b_.data(), b, size_t(K * N));
}
QMatMul::~QMatMul() = default;

void QMatMul::run(int64_t M, const void* a, void* y, ThreadPool* pool) const {
  if (M * N_ == 0) return;
  std::vector<int32_t> acc(static_cast<size_t>(M * N_));
  const std::vector<int32_t> a_zp(size_t(M), a_zp_);
  with_types(a_type_, b_type_, [&](auto ta, auto tb) {
    using TA = decltype(ta);
    using TB = decltype(tb);
    gemm_integer(M, N_, K_, static_cast<const TA*>(a), a_zp.data(), reinterpret_cast<const TB*>(b_.data()), b_zp_.data(),
                 acc.data(), pool);
  });
  for (int64_t m = 0; m < M; ++m) q_store_row(out_, acc.data() + m * N_, N_, 0, y, m * N_);
}

}  // namespace nxrt::cpu
