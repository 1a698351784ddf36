// MelWeightMatrix against a direct evaluation of each triangle, and the ONNX
// example (test_melweightmatrix) worked out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "signal.hpp"

using namespace nxrt::cpu;

namespace {
// Bin of the mel edge e (0..bins+1), straight from the definition.
int64_t edge_bin(int64_t e, int64_t bins, int64_t dft_length, int64_t rate, double lo, double hi) {
  const double mlo = 2595 * std::log10(1 + lo / 700), mhi = 2595 * std::log10(1 + hi / 700);
  const double mel = mlo + double(e) * (mhi - mlo) / double(bins + 2);
  const double hz = 700 * (std::pow(10.0, mel / 2595) - 1);
  return int64_t(std::floor(double(dft_length + 1) * hz / double(rate)));
}
// Weight of spectrogram row j in filter i: rising edge [l, c], falling edge [c, r) (which wins at c).
double triangle(int64_t j, int64_t l, int64_t c, int64_t r) {
  if (j >= c && j < r) return double(r - j) / double(r - c);
  if (l == c) return j == c ? 1.0 : 0.0;
  if (j >= l && j <= c) return double(j - l) / double(c - l);
  return 0.0;
}
}  // namespace

TEST_CASE("mel weight matrix: each entry equals its triangle") {
  struct Case { int64_t bins, dft, rate; double lo, hi; };
  for (auto c : {Case{8, 16, 8192, 0, 4096}, Case{10, 64, 16000, 20, 8000}, Case{40, 512, 16000, 0, 8000}, Case{5, 33, 22050, 300, 5000}}) {
    const auto m = mel_weight_matrix(c.bins, c.dft, c.rate, c.lo, c.hi);
    const int64_t rows = c.dft / 2 + 1;
    REQUIRE(m.size() == size_t(rows * c.bins));
    for (int64_t i = 0; i < c.bins; ++i) {
      const int64_t l = edge_bin(i, c.bins, c.dft, c.rate, c.lo, c.hi), ce = edge_bin(i + 1, c.bins, c.dft, c.rate, c.lo, c.hi),
                    r = edge_bin(i + 2, c.bins, c.dft, c.rate, c.lo, c.hi);
      for (int64_t j = 0; j < rows; ++j) {
        INFO("bins " << c.bins << " dft " << c.dft << " row " << j << " filter " << i);
        CHECK(m[size_t(j * c.bins + i)] == doctest::Approx(triangle(j, l, ce, r)).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("mel weight matrix: the ONNX example (8 bins, dft 16, 8192 Hz, 0..4096 Hz)") {
  const auto m = mel_weight_matrix(8, 16, 8192, 0, 4096);
  // The 10 edges fall on bins 0,0,0,1,1,2,3,4,5,6: filters 0 and 1 peak at row 0, filters 2 and 3 at
  // row 1, filter i >= 4 at row i - 2; rows 6..8 lie beyond every filter.
  const double want[9][8] = {{1, 1, 0, 0, 0, 0, 0, 0}, {0, 0, 1, 1, 0, 0, 0, 0}, {0, 0, 0, 0, 1, 0, 0, 0},
                             {0, 0, 0, 0, 0, 1, 0, 0}, {0, 0, 0, 0, 0, 0, 1, 0}, {0, 0, 0, 0, 0, 0, 0, 1},
                             {0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}};
  for (int r = 0; r < 9; ++r)
    for (int c = 0; c < 8; ++c) {
      INFO("row " << r << " col " << c);
      CHECK(m[size_t(r * 8 + c)] == want[r][c]);
    }
}
