// Signal-processing math for DFT, STFT and MelWeightMatrix (opset 17), on
// real (last dim 1) or complex (last dim 2, interleaved re/im) data. The
// transforms run in double (fft.hpp) and round once to T (float or double).
#pragma once
#include <cstdint>
#include <vector>

namespace nxrt::cpu {

// DFT along one axis. The input is viewed as [outer, n_in, inner, comps_in]
// (comps_in 1: real, 2: complex); each of the outer*inner signals is cut or
// zero-padded to n_fft points, transformed (inverse: +i exponent and 1/n_fft)
// and its first n_out bins written to y viewed as [outer, n_out, inner, 2].
template <typename T>
void dft_axis(const T* x, T* y, int64_t outer, int64_t n_in, int64_t inner, int comps_in, int64_t n_fft, int64_t n_out,
              bool inverse);

// STFT: x is [batch, length, comps_in]; frame f starts at f*step and has
// frame_length points, multiplied by window (frame_length values, or nullptr
// for a rectangular window). y is [batch, frames, bins, 2] with the first
// `bins` bins of each frame's forward DFT; frames = (length - frame_length) /
// step + 1.
template <typename T>
void stft(const T* x, const T* window, T* y, int64_t batch, int64_t length, int comps_in, int64_t step, int64_t frame_length,
          int64_t frames, int64_t bins);

// The [dft_length / 2 + 1, num_mel_bins] matrix of triangular mel filters
// exactly as ONNX defines it (reference of opset 17): num_mel_bins + 2 edges
// spread evenly on the mel scale (2595 log10(1 + f / 700)) between the lower
// and upper edge with a step of (high - low) / (num_mel_bins + 2), each edge
// mapped to the spectrogram bin floor((dft_length + 1) f / sample_rate); the
// filter i rises linearly from edge i to edge i+1 and falls to edge i+2.
// Entries of rows past the last bin are dropped. Row-major, in double.
std::vector<double> mel_weight_matrix(int64_t num_mel_bins, int64_t dft_length, int64_t sample_rate, double lower_edge_hertz,
                                      double upper_edge_hertz);

}  // namespace nxrt::cpu
