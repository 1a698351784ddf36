#include "gemm_int8.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "cpu_info.hpp"
#include "integer_linalg.hpp"
#include "quantize.hpp"

namespace nxrt::cpu {

template <typename T>
void q_pack_a(const T* a, int64_t lda, const int32_t* zp, bool zp_per_row, int64_t M, int64_t K, uint32_t* dst) {
  const int64_t KP = q_pairs(K), tiles = q_tiles(M);
  for (int64_t t = 0; t < tiles; ++t) {
    uint32_t* d = dst + t * kQMR * KP;
    for (int64_t r = 0; r < kQMR; ++r) {
      const int64_t m = t * kQMR + r;
      if (m >= M) {
        for (int64_t kp = 0; kp < KP; ++kp) d[kp * kQMR + r] = 0;
        continue;
      }
      const T* src = a + m * lda;
      const int32_t z = zp[zp_per_row ? m : 0];
      for (int64_t kp = 0; kp < K / 2; ++kp) d[kp * kQMR + r] = q_pair(int32_t(src[2 * kp]) - z, int32_t(src[2 * kp + 1]) - z);
      if (K % 2) d[(KP - 1) * kQMR + r] = q_pair(int32_t(src[K - 1]) - z, 0);
    }
  }
}

template <typename T>
void q_pack_b(const T* b, int64_t ldb, const int32_t* zp, int64_t K, int64_t N, uint32_t* dst) {
  const int64_t KP = q_pairs(K), panels = q_panels(N);
  for (int64_t p = 0; p < panels; ++p) {
    uint32_t* d = dst + p * kQNR * KP;
    const int64_t n0 = p * kQNR, cols = std::min(kQNR, N - n0);
    for (int64_t kp = 0; kp < KP; ++kp) {
      const T* r0 = b + 2 * kp * ldb + n0;
      const T* r1 = 2 * kp + 1 < K ? r0 + ldb : nullptr;
      for (int64_t j = 0; j < kQNR; ++j)
        d[kp * kQNR + j] = j >= cols ? 0u
                                     : q_pair(int32_t(r0[j]) - zp[n0 + j], r1 ? int32_t(r1[j]) - zp[n0 + j] : 0);
    }
  }
}

#define NXRT_Q_PACK(T)                                                                                      \
  template void q_pack_a<T>(const T*, int64_t, const int32_t*, bool, int64_t, int64_t, uint32_t*);          \
  template void q_pack_b<T>(const T*, int64_t, const int32_t*, int64_t, int64_t, uint32_t*);
NXRT_Q_PACK(uint8_t)
NXRT_Q_PACK(int8_t)
#undef NXRT_Q_PACK

QEpilogue q_epilogue(const QOutput& o, int64_t channels) {
  QEpilogue e;
  e.type = o.type;
  const size_t c = size_t(channels);
  auto bad = [&](const char* what, size_t n) {
    throw std::invalid_argument("QOutput: " + std::string(what) + " has " + std::to_string(n) + " values for " +
                                std::to_string(c) + " channels");
  };
  if (!o.bias.empty() && o.bias.size() != c) bad("bias", o.bias.size());
  e.bias = o.bias;
  if (o.type != QType::I32) {
    if (o.scale.size() == 1) e.scale.assign(c, o.scale[0]);
    else if (o.scale.size() == c) e.scale = o.scale;
    else bad("scale", o.scale.size());
  }
  if (o.type == QType::F32 || o.q_scale > 0.f) {
    if (!o.float_bias.empty() && o.float_bias.size() != c) bad("float_bias", o.float_bias.size());
    e.float_bias = o.float_bias;
  }
  e.zero_point = o.zero_point;
  e.lo = o.lo;
  e.hi = o.hi;
  e.flo = o.flo;
  e.fhi = o.fhi;
  e.q_scale = (o.type == QType::U8 || o.type == QType::S8) ? o.q_scale : 0.f;
  q_fast_path(e);
  return e;
}

void q_fast_path(QEpilogue& e) {
  e.fast_m.clear();
  e.fast_b.clear();
  e.fast_lim.clear();
  if (e.type != QType::U8 && e.type != QType::S8) return;
  const bool fq = e.q_scale > 0.f;
  // Normal-range operands keep every step's error relative (no subnormals, no overflow that
  // the exact path would not also saturate).
  if (fq && !(e.q_scale >= 0x1p-60f && e.q_scale <= 0x1p60f && !std::isnan(e.flo) && !std::isnan(e.fhi))) return;
  const double qs = fq ? double(e.q_scale) : 1.0;
  const bool fb = fq && !e.float_bias.empty();
  const size_t n = e.scale.size();
  std::vector<float> m(n), b(n, 0.f), lim(n);
  for (size_t c = 0; c < n; ++c) {
    const double mc = e.scale[c] / qs, bc = fb ? double(e.float_bias[c]) / qs : 0.0;
    if (!(mc == 0.0 || (std::fabs(mc) >= 0x1p-100 && std::fabs(mc) <= 0x1p100))) return;
    if (!(std::fabs(bc) <= 0x1p20)) return;
    m[c] = float(mc);
    b[c] = float(bc);
    lim[c] = float(0.5 - 0x1p-20 * (402.0 + std::fabs(bc)));
  }
  // The exact path's clamp to [flo, fhi] before the division is, by monotonicity, a clamp of
  // the quotient to [flo / q_scale, fhi / q_scale] as float divides them.
  float lo = fq ? std::max(-400.f, e.flo / e.q_scale) : -400.f, hi = fq ? std::min(400.f, e.fhi / e.q_scale) : 400.f;
  // Where one integer clamp [c_lo, c_hi] follows the rounding (the saturation, or with an integer
  // output the saturation met with [lo, hi]), it is folded in: clamp(round(q) + zp, c_lo, c_hi)
  // = round(clamp(q, c_lo - zp, c_hi - zp)) + zp for integer bounds, so the store writes the
  // rounded value as it is. Ranges that do not meet: no shortcut.
  const bool u8 = e.type == QType::U8;
  const int32_t q_lo = u8 ? 0 : -128, q_hi = u8 ? 255 : 127;
  const int32_t c_lo = fq ? q_lo : std::max(q_lo, e.lo), c_hi = fq ? q_hi : std::min(q_hi, e.hi);
  e.fast_two_clamps = c_lo > c_hi;  // integer output, [lo, hi] apart from the saturation
  if (!e.fast_two_clamps) {
    lo = std::max(lo, float(c_lo - e.zero_point));
    hi = std::min(hi, float(c_hi - e.zero_point));
    if (lo > hi) return;
  }
  e.fast_m = std::move(m);
  e.fast_b = std::move(b);
  e.fast_lim = std::move(lim);
  e.fast_lo = lo;
  e.fast_hi = hi;
}

// ------------------------------------------------------------ generic kernels

namespace {

void tile_generic(int64_t kcp, const uint32_t* a, const uint32_t* b, int32_t* acc, bool load) {
  uint32_t c[kQMR][kQNR];
  for (int64_t m = 0; m < kQMR; ++m)
    for (int64_t j = 0; j < kQNR; ++j) c[m][j] = load ? uint32_t(acc[m * kQNR + j]) : 0u;
  for (int64_t k = 0; k < kcp; ++k, a += kQMR, b += kQNR)
    for (int64_t m = 0; m < kQMR; ++m) {
      const int32_t a0 = int16_t(a[m] & 0xffff), a1 = int16_t(a[m] >> 16);
      for (int64_t j = 0; j < kQNR; ++j)
        c[m][j] += uint32_t(a0 * int32_t(int16_t(b[j] & 0xffff)) + a1 * int32_t(int16_t(b[j] >> 16)));
    }
  for (int64_t m = 0; m < kQMR; ++m)
    for (int64_t j = 0; j < kQNR; ++j) acc[m * kQNR + j] = int32_t(c[m][j]);
}

template <typename Q>
Q requant_clamped(int32_t v, size_t c, const QEpilogue& e) {
  const double scale = e.scale[c];
  if (e.q_scale > 0.f) {  // the float output, then QuantizeLinear
    float f = float(double(v) * scale);
    if (!e.float_bias.empty()) f += e.float_bias[c];
    f = std::min(std::max(f, e.flo), e.fhi);
    return saturate_round<Q>(std::nearbyint(f / e.q_scale) + float(e.zero_point));
  }
  const Q q = requantize<Q>(v, scale, e.zero_point);
  return Q(std::min<int32_t>(std::max<int32_t>(q, e.lo), e.hi));
}

// The scalar store (the same operations as q_store_channel in qlinear.cpp).
void store_generic(const QEpilogue& e, const int32_t* acc, int64_t r0, int64_t r1, int64_t cols, bool by_row,
                   int64_t ch0, void* y, int64_t ldy) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      const size_t c = size_t(by_row ? ch0 + r - r0 : ch0 + j);
      const int32_t a = acc[r * kQNR + j];
      const int32_t v = e.bias.empty() ? a : int32_t(uint32_t(a) + uint32_t(e.bias[c]));
      const int64_t at = (r - r0) * ldy + j;
      switch (e.type) {
        case QType::I32: static_cast<int32_t*>(y)[at] = v; break;
        case QType::F32: {
          float f = float(double(v) * e.scale[c]);
          if (!e.float_bias.empty()) f += e.float_bias[c];
          static_cast<float*>(y)[at] = std::min(std::max(f, e.flo), e.fhi);
          break;
        }
        case QType::U8: static_cast<uint8_t*>(y)[at] = requant_clamped<uint8_t>(v, c, e); break;
        case QType::S8: static_cast<int8_t*>(y)[at] = requant_clamped<int8_t>(v, c, e); break;
      }
    }
}

// Calls f(j, source offset) for the columns of every run.
template <typename F>
inline void for_run_columns(const QPanelRuns& runs, F&& f) {
  for (int r = 0; r < runs.n; ++r)
    for (int j = runs.col[r]; j < runs.col[r + 1]; ++j) f(j, runs.off[r] + int64_t(j - runs.col[r]) * runs.stride);
}

void pack_runs_generic(const int16_t* base, const int64_t* koff, int64_t K, const QPanelRuns& runs, int64_t k0,
                       int64_t kc, uint32_t* dst) {
  for (int64_t i = 0; i < kc; ++i) {
    const int64_t ka = 2 * (k0 + i);
    const int16_t* r0 = base + koff[ka];
    const int16_t* r1 = ka + 1 < K ? base + koff[ka + 1] : nullptr;
    uint32_t* d = dst + i * kQNR;
    if (runs.stride == 1 && r1) {  // unit stride: loops the compiler vectorises
      for (int r = 0; r < runs.n; ++r) {
        const int16_t* s0 = r0 + runs.off[r] - runs.col[r];
        const int16_t* s1 = r1 + runs.off[r] - runs.col[r];
        for (int j = runs.col[r]; j < runs.col[r + 1]; ++j) d[j] = q_pair(s0[j], s1[j]);
      }
    } else {
      for_run_columns(runs, [&](int j, int64_t o) { d[j] = q_pair(r0[o], r1 ? r1[o] : 0); });
    }
    for (int j = runs.col[runs.n]; j < kQNR; ++j) d[j] = 0;
  }
}

template <typename T>
void pack_runs8(const T* base, int32_t zp, const int64_t* koff, int64_t K, const QPanelRuns& runs, int64_t k0,
                int64_t kc, uint32_t* dst) {
  for (int64_t i = 0; i < kc; ++i) {
    const int64_t ka = 2 * (k0 + i);
    const T* r0 = base + koff[ka];
    const T* r1 = ka + 1 < K ? base + koff[ka + 1] : nullptr;
    uint32_t* d = dst + i * kQNR;
    for_run_columns(runs, [&](int j, int64_t o) { d[j] = q_pair(int32_t(r0[o]) - zp, r1 ? int32_t(r1[o]) - zp : 0); });
    for (int j = runs.col[runs.n]; j < kQNR; ++j) d[j] = 0;
  }
}

void pack_runs8_generic(const void* base, bool is_signed, int32_t zp, const int64_t* koff, int64_t K,
                        const QPanelRuns& runs, int64_t k0, int64_t kc, uint32_t* dst) {
  if (is_signed) pack_runs8(static_cast<const int8_t*>(base), zp, koff, K, runs, k0, kc, dst);
  else pack_runs8(static_cast<const uint8_t*>(base), zp, koff, K, runs, k0, kc, dst);
}

}  // namespace

QPackRunsFn q_pack_runs_generic() { return &pack_runs_generic; }
QPackRuns8Fn q_pack_runs8_generic() { return &pack_runs8_generic; }

QPackRunsFn q_pack_runs_active() {
  static const QPackRunsFn fn = [] {
    QPackRunsFn f = active_isa() >= Isa::avx512 ? q_pack_runs_avx512() : nullptr;
    if (!f && active_isa() >= Isa::avx2) f = q_pack_runs_avx2();
    return f ? f : q_pack_runs_generic();
  }();
  return fn;
}

QPackRuns8Fn q_pack_runs8_active() {
  static const QPackRuns8Fn fn = [] {
    const QPackRuns8Fn f = active_isa() >= Isa::avx512 ? q_pack_runs8_avx512() : nullptr;
    return f ? f : q_pack_runs8_generic();
  }();
  return fn;
}

QTileFn q_tile_generic() { return &tile_generic; }
QStoreFn q_store_generic() { return &store_generic; }

QTileFn q_tile_active() {
  static const QTileFn fn = [] {
    QTileFn f = active_isa() >= Isa::avx512 ? q_tile_vnni() : nullptr;
    if (!f && active_isa() >= Isa::avx2) f = q_tile_avx2();
    return f ? f : q_tile_generic();
  }();
  return fn;
}

QTileGroupFn q_tile_group_active(int nt) {
  static const bool vnni = active_isa() >= Isa::avx512 && q_tile_group_vnni(1);
  return vnni ? q_tile_group_vnni(nt) : nullptr;
}

QStoreFn q_store_active() {
  static const QStoreFn fn = [] {
    QStoreFn f = active_isa() >= Isa::avx512 ? q_store_avx512() : nullptr;
    if (!f && active_isa() >= Isa::avx2) f = q_store_avx2();
    return f ? f : q_store_generic();
  }();
  return fn;
}

const char* q_conv_kernel_name() { return q_tile_quads_avx2() ? "avx2-u8s8-6x16+rest" : q_kernel_name(); }

const char* q_kernel_name() {
  if (q_tile_wide_dpbusd(kQWide, true)) return "avx512vnni-u8s8-6x64";
  return q_tile_group_active(kQTileGroup) ? "avx512vnni-18x16" : q_tile_active() == q_tile_generic() ? "generic" : "avx2-6x16";
}

}  // namespace nxrt::cpu
