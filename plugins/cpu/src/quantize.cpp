#include "quantize.hpp"

#include <algorithm>

namespace nxrt::cpu {

template <typename Q>
void quantize_linear(const float* x, int64_t n, const float* scale, const Q* zero_point, const QuantAxis& g, Q* y) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = g.at(i);
    y[i] = saturate_round<Q>(std::nearbyint(x[i] / scale[k]) + float(zero_point ? zero_point[k] : 0));
  }
}

template <typename T>
void dequantize_linear(const T* x, int64_t n, const float* scale, const T* zero_point, const QuantAxis& g, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = g.at(i);
    y[i] = float(int64_t(x[i]) - (zero_point ? int64_t(zero_point[k]) : 0)) * scale[k];
  }
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

template void quantize_linear<uint8_t>(const float*, int64_t, const float*, const uint8_t*, const QuantAxis&, uint8_t*);
template void quantize_linear<int8_t>(const float*, int64_t, const float*, const int8_t*, const QuantAxis&, int8_t*);
#define NXRT_DEQUANTIZE(T) template void dequantize_linear<T>(const T*, int64_t, const float*, const T*, const QuantAxis&, float*);
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
