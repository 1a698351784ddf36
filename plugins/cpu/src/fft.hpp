// Discrete Fourier transforms for DFT and STFT: radix-2 for power-of-two
// lengths, Bluestein (a chirp convolution through a power-of-two FFT) for
// every other length, all in double so one float rounding happens at the end.
#pragma once
#include <complex>
#include <cstddef>
#include <vector>

namespace nxrt::cpu {

using cplx = std::complex<double>;

// A transform of one length, reusable for many signals (twiddles and the
// Bluestein chirp computed once). Immutable after construction: concurrent
// transform() calls on one plan are safe.
class FftPlan {
 public:
  explicit FftPlan(size_t n);
  size_t size() const { return n_; }
  // out[k] = sum_j in[j] exp(-+2 pi i j k / n) (minus: forward, plus: inverse),
  // inverse also divides by n. `in` and `out` may be the same array.
  void transform(const cplx* in, cplx* out, bool inverse) const;

 private:
  size_t n_ = 0;
  size_t m_ = 0;                 // power-of-two length actually transformed
  std::vector<cplx> twiddle_;    // exp(-2 pi i k / m), k < m / 2
  std::vector<cplx> chirp_;      // Bluestein only: exp(-pi i k^2 / n), k < n
  std::vector<cplx> chirp_fft_;  // Bluestein only: FFT of the conjugate chirp, length m

  void radix2(cplx* a, bool inverse) const;  // in place, length m, unscaled
};

// The O(n^2) definition, for tests.
void naive_dft(const cplx* in, cplx* out, size_t n, bool inverse);

}  // namespace nxrt::cpu
