// Window functions (HannWindow, HammingWindow, BlackmanWindow), evaluated in
// double and rounded once to the output type.
#pragma once
#include <cstdint>

namespace nxrt::cpu {

enum class WindowKind { Hann, Hamming, Blackman };

// y[i], i < size, of the window over N = size (periodic) or size - 1
// (symmetric) intervals: Hann sin^2(pi i / N), Hamming 25/46 - 21/46 cos(2 pi
// i / N), Blackman 0.42 - 0.5 cos(2 pi i / N) + 0.08 cos(4 pi i / N).
// T: float or double.
template <typename T>
void window(WindowKind kind, int64_t size, bool periodic, T* y);

}  // namespace nxrt::cpu
