// Random number generation for RandomUniform(Like), RandomNormal(Like),
// Bernoulli, Multinomial and training Dropout: xoshiro256** seeded through
// splitmix64. A node with a seed draws the same stream on every run (so a
// kernel keeps no mutable state and concurrent runs stay safe); a node
// without one draws from fresh_seed(), different on every run and process.
#pragma once
#include <cstdint>

namespace nxrt::cpu {

class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  double uniform();                     // [0, 1), 53 random bits
  double normal();                      // mean 0, variance 1 (Box-Muller)
  bool bernoulli(double p) { return uniform() < p; }  // true with probability p in [0, 1]

 private:
  uint64_t s_[4];
  double spare_ = 0;  // Box-Muller makes normals in pairs
  bool has_spare_ = false;
};

// The stream of a node's `seed` attribute (float for the Random* ops and
// Bernoulli/Multinomial, int for Dropout): equal seeds give equal streams.
uint64_t seed_from_float(float seed);
uint64_t seed_from_int(int64_t seed);
// A seed never handed out before in this process, unpredictable across processes.
uint64_t fresh_seed();

// y[i] uniform in [low, high) (rounded to T, then kept below high); needs low < high.
template <typename T>
void fill_uniform(Rng& g, T* y, int64_t n, double low, double high);
// y[i] normal with the given mean and standard deviation `scale`.
template <typename T>
void fill_normal(Rng& g, T* y, int64_t n, double mean, double scale);
// out[s], s < samples: class indices drawn from the categorical distribution
// with probabilities softmax(logits[0..classes)) (unnormalised log-probabilities).
// out_of_range (a NaN logit, or classes == 0) returns false without drawing.
template <typename I>
bool multinomial(Rng& g, const double* logits, int64_t classes, int64_t samples, I* out);
// keep[i] true with probability 1 - ratio (ratio in [0, 1)).
void dropout_keep(Rng& g, double ratio, int64_t n, bool* keep);

}  // namespace nxrt::cpu
