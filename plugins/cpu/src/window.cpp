#include "window.hpp"

#include <cmath>

namespace nxrt::cpu {

template <typename T>
void window(WindowKind kind, int64_t size, bool periodic, T* y) {
  const double n1 = double(periodic ? size : size - 1);
  for (int64_t i = 0; i < size; ++i) {
    const double x = 2.0 * M_PI * double(i) / n1;
    double v = 0;
    switch (kind) {
      case WindowKind::Hann: v = std::pow(std::sin(M_PI * double(i) / n1), 2); break;
      case WindowKind::Hamming: v = 25.0 / 46.0 - (1.0 - 25.0 / 46.0) * std::cos(x); break;
      case WindowKind::Blackman: v = 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2 * x); break;
    }
    y[i] = T(v);
  }
}

template void window<float>(WindowKind, int64_t, bool, float*);
template void window<double>(WindowKind, int64_t, bool, double*);

}  // namespace nxrt::cpu
