#include "quantize.hpp"

#include <algorithm>
#include <type_traits>

#include "cpu_info.hpp"

namespace nxrt::cpu {
namespace {

// Calls run(begin, count, k) over the runs of elements that share parameter k: the whole
// tensor per tensor, else blocks of g.inner; false (nothing done) when those are too short
// for the vector runs to pay.
template <typename F>
bool over_runs(int64_t n, const QuantAxis& g, F&& run) {
  if (!g.per_axis) {
    run(int64_t(0), n, int64_t(0));
    return true;
  }
  if (g.inner < 32) return false;
  for (int64_t b = 0; b < n; b += g.inner) run(b, std::min(g.inner, n - b), g.at(b));
  return true;
}

// fn(i0, i1) over [0, n) in pieces across `pool`: per tensor at 64-element boundaries, per axis
// at whole periods of the axis (len * inner elements), so that every piece starts at parameter 0.
template <typename F>
void in_pieces(ThreadPool* pool, int64_t n, const QuantAxis& g, F&& fn) {
  const int64_t unit = g.per_axis ? g.len * g.inner : 64, units = (n + unit - 1) / unit;
  parallel_ranges(pool, units, threads_for(pool, double(n)),
                  [&](int64_t u0, int64_t u1) { fn(u0 * unit, std::min(n, u1 * unit)); });
}

template <typename Q>
void quantize_piece(const float* x, int64_t n, const float* scale, const Q* zero_point, const QuantAxis& g, Q* y) {
  static const QuantizeRun<Q> fast = avx512bw_active()            ? quantize_run_avx512<Q>()
                                     : active_isa() >= Isa::avx2 ? quantize_run_avx2<Q>()
                                                                 : nullptr;
  if (fast && over_runs(n, g, [&](int64_t b, int64_t c, int64_t k) {
        fast(x + b, c, scale[k], zero_point ? int32_t(zero_point[k]) : 0, y + b);
      }))
    return;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = g.at(i);
    y[i] = saturate_round<Q>(std::nearbyint(x[i] / scale[k]) + float(zero_point ? zero_point[k] : 0));
  }
}

template <typename T>
void dequantize_piece(const T* x, int64_t n, const float* scale, const T* zero_point, const QuantAxis& g, float* y) {
  if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
    static const DequantizeRun<T> fast = active_isa() >= Isa::avx2 ? dequantize_run_avx2<T>() : nullptr;
    if (fast && over_runs(n, g, [&](int64_t b, int64_t c, int64_t k) {
          fast(x + b, c, scale[k], zero_point ? int32_t(zero_point[k]) : 0, y + b);
        }))
      return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = g.at(i);
    y[i] = float(int64_t(x[i]) - (zero_point ? int64_t(zero_point[k]) : 0)) * scale[k];
  }
}

}  // namespace

template <typename Q>
void quantize_linear(const float* x, int64_t n, const float* scale, const Q* zero_point, const QuantAxis& g, Q* y,
                     ThreadPool* pool) {
  in_pieces(pool, n, g, [&](int64_t i0, int64_t i1) { quantize_piece(x + i0, i1 - i0, scale, zero_point, g, y + i0); });
}

template <typename T>
void dequantize_linear(const T* x, int64_t n, const float* scale, const T* zero_point, const QuantAxis& g, float* y,
                       ThreadPool* pool) {
  in_pieces(pool, n, g, [&](int64_t i0, int64_t i1) { dequantize_piece(x + i0, i1 - i0, scale, zero_point, g, y + i0); });
}

DynamicQuant dynamic_quant_params(const float* x, int64_t n) {
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  DynamicQuant q;
  q.scale = (hi - lo) / 255.f;
  q.zero_point = q.scale == 0.f ? uint8_t(0) : saturate_round<uint8_t>(0.f - lo / q.scale);
  return q;
}

void dynamic_quantize_linear(const float* x, int64_t n, const DynamicQuant& q, uint8_t* y) {
  const float scale = q.scale;
  const uint8_t zp = q.zero_point;
  for (int64_t i = 0; i < n; ++i) y[i] = scale == 0.f ? zp : saturate_round<uint8_t>(std::nearbyint(x[i] / scale) + float(zp));
}

template void quantize_linear<uint8_t>(const float*, int64_t, const float*, const uint8_t*, const QuantAxis&, uint8_t*,
                                       ThreadPool*);
template void quantize_linear<int8_t>(const float*, int64_t, const float*, const int8_t*, const QuantAxis&, int8_t*,
                                      ThreadPool*);
#define NXRT_DEQUANTIZE(T) \
  template void dequantize_linear<T>(const T*, int64_t, const float*, const T*, const QuantAxis&, float*, ThreadPool*);
NXRT_DEQUANTIZE(int8_t)
NXRT_DEQUANTIZE(uint8_t)
NXRT_DEQUANTIZE(int16_t)
NXRT_DEQUANTIZE(uint16_t)
NXRT_DEQUANTIZE(int32_t)
NXRT_DEQUANTIZE(uint32_t)
NXRT_DEQUANTIZE(int64_t)
NXRT_DEQUANTIZE(uint64_t)
#undef NXRT_DEQUANTIZE

}  // namespace nxrt::cpu
