#include "qlinear.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <stdexcept>
#include <string>

#include "conv_int8_nhwc.hpp"
#include "conv_int8_winograd.hpp"
#include "gemm_int8.hpp"
#include "integer_linalg.hpp"
#include "quantize.hpp"

namespace nxrt::cpu {
namespace {

size_t at_or_0(const auto& v, int64_t c) { return v.size() == 1 ? 0 : size_t(c); }

template <typename Q>
Q requant_clamped(int32_t v, int64_t c, const QOutput& o) {
  const double scale = o.scale[at_or_0(o.scale, c)];
  if (o.q_scale > 0.f) {  // the float output, then QuantizeLinear
    float f = float(double(v) * scale);
    if (!o.float_bias.empty()) f += o.float_bias[size_t(c)];
    f = std::min(std::max(f, o.flo), o.fhi);
    return saturate_round<Q>(std::nearbyint(f / o.q_scale) + float(o.zero_point));
  }
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
    case QType::U8: static_cast<uint8_t*>(y)[at] = requant_clamped<uint8_t>(v, c, o); return;
    case QType::S8: static_cast<int8_t*>(y)[at] = requant_clamped<int8_t>(v, c, o); return;
  }
}

}  // namespace

void q_store_channel(const QOutput& o, const int32_t* acc, int64_t count, int64_t c, void* y, int64_t at) {
  for (int64_t i = 0; i < count; ++i) store_one(o, acc[i], c, y, at + i);
}

void q_store_row(const QOutput& o, const int32_t* acc, int64_t count, int64_t c, void* y, int64_t at) {
  for (int64_t i = 0; i < count; ++i) store_one(o, acc[i], c + i, y, at + i);
}

namespace {

void check_zero_point(int32_t zp, const char* what) {
  if (!q_zero_point_ok(zp)) throw std::invalid_argument(std::string(what) + " " + std::to_string(zp) + " is out of range");
}

// `count` words made by `fill`: in the store when there is one, else in `own`.
std::span<const uint32_t> packed_words(QPackedStore* store, const char* name, size_t count, AlignedFloats& own,
                                       const std::function<void(std::span<uint32_t>)>& fill) {
  if (store) return store->words(name, count, fill);
  own.resize(count);
  std::span<uint32_t> dst(reinterpret_cast<uint32_t*>(own.data()), count);
  fill(dst);
  return dst;
}

// One int made by `make`: in the store when there is one (an import reads it from there).
template <typename Make>
int32_t packed_int(QPackedStore* store, const char* name, Make&& make) {
  if (!store) return make();
  return store->ints(name, 1, [&](std::span<int32_t> d) { d[0] = make(); })[0];
}

// The per-channel correction of the u8 x s8 path (q_fold_quad_correction) folded into ep.bias,
// through the store when there is one (then `wq` is not read on import).
template <typename WQ>
void corrected_bias(QPackedStore* store, QEpilogue& ep, int32_t x_zp, const std::vector<int32_t>& w_zp, int64_t channels,
                    WQ&& wq, int64_t K) {
  if (!store) {
    q_fold_quad_correction(ep, x_zp, w_zp, channels, wq, K);
    return;
  }
  auto bias = store->ints("channel_bias", size_t(channels), [&](std::span<int32_t> dst) {
    QEpilogue e = ep;
    q_fold_quad_correction(e, x_zp, w_zp, channels, wq, K);
    std::copy(e.bias.begin(), e.bias.end(), dst.begin());
  });
  ep.bias.assign(bias.begin(), bias.end());
}

// What the packed buffers were made for (a store holding others refuses them).
void declare(QPackedStore* store, int quads, int64_t channels, int64_t K, int32_t x_zp, QType x_type, QType w_type) {
  if (!store) return;
  store->param("q_quads", quads);
  store->param("q_channels", channels);
  store->param("q_k", K);
  store->param("q_x_zero_point", x_zp);
  store->param("q_x_type", int64_t(x_type));
  store->param("q_w_type", int64_t(w_type));
}

}  // namespace

QConv::QConv(QType x_type, int32_t x_zp, QType w_type, const void* w, int64_t w_count, std::vector<int32_t> w_zp,
             QOutput out, QPackedStore* store, int64_t taps, const ConvShape* shape)
    : x_type_(x_type), w_type_(w_type), x_zp_(x_zp), oc_(int64_t(w_zp.size())), taps_(taps), out_(std::move(out)) {
  check_zero_point(x_zp, "QConv: x zero point");
  for (int32_t z : w_zp) check_zero_point(z, "QConv: w zero point");
  if (oc_ == 0 ? w_count != 0 : w_count % oc_ != 0)
    throw std::invalid_argument("QConv: " + std::to_string(w_count) + " weights for " + std::to_string(oc_) + " channels");
  k_ = oc_ ? w_count / oc_ : 0;
  ep_ = std::make_unique<QEpilogue>(q_epilogue(out_, oc_));
  const int32_t w_add = w_type == QType::U8 ? -128 : 0;
  xq_zp_ = x_zp + (x_type == QType::S8 ? 128 : 0);
  const bool zp_ok = xq_zp_ >= 0 && xq_zp_ <= 255 &&
                     std::all_of(w_zp.begin(), w_zp.end(), [&](int32_t z) { return z + w_add >= -128 && z + w_add <= 127; });
  const bool vnni = zp_ok && q_tile_wide_dpbusd(1, true);
  const bool avx2 = zp_ok && !vnni && q_tile_quads_avx2();  // the split quads, where they pay
  channel_quads_ = vnni && taps > 0 && k_ % taps == 0 && (k_ / taps) % 4 == 0;
  declare(store, vnni ? (channel_quads_ ? 3 : 1) : avx2 ? 2 : 0, oc_, k_, x_zp, x_type, w_type);
  auto w_prime = [&](int64_t i) {  // w' = w + w_add as int8: the s8 operand of the quads
    return w_type == QType::U8 ? int32_t(static_cast<const uint8_t*>(w)[i]) + w_add : int32_t(static_cast<const int8_t*>(w)[i]);
  };
  auto pack_quads = [&](uint32_t* dst) {  // the vpdpbusd path's fill: only when not imported
    if (channel_quads_) {  // position (q * taps + r) * 4 + i holds tap r of input channel 4 q + i
      std::vector<int8_t> w8p(size_t(oc_ * k_));
      for (int64_t m = 0; m < oc_; ++m)
        for (int64_t j = 0; j < k_; ++j)
          w8p[size_t(m * k_ + j)] = int8_t(w_prime(m * k_ + (4 * (j / (4 * taps)) + j % 4) * taps + j / 4 % taps));
      q_pack_a_quads(w8p.data(), k_, 0, oc_, k_, dst);
    } else if (w_type == QType::U8) {
      q_pack_a_quads(static_cast<const uint8_t*>(w), k_, w_add, oc_, k_, dst);
    } else {
      q_pack_a_quads(static_cast<const int8_t*>(w), k_, w_add, oc_, k_, dst);
    }
  };
  const size_t quad_words = size_t(q_tiles(oc_) * kQMR * q_quads(k_));
  std::vector<uint32_t> dense, entries;
  std::vector<int32_t> index, order;
  quads_ = vnni;
  if (avx2) {  // the choice is derived from the weights, so it is stored: an import does not read them
    quads_ = packed_int(store, "q_split_quads", [&] {
      // w' in the tap order that leaves the least rest (q_pair_order), then split.
      std::vector<int8_t> w8(size_t(oc_ * k_)), w8p(w8.size());
      for (size_t i = 0; i < w8.size(); ++i) w8[i] = int8_t(w_prime(int64_t(i)));
      order = q_pair_order(w8.data(), oc_, k_);
      for (int64_t m = 0; m < oc_; ++m)
        for (int64_t j = 0; j < k_; ++j) w8p[size_t(m * k_ + j)] = w8[size_t(m * k_ + order[size_t(j)])];
      dense.resize(quad_words);
      q_pack_a_quads(w8p.data(), k_, 0, oc_, k_, dense.data());
      const int64_t rest_rows = q_split_packed_quads(dense.data(), oc_, k_, index, entries);
      return q_split_pays(rest_rows, q_tiles(oc_) * q_quads(k_)) ? 1 : 0;
    }) != 0;
  }
  if (quads_) {
    if (std::any_of(w_zp.begin(), w_zp.end(), [&](int32_t z) { return z + w_add != 0; }))
      for (int32_t z : w_zp) wq_zp_.push_back(z + w_add);
    auto w8_prime = [&] {  // w' as int8, [OC][k_]
      std::vector<int8_t> w8(size_t(oc_ * k_));
      for (size_t i = 0; i < w8.size(); ++i) w8[i] = int8_t(w_prime(int64_t(i)));
      return w8;
    };
    // The Winograd weights: symmetric w' (no per-pixel zero-point term), 3x3, and sums that
    // stay exact (the bound is derived from the weights, so it is stored).
    const bool winograd = shape && q_winograd_pays(*shape);
    if (winograd && vnni && taps == 9 && wq_zp_.empty() && q_winograd_available() &&
        packed_int(store, "q_winograd_exact", [&] {
          return q_winograd_exact(oc_, k_, [&](int64_t c, int64_t k) { return w_prime(c * k_ + k); }) ? 1 : 0;
        }) != 0) {
      const int64_t ic = k_ / 9;
      winograd_ = packed_words(store, "q_winograd", q_winograd_words(oc_, ic), own_winograd_, [&](std::span<uint32_t> dst) {
        if (w_type == QType::S8) q_winograd_pack(static_cast<const int8_t*>(w), oc_, ic, dst.data());
        else q_winograd_pack(w8_prime().data(), oc_, ic, dst.data());
      });
    }
    // The channels-last product: symmetric w', 8-bit outputs, channels in 16s (or 3).
    nhwc_ = winograd_.empty() && shape && vnni && wq_zp_.empty() && (out_.type == QType::U8 || out_.type == QType::S8) &&
            q_nhwc_runs(*shape) && shape->k_h * shape->k_w == taps && shape->in_c * taps == k_ &&
            shape->out_c == oc_ && q_nhwc_pays(*shape);
    if (nhwc_) {
      const int64_t ic = shape->in_c, kh = shape->k_h, kw = shape->k_w;
      packed_w_ = packed_words(store, "q_nhwc", q_nhwc_words(oc_, ic, kh, kw), own_, [&](std::span<uint32_t> dst) {
        if (w_type == QType::S8) q_nhwc_pack(static_cast<const int8_t*>(w), oc_, ic, kh, kw, dst.data());
        else q_nhwc_pack(w8_prime().data(), oc_, ic, kh, kw, dst.data());
      });
    } else {
      packed_w_ = packed_words(store, "packed_w", quad_words, own_, [&](std::span<uint32_t> dst) {
        if (avx2) std::copy(dense.begin(), dense.end(), dst.begin());
        else pack_quads(dst.data());
      });
    }
    if (avx2) {  // the channel quads' order follows from taps_, so it is not stored
      keep_rest(store, std::move(index), std::move(entries));
      keep_order(store, std::move(order));
    }
    corrected_bias(store, *ep_, xq_zp_, wq_zp_, oc_, [&](int64_t c, int64_t k) { return w_prime(c * k_ + k); }, k_);
    return;
  }
  packed_w_ = packed_words(store, "packed_w", size_t(q_tiles(oc_) * kQMR * q_pairs(k_)), own_, [&](std::span<uint32_t> dst) {
    if (w_type == QType::U8) q_pack_a(static_cast<const uint8_t*>(w), k_, w_zp.data(), true, oc_, k_, dst.data());
    else q_pack_a(static_cast<const int8_t*>(w), k_, w_zp.data(), true, oc_, k_, dst.data());
  });
}
QConv::~QConv() = default;

void QConv::keep_rest(QPackedStore* store, std::vector<int32_t> index, std::vector<uint32_t> entries) {
  const int64_t KQ = q_quads(k_), kcb = q_k_block(KQ), blocks = q_k_blocks(KQ), cells = q_tiles(oc_) * blocks;
  if (!store) {
    rest_index_own_ = std::move(index);
    rest_entries_own_ = std::move(entries);
    rest_index_ = rest_index_own_;
    rest_entries_ = rest_entries_own_;
  } else {
    // On import the fills do not run: the entry count is the imported index's last value.
    rest_index_ = store->ints("rest_index", size_t(3 * cells + 1),
                              [&](std::span<int32_t> d) { std::copy(index.begin(), index.end(), d.begin()); });
    rest_entries_ = store->words("rest_entries", size_t(std::max(0, rest_index_[size_t(3 * cells)])),
                                 [&](std::span<uint32_t> d) { std::copy(entries.begin(), entries.end(), d.begin()); });
  }
  // What the kernel will index is checked (a damaged blob is refused, not a wild read), and
  // the rest's work in row steps counted.
  auto bad = [&](const char* why) {
    if (store) store->corrupt(std::string("QConv: the stored rest of the split weights ") + why);
    throw std::logic_error(std::string("QConv: the rest of the split weights ") + why);
  };
  const int64_t words = int64_t(rest_entries_.size());
  rest_rows_ = 0;
  for (int64_t c = 0; c < cells; ++c) {
    const int64_t at = rest_index_[size_t(3 * c)], na = rest_index_[size_t(3 * c + 1)], nb = rest_index_[size_t(3 * c + 2)];
    const int64_t end = at + 2 * (na * kQRestRowsA + nb * (kQMR - kQRestRowsA)), q0 = (c % blocks) * kcb;
    if (at < 0 || na < 0 || nb < 0 || end > words) bad("lies outside its entries");
    for (int64_t e = at; e < end; e += 2)
      if (int64_t(rest_entries_[size_t(e)]) < q0 || int64_t(rest_entries_[size_t(e)]) >= std::min(KQ, q0 + kcb))
        bad("reads outside its K block");
    rest_rows_ += na * kQRestRowsA + nb * (kQMR - kQRestRowsA);
  }
}

void QConv::keep_order(QPackedStore* store, std::vector<int32_t> order) {
  if (!store) {
    k_order_own_ = std::move(order);
    k_order_ = k_order_own_;
    return;
  }
  k_order_ = store->ints("q_k_order", size_t(k_), [&](std::span<int32_t> d) { std::copy(order.begin(), order.end(), d.begin()); });
  std::vector<bool> seen(static_cast<size_t>(k_), false);  // im2col reads tap k_order_[j]: a permutation of [0, K)
  for (int32_t k : k_order_) {
    if (k < 0 || k >= k_ || seen[size_t(k)]) store->corrupt("QConv: the stored tap order is not a permutation of the taps");
    seen[size_t(k)] = true;
  }
}

std::string QConv::describe() const {
  if (!quads_) return std::string("int16 pairs ") + q_kernel_name();
  if (nhwc_) return "u8 x s8 channels-last, output channels along the lanes (avx512vnni-6x64 vpdpbusd, pixels broadcast)";
  const std::string winograd = winograd_.empty() ? "" : ", exact Winograd F(4x4, 3x3) in int16 pairs (avx512vnni-6x64 vpdpwssd)";
  if (channel_quads_) return std::string("u8 x s8 channel quads ") + q_conv_kernel_name() + winograd;
  if (rest_index_.empty()) return std::string("u8 x s8 quads ") + q_conv_kernel_name() + winograd;
  const int64_t dense = q_tiles(oc_) * q_quads(k_) * kQMR;
  return "u8 x s8 split quads, rest " + std::to_string(dense ? (100 * rest_rows_ + dense / 2) / dense : 0) +
         "% of the steps, " + q_conv_kernel_name();
}

std::string QMatMul::describe() const {
  return std::string(quads_ ? "u8 x s8 quads " : "int16 pairs ") + q_kernel_name();
}

QMatMul::QMatMul(QType a_type, int32_t a_zp, QType b_type, const void* b, int64_t K, int64_t N, std::vector<int32_t> b_zp,
                 QOutput out, QPackedStore* store)
    : a_type_(a_type), b_type_(b_type), a_zp_(a_zp), K_(K), N_(N), out_(std::move(out)) {
  check_zero_point(a_zp, "QMatMul: a zero point");
  if (int64_t(b_zp.size()) != N) throw std::invalid_argument("QMatMul: b_zp needs one value per column");
  for (int32_t z : b_zp) check_zero_point(z, "QMatMul: b zero point");
  ep_ = std::make_unique<QEpilogue>(q_epilogue(out_, N));
  const int32_t b_add = b_type == QType::U8 ? -128 : 0;
  aq_zp_ = a_zp + (a_type == QType::S8 ? 128 : 0);
  quads_ = q_tile_wide_dpbusd(1, false) && aq_zp_ >= 0 && aq_zp_ <= 255 &&
           std::all_of(b_zp.begin(), b_zp.end(), [&](int32_t z) { return z + b_add >= -128 && z + b_add <= 127; });
  declare(store, quads_ ? 1 : 0, N, K, a_zp, a_type, b_type);
  if (quads_) {
    if (std::any_of(b_zp.begin(), b_zp.end(), [&](int32_t z) { return z + b_add != 0; }))
      for (int32_t z : b_zp) bq_zp_.push_back(z + b_add);
    packed_b_ = packed_words(store, "packed_b", size_t(q_panels(N) * kQNR * q_quads(K)), own_, [&](std::span<uint32_t> dst) {
      if (b_type == QType::U8) q_pack_b_quads(static_cast<const uint8_t*>(b), N, b_add, K, N, dst.data());
      else q_pack_b_quads(static_cast<const int8_t*>(b), N, b_add, K, N, dst.data());
    });
    corrected_bias(store, *ep_, aq_zp_, bq_zp_, N, [&](int64_t n, int64_t k) {
      return b_type == QType::U8 ? int32_t(static_cast<const uint8_t*>(b)[k * N + n]) + b_add
                                 : int32_t(static_cast<const int8_t*>(b)[k * N + n]);
    }, K);
    return;
  }
  packed_b_ = packed_words(store, "packed_b", size_t(q_panels(N) * kQNR * q_pairs(K)), own_, [&](std::span<uint32_t> dst) {
    if (b_type == QType::U8) q_pack_b(static_cast<const uint8_t*>(b), N, b_zp.data(), K, N, dst.data());
    else q_pack_b(static_cast<const int8_t*>(b), N, b_zp.data(), K, N, dst.data());
  });
}
QMatMul::~QMatMul() = default;

void QMatMul::run(int64_t M, const void* a, void* y, ThreadPool* pool) const {
  if (M * N_ == 0) return;
  const int64_t KP = quads_ ? q_quads(K_) : q_pairs(K_), tiles = q_tiles(M), panels = q_panels(N_);
  uint32_t* pa = reinterpret_cast<uint32_t*>(scratch_floats(kScratchA, size_t(tiles * kQMR * KP)));
  std::vector<int32_t> sums(bq_zp_.empty() ? 0 : size_t(M));
  int32_t* row_sums = sums.empty() ? nullptr : sums.data();
  const QZpTerm zp_term{nullptr, row_sums, bq_zp_.empty() ? nullptr : bq_zp_.data()};
  const int32_t zp = a_zp_;
  const int pack_parts = threads_for(pool, double(M) * double(K_), 1 << 17);
  parallel_ranges(pool, tiles, pack_parts, [&](int64_t t0, int64_t t1) {
    const int64_t m0 = t0 * kQMR, m1 = std::min(M, t1 * kQMR);
    uint32_t* d = pa + t0 * kQMR * KP;
    if (quads_) {  // a' = a (+ 128 for int8 a) as uint8
      if (a_type_ == QType::U8) q_pack_a_quads(static_cast<const uint8_t*>(a) + m0 * K_, K_, 0, m1 - m0, K_, d);
      else q_pack_a_quads(static_cast<const int8_t*>(a) + m0 * K_, K_, 128, m1 - m0, K_, d);
      if (row_sums)  // sum_k a'(m, k), for the term of b's zero points
        for (int64_t m = m0; m < m1; ++m) {
          uint32_t sum = 0;
          if (a_type_ == QType::U8)
            for (int64_t k = 0; k < K_; ++k) sum += static_cast<const uint8_t*>(a)[m * K_ + k];
          else
            for (int64_t k = 0; k < K_; ++k) sum += uint32_t(static_cast<const int8_t*>(a)[m * K_ + k] + 128);
          row_sums[m] = int32_t(sum);
        }
    } else if (a_type_ == QType::U8) {
      q_pack_a(static_cast<const uint8_t*>(a) + m0 * K_, K_, &zp, false, m1 - m0, K_, d);
    } else {
      q_pack_a(static_cast<const int8_t*>(a) + m0 * K_, K_, &zp, false, m1 - m0, K_, d);
    }
  });
  const uint32_t* pb = packed_b_.data();
  auto b_slice = [&](int64_t p, int64_t k0, int64_t, uint32_t*) { return pb + (p * KP + k0) * kQNR; };
  const int64_t N = N_;
  auto y_at = [N](int64_t row, int64_t n0) { return row * N + n0; };
  auto rect = [&](int64_t ta, int64_t tb, int64_t pa0, int64_t pa1) {
    q_gemm_rect(ta * kQMR, std::min(M, tb * kQMR), N, KP, pa, pa0, pa1, b_slice, *ep_, false, y_at, N, y,
                quads_ ? 2 : 0, zp_term);
  };
  const int t = threads_for(pool, double(M) * double(N) * double(K_));
  if (t <= 1) {
    rect(0, tiles, 0, panels);
    return;
  }
  // A grid over (tiles, panels), several pieces per thread so dynamic claiming evens them
  // out; split N first (disjoint weight panels), as the float GEMM.
  const int64_t want = int64_t(t) * 4;
  const int64_t tn = std::min(panels, want);
  int64_t tm = std::min(tiles, std::max<int64_t>(1, (want + tn - 1) / tn));
  if (tn * tm < t) tm = std::min(tiles, (int64_t(t) + tn - 1) / tn);
  parallel_for(pool, tn * tm, [&](int64_t i) {
    int64_t p0, p1, t0, t1;
    split_range(panels, tn, i % tn, p0, p1);
    split_range(tiles, tm, i / tn, t0, t1);
    rect(t0, t1, p0, p1);
  });
}

}  // namespace nxrt::cpu
