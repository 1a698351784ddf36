#include "tfidf.hpp"

#include <algorithm>
#include <stdexcept>

namespace nxrt::cpu {

TfIdfPool::TfIdfPool(int64_t min_gram_length, int64_t max_gram_length, int64_t max_skip_count, TfIdfMode mode,
                     const std::vector<int64_t>& ngram_counts, const std::vector<int64_t>& ngram_indexes,
                     const std::vector<int64_t>& pool, const std::vector<float>& weights)
    : min_n_(min_gram_length), max_n_(max_gram_length), max_skip_(max_skip_count), mode_(mode) {
  if (min_n_ < 1 || max_n_ < min_n_) throw std::invalid_argument("min_gram_length must be >= 1 and <= max_gram_length");
  if (max_skip_ < 0) throw std::invalid_argument("max_skip_count must be >= 0");
  if (ngram_counts.empty()) throw std::invalid_argument("ngram_counts is empty");
  const int64_t levels = int64_t(ngram_counts.size());  // n-gram lengths held in the pool
  size_t g = 0;  // n-gram number in pool order
  for (int64_t k = 1; k <= levels; ++k) {
    const int64_t begin = ngram_counts[size_t(k - 1)];
    const int64_t end = k < levels ? ngram_counts[size_t(k)] : int64_t(pool.size());
    if (begin < 0 || end < begin || end > int64_t(pool.size()) || (end - begin) % k != 0)
      throw std::invalid_argument("ngram_counts do not split pool_int64s into whole n-grams");
    for (int64_t p = begin; p < end; p += k, ++g) {
      if (g >= ngram_indexes.size()) throw std::invalid_argument("ngram_indexes has fewer entries than the pool has n-grams");
      const int64_t col = ngram_indexes[g];
      if (col < 0) throw std::invalid_argument("ngram_indexes has a negative entry");
      column_[std::vector<int64_t>(pool.begin() + p, pool.begin() + p + k)] = col;
    }
  }
  if (g != ngram_indexes.size()) throw std::invalid_argument("ngram_indexes has more entries than the pool has n-grams");
  for (auto c : ngram_indexes) out_size_ = std::max(out_size_, c + 1);
  if (!weights.empty() && int64_t(weights.size()) < out_size_)
    throw std::invalid_argument("weights has fewer entries than output columns");
  weights_ = weights;
}

void TfIdfPool::row(const int64_t* tokens, int64_t len, float* out) const {
  std::vector<int64_t> count(size_t(out_size_), 0);
  std::vector<int64_t> gram;
  for (int64_t skip = 0; skip <= max_skip_; ++skip) {
    const int64_t dist = skip + 1;
    // Unigrams do not depend on the skip: counted on the first pass only.
    const int64_t first_n = skip == 0 ? min_n_ : std::max<int64_t>(min_n_, 2);
    if (first_n > max_n_) break;
    for (int64_t start = 0; start < len; ++start) {
      gram.clear();
      for (int64_t n = 1; n <= max_n_ && start + (n - 1) * dist < len; ++n) {
        gram.push_back(tokens[start + (n - 1) * dist]);
        if (n < first_n) continue;
        if (auto it = column_.find(gram); it != column_.end()) ++count[size_t(it->second)];
      }
    }
  }
  for (int64_t c = 0; c < out_size_; ++c) {
    const double w = weights_.empty() ? 1.0 : double(weights_[size_t(c)]);
    const double n = double(count[size_t(c)]);
    switch (mode_) {
      case TfIdfMode::TF: out[c] = float(n); break;
      case TfIdfMode::IDF: out[c] = n > 0 ? float(w) : 0.f; break;
      case TfIdfMode::TFIDF: out[c] = float(n * w); break;
    }
  }
}

TokenVocabulary::TokenVocabulary(const std::vector<std::string>& pool) {
  for (const std::string& t : pool) {
    auto [it, fresh] = ids_.emplace(t, int64_t(ids_.size()));
    pool_ids_.push_back(it->second);
  }
}

}  // namespace nxrt::cpu
