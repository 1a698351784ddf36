// TfIdfVectorizer math (integer tokens): the n-gram pool from the node's
// attributes and the per-row counting with skips, as ONNX (and ONNX Runtime)
// define it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace nxrt::cpu {

enum class TfIdfMode { TF, IDF, TFIDF };

// String tokens (pool_strings) as integer ids for TfIdfPool: each distinct pool string gets
// an id >= 0; a token outside the pool maps to -1, which no pool n-gram contains.
class TokenVocabulary {
 public:
  explicit TokenVocabulary(const std::vector<std::string>& pool);
  const std::vector<int64_t>& pool_ids() const { return pool_ids_; }
  int64_t id(std::string_view token) const {
    auto it = ids_.find(token);
    return it == ids_.end() ? -1 : it->second;
  }

 private:
  std::map<std::string, int64_t, std::less<>> ids_;
  std::vector<int64_t> pool_ids_;
};

class TfIdfPool {
 public:
  // pool: every n-gram of the pool, n-grams of length k starting at
  // ngram_counts[k-1] (k = 1..ngram_counts.size(); the last ends at pool.size()).
  // ngram_indexes[g] is the output column of the g-th n-gram in pool order;
  // weights (empty: all 1) are per output column. Throws std::invalid_argument
  // naming the problem when the attributes are inconsistent.
  TfIdfPool(int64_t min_gram_length, int64_t max_gram_length, int64_t max_skip_count, TfIdfMode mode,
            const std::vector<int64_t>& ngram_counts, const std::vector<int64_t>& ngram_indexes,
            const std::vector<int64_t>& pool, const std::vector<float>& weights);

  int64_t output_size() const { return out_size_; }

  // One row of `len` tokens into out[output_size()]: every n-gram of length
  // min..max whose items are skip+1 apart (skip = 0..max_skip_count) and that
  // is in the pool is counted once per occurrence (unigrams once, whatever
  // the skip); then TF: the count, IDF: weight if count > 0, TFIDF: count *
  // weight.
  void row(const int64_t* tokens, int64_t len, float* out) const;

 private:
  int64_t min_n_, max_n_, max_skip_;
  TfIdfMode mode_;
  int64_t out_size_ = 0;
  std::map<std::vector<int64_t>, int64_t> column_;  // n-gram -> output column
  std::vector<float> weights_;
};

}  // namespace nxrt::cpu
