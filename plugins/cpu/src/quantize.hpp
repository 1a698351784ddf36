// Linear quantization (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear):
// y = saturate(round_half_even(x / scale) + zero_point) and
// x = (q - zero_point) * scale, per tensor or per axis.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "thread_pool.hpp"

namespace nxrt::cpu {

// Which scale / zero point element i uses: per tensor (always 0) or per axis
// ((i / inner) % len for an axis of len elements with inner elements after it).
struct QuantAxis {
  int64_t inner = 1, len = 1;
  bool per_axis = false;
  int64_t at(int64_t i) const { return per_axis ? (i / inner) % len : 0; }
};

// Rounds half to even and saturates to Q (NaN gives Q's lowest).
template <typename Q>
Q saturate_round(float v) {
  const float r = std::nearbyint(v);
  if (!(r >= float(std::numeric_limits<Q>::lowest()))) return std::numeric_limits<Q>::lowest();
  if (r > float(std::numeric_limits<Q>::max())) return std::numeric_limits<Q>::max();
  return Q(r);
}

// y[i] = saturate(round(x[i] / scale[k]) + zero_point[k]), k = g.at(i);
// zero_point may be null (0). Q: uint8_t or int8_t. With a pool, large tensors in pieces
// across its threads (a model's input quantize, 150K floats, took 29 us on one).
template <typename Q>
void quantize_linear(const float* x, int64_t n, const float* scale, const Q* zero_point, const QuantAxis& g, Q* y,
                     ThreadPool* pool = nullptr);

// y[i] = (x[i] - zero_point[k]) * scale[k], k = g.at(i); zero_point may be
// null (0). T: any integer type. pool: as for quantize_linear.
template <typename T>
void dequantize_linear(const T* x, int64_t n, const float* scale, const T* zero_point, const QuantAxis& g, float* y,
                       ThreadPool* pool = nullptr);

// DequantizeLinear(a) + DequantizeLinear(b) -> Add -> [clamp] -> [QuantizeLinear] in one pass
// (the QDQ residual Add): the nodes' float operations in their order, so bit-identical to
// dequantize_linear twice, a float add, std::min(std::max(v, lo), hi) and quantize_linear.
struct QdqAddParams {
  float a_scale = 1.f, b_scale = 1.f, y_scale = 1.f;
  int32_t a_zp = 0, b_zp = 0, y_zp = 0;
  bool clamp = false;
  float lo = 0.f, hi = 0.f;
};
// A, B: uint8_t or int8_t; Y: uint8_t, int8_t (quantized with y_scale, y_zp) or float.
// Vectorised (quantize_add.cpp) on AVX-512 BW or AVX2 per active_isa(), else scalar.
template <typename A, typename B, typename Y>
void qdq_add(const A* a, const B* b, Y* y, int64_t n, const QdqAddParams& p);

// DynamicQuantizeLinear: uint8 scale and zero point covering [min(x, 0),
// max(x, 0)], then y quantized with them (all zero_point when scale is 0).
struct DynamicQuant {
  float scale = 0.f;
  uint8_t zero_point = 0;
};
// --- internal: runs of elements sharing one scale and zero point, by ISA (quantize_avx2.cpp,
// quantize_avx512.cpp; null when not compiled for x86). quantize_linear / dequantize_linear use
// them on AVX2 (the AVX-512 BW quantize run where that is active).
template <typename Q>
using QuantizeRun = void (*)(const float* x, int64_t n, float scale, int32_t zero_point, Q* y);
template <typename T>
using DequantizeRun = void (*)(const T* x, int64_t n, float scale, int32_t zero_point, float* y);
template <typename Q>
QuantizeRun<Q> quantize_run_avx2();    // Q: uint8_t, int8_t
template <typename Q>
QuantizeRun<Q> quantize_run_avx512();  // Q: uint8_t, int8_t
template <typename T>
DequantizeRun<T> dequantize_run_avx2();  // T: uint8_t, int8_t

DynamicQuant dynamic_quant_params(const float* x, int64_t n);
void dynamic_quantize_linear(const float* x, int64_t n, const DynamicQuant& q, uint8_t* y);

}  // namespace nxrt::cpu
