#include "random.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>
#include <vector>

namespace nxrt::cpu {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() {
  const uint64_t r = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return r;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
  has_spare_ = true;
  return r * std::cos(2.0 * std::numbers::pi * u2);
}

uint64_t seed_from_float(float seed) {
  uint32_t bits;
  std::memcpy(&bits, &seed, 4);
  uint64_t x = 0x5EEDF10A7ull ^ bits;
  return splitmix64(x);
}

uint64_t seed_from_int(int64_t seed) {
  uint64_t x = 0x5EED17ull ^ uint64_t(seed);
  return splitmix64(x);
}

uint64_t fresh_seed() {
  static const uint64_t base = [] {
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ rd() ^ uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  static std::atomic<uint64_t> counter{0};
  uint64_t x = base + counter.fetch_add(1, std::memory_order_relaxed) * 0xD1B54A32D192ED03ull;
  return splitmix64(x);
}

template <typename T>
void fill_uniform(Rng& g, T* y, int64_t n, double low, double high) {
  const T top = T(high);
  for (int64_t i = 0; i < n; ++i) {
    T v = T(low + (high - low) * g.uniform());
    if (v >= top) v = std::nextafter(top, T(low));  // rounding to T reached high
    y[i] = v;
  }
}

template <typename T>
void fill_normal(Rng& g, T* y, int64_t n, double mean, double scale) {
  for (int64_t i = 0; i < n; ++i) y[i] = T(mean + scale * g.normal());
}

template <typename I>
bool multinomial(Rng& g, const double* logits, int64_t classes, int64_t samples, I* out) {
  if (classes <= 0) return false;
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < classes; ++c) {
    if (std::isnan(logits[c])) return false;
    mx = std::max(mx, logits[c]);
  }
  std::vector<double> cdf(static_cast<size_t>(classes));
  double total = 0;
  for (int64_t c = 0; c < classes; ++c) {
    // An infinite maximum (+inf logits, or all -inf): the classes at it share the mass.
    total += std::isinf(mx) ? (logits[c] == mx ? 1.0 : 0.0) : std::exp(logits[c] - mx);
    cdf[size_t(c)] = total;
  }
  for (int64_t s = 0; s < samples; ++s) {
    const double u = g.uniform() * total;
    auto it = std::upper_bound(cdf.begin(), cdf.end(), u);
    int64_t c = int64_t(it - cdf.begin());
    if (c >= classes) c = classes - 1;
    // u rounded up to total: the last class of nonzero probability.
    while (c > 0 && cdf[size_t(c)] == cdf[size_t(c - 1)]) --c;
    out[s] = I(c);
  }
  return true;
}

void dropout_keep(Rng& g, double ratio, int64_t n, bool* keep) {
  for (int64_t i = 0; i < n; ++i) keep[i] = g.uniform() >= ratio;
}

template void fill_uniform<float>(Rng&, float*, int64_t, double, double);
template void fill_uniform<double>(Rng&, double*, int64_t, double, double);
template void fill_normal<float>(Rng&, float*, int64_t, double, double);
template void fill_normal<double>(Rng&, double*, int64_t, double, double);
template bool multinomial<int32_t>(Rng&, const double*, int64_t, int64_t, int32_t*);
template bool multinomial<int64_t>(Rng&, const double*, int64_t, int64_t, int64_t*);

}  // namespace nxrt::cpu
