#include "signal.hpp"

#include <algorithm>
#include <cmath>

#include "fft.hpp"

namespace nxrt::cpu {

template <typename T>
void dft_axis(const T* x, T* y, int64_t outer, int64_t n_in, int64_t inner, int comps_in, int64_t n_fft, int64_t n_out,
              bool inverse) {
  const FftPlan plan{static_cast<size_t>(n_fft)};
  std::vector<cplx> buf(static_cast<size_t>(n_fft));
  const int64_t n_copy = std::min(n_in, n_fft);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::fill(buf.begin(), buf.end(), cplx(0, 0));
      for (int64_t j = 0; j < n_copy; ++j) {
        const T* p = x + ((o * n_in + j) * inner + i) * comps_in;
        buf[size_t(j)] = cplx(double(p[0]), comps_in == 2 ? double(p[1]) : 0.0);
      }
      plan.transform(buf.data(), buf.data(), inverse);
      for (int64_t k = 0; k < n_out; ++k) {
        T* q = y + ((o * n_out + k) * inner + i) * 2;
        q[0] = T(buf[size_t(k)].real());
        q[1] = T(buf[size_t(k)].imag());
      }
    }
}

template <typename T>
void stft(const T* x, const T* window, T* y, int64_t batch, int64_t length, int comps_in, int64_t step, int64_t frame_length,
          int64_t frames, int64_t bins) {
  const FftPlan plan{static_cast<size_t>(frame_length)};
  std::vector<cplx> buf(static_cast<size_t>(frame_length));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t j = 0; j < frame_length; ++j) {
        const T* p = x + (b * length + f * step + j) * comps_in;
        const double w = window ? double(window[j]) : 1.0;
        buf[size_t(j)] = cplx(double(p[0]) * w, comps_in == 2 ? double(p[1]) * w : 0.0);
      }
      plan.transform(buf.data(), buf.data(), false);
      for (int64_t k = 0; k < bins; ++k) {
        T* q = y + ((b * frames + f) * bins + k) * 2;
        q[0] = T(buf[size_t(k)].real());
        q[1] = T(buf[size_t(k)].imag());
      }
    }
}

std::vector<double> mel_weight_matrix(int64_t num_mel_bins, int64_t dft_length, int64_t sample_rate, double lower_edge_hertz,
                                      double upper_edge_hertz) {
  const int64_t rows = dft_length / 2 + 1;
  std::vector<double> out(size_t(rows * num_mel_bins), 0.0);
  auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double low = to_mel(lower_edge_hertz), high = to_mel(upper_edge_hertz);
  const double step = (high - low) / double(num_mel_bins + 2);
  std::vector<int64_t> edge(size_t(num_mel_bins + 2));
  for (size_t i = 0; i < edge.size(); ++i) {
    const double hz = 700.0 * (std::pow(10.0, (double(i) * step + low) / 2595.0) - 1.0);
    edge[i] = int64_t(std::floor(double(dft_length + 1) * hz / double(sample_rate)));
  }
  auto put = [&](int64_t row, int64_t col, double v) {
    if (row >= 0 && row < rows) out[size_t(row * num_mel_bins + col)] = v;
  };
  for (int64_t i = 0; i < num_mel_bins; ++i) {
    const int64_t left = edge[size_t(i)], center = edge[size_t(i + 1)], right = edge[size_t(i + 2)];
    if (center == left) put(center, i, 1.0);
    else
      for (int64_t j = left; j <= center; ++j) put(j, i, double(j - left) / double(center - left));
    if (right > center)
      for (int64_t j = center; j < right; ++j) put(j, i, double(right - j) / double(right - center));
  }
  return out;
}

template void dft_axis<float>(const float*, float*, int64_t, int64_t, int64_t, int, int64_t, int64_t, bool);
template void dft_axis<double>(const double*, double*, int64_t, int64_t, int64_t, int, int64_t, int64_t, bool);
template void stft<float>(const float*, const float*, float*, int64_t, int64_t, int, int64_t, int64_t, int64_t, int64_t);
template void stft<double>(const double*, const double*, double*, int64_t, int64_t, int, int64_t, int64_t, int64_t, int64_t);

}  // namespace nxrt::cpu
