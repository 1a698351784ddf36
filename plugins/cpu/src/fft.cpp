#include "fft.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace nxrt::cpu {

namespace {
bool is_pow2(size_t n) { return n && (n & (n - 1)) == 0; }
size_t next_pow2(size_t n) {
  size_t m = 1;
  while (m < n) m <<= 1;
  return m;
}
}  // namespace

FftPlan::FftPlan(size_t n) : n_(n) {
  if (n == 0) return;
  m_ = is_pow2(n) ? n : next_pow2(2 * n - 1);
  twiddle_.resize(m_ / 2);
  for (size_t k = 0; k < m_ / 2; ++k) twiddle_[k] = std::polar(1.0, -2.0 * std::numbers::pi * double(k) / double(m_));
  if (m_ == n_) return;
  // Bluestein: jk = (j^2 + k^2 - (k-j)^2) / 2, so X[k] = w[k] sum_j (x[j] w[j]) conj(w[k-j])
  // with w[k] = exp(-pi i k^2 / n): a convolution, done as a circular one of length m.
  chirp_.resize(n_);
  for (size_t k = 0; k < n_; ++k) {
    const size_t k2 = (k * k) % (2 * n_);  // exact angle reduction: exp(-pi i k^2 / n) has period 2n in k^2
    chirp_[k] = std::polar(1.0, -std::numbers::pi * double(k2) / double(n_));
  }
  chirp_fft_.assign(m_, cplx(0, 0));
  chirp_fft_[0] = std::conj(chirp_[0]);
  for (size_t k = 1; k < n_; ++k) chirp_fft_[k] = chirp_fft_[m_ - k] = std::conj(chirp_[k]);
  radix2(chirp_fft_.data(), false);
}

void FftPlan::radix2(cplx* a, bool inverse) const {
  const size_t m = m_;
  for (size_t i = 1, j = 0; i < m; ++i) {  // bit-reversal permutation
    size_t bit = m >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  for (size_t len = 2; len <= m; len <<= 1) {
    const size_t half = len / 2, step = m / len;
    for (size_t i = 0; i < m; i += len)
      for (size_t k = 0; k < half; ++k) {
        const cplx w = inverse ? std::conj(twiddle_[k * step]) : twiddle_[k * step];
        const cplx u = a[i + k], v = a[i + k + half] * w;
        a[i + k] = u + v;
        a[i + k + half] = u - v;
      }
  }
}

void FftPlan::transform(const cplx* in, cplx* out, bool inverse) const {
  if (n_ == 0) return;
  const double scale = inverse ? 1.0 / double(n_) : 1.0;
  if (m_ == n_) {
    if (out != in) std::copy(in, in + n_, out);
    radix2(out, inverse);
  } else {
    // The inverse transform is the conjugate of the forward one of the conjugate input.
    std::vector<cplx> a(m_, cplx(0, 0));
    for (size_t j = 0; j < n_; ++j) a[j] = (inverse ? std::conj(in[j]) : in[j]) * chirp_[j];
    radix2(a.data(), false);
    for (size_t k = 0; k < m_; ++k) a[k] *= chirp_fft_[k];
    radix2(a.data(), true);
    const double inv_m = 1.0 / double(m_);
    for (size_t k = 0; k < n_; ++k) {
      const cplx y = a[k] * inv_m * chirp_[k];
      out[k] = inverse ? std::conj(y) : y;
    }
  }
  if (inverse)
    for (size_t k = 0; k < n_; ++k) out[k] *= scale;
}

void naive_dft(const cplx* in, cplx* out, size_t n, bool inverse) {
  std::vector<cplx> y(n);
  const double sign = inverse ? 1.0 : -1.0;
  for (size_t k = 0; k < n; ++k) {
    cplx s(0, 0);
    for (size_t j = 0; j < n; ++j) s += in[j] * std::polar(1.0, sign * 2.0 * std::numbers::pi * double((j * k) % n) / double(n));
    y[k] = inverse ? s / double(n) : s;
  }
  std::copy(y.begin(), y.end(), out);
}

}  // namespace nxrt::cpu
