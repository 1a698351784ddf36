// TfIdfVectorizer counting on the ONNX example pool (unigrams 2,3,5,4;
// bigrams 5 6, 7 8, 6 7) over the row 1 1 3 3 3 7 8 6 7 5 6 8, counted by hand.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "tfidf.hpp"

using namespace nxrt::cpu;

namespace {
const std::vector<int64_t> kPool = {2, 3, 5, 4, 5, 6, 7, 8, 6, 7};
const std::vector<int64_t> kCounts = {0, 4}, kIndexes = {0, 1, 2, 3, 4, 5, 6};
const std::vector<int64_t> kRow = {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8};

std::vector<float> run(int64_t min_n, int64_t max_n, int64_t skip, TfIdfMode mode, const std::vector<int64_t>& row,
                       const std::vector<float>& weights = {}) {
  TfIdfPool p(min_n, max_n, skip, mode, kCounts, kIndexes, kPool, weights);
  std::vector<float> out(size_t(p.output_size()), -1.f);
  p.row(row.data(), int64_t(row.size()), out.data());
  return out;
}
}  // namespace

TEST_CASE("tf-idf: bigrams without skips") {
  // adjacent pairs: (7,8) once, (6,7) once, (5,6) once
  CHECK(run(2, 2, 0, TfIdfMode::TF, kRow) == std::vector<float>{0, 0, 0, 0, 1, 1, 1});
}

TEST_CASE("tf-idf: bigrams with up to 5 skips") {
  // (7,8): 7@5-8@6 (skip 0), 7@8-8@11 (skip 2), 7@5-8@11 (skip 5) -> 3; (5,6) 1; (6,7) 1
  CHECK(run(2, 2, 5, TfIdfMode::TF, kRow) == std::vector<float>{0, 0, 0, 0, 1, 3, 1});
}

TEST_CASE("tf-idf: unigrams are counted once whatever the skip") {
  // 3 appears 3 times, 5 once; 2 and 4 never
  CHECK(run(1, 2, 5, TfIdfMode::TF, kRow) == std::vector<float>{0, 3, 1, 0, 1, 3, 1});
  CHECK(run(1, 1, 5, TfIdfMode::TF, kRow) == std::vector<float>{0, 3, 1, 0, 0, 0, 0});
}

TEST_CASE("tf-idf: IDF and TFIDF weighting") {
  const std::vector<float> w = {1, 2, 3, 4, 5, 6, 7};
  CHECK(run(1, 2, 5, TfIdfMode::IDF, kRow, w) == std::vector<float>{0, 2, 3, 0, 5, 6, 7});
  CHECK(run(1, 2, 5, TfIdfMode::TFIDF, kRow, w) == std::vector<float>{0, 6, 3, 0, 5, 18, 7});
  CHECK(run(1, 2, 5, TfIdfMode::IDF, kRow) == std::vector<float>{0, 1, 1, 0, 1, 1, 1});
}

TEST_CASE("tf-idf: short and empty rows, an empty unigram level") {
  CHECK(run(2, 2, 5, TfIdfMode::TF, {5}) == std::vector<float>{0, 0, 0, 0, 0, 0, 0});
  CHECK(run(1, 2, 0, TfIdfMode::TF, {}) == std::vector<float>{0, 0, 0, 0, 0, 0, 0});
  TfIdfPool p(2, 2, 0, TfIdfMode::TF, {0, 0}, {0, 1, 2}, {5, 6, 7, 8, 6, 7}, {});
  std::vector<float> out(3);
  p.row(kRow.data(), int64_t(kRow.size()), out.data());
  CHECK(out == std::vector<float>{1, 1, 1});
}

TEST_CASE("tf-idf: inconsistent attributes are rejected") {
  CHECK_THROWS_AS(TfIdfPool(2, 1, 0, TfIdfMode::TF, kCounts, kIndexes, kPool, {}), std::invalid_argument);
  CHECK_THROWS_AS(TfIdfPool(1, 2, 0, TfIdfMode::TF, {0, 5}, kIndexes, kPool, {}), std::invalid_argument);  // 5 items of bigrams
  CHECK_THROWS_AS(TfIdfPool(1, 2, 0, TfIdfMode::TF, kCounts, {0, 1, 2}, kPool, {}), std::invalid_argument);
  CHECK_THROWS_AS(TfIdfPool(1, 2, 0, TfIdfMode::TF, kCounts, kIndexes, kPool, {1, 2}), std::invalid_argument);
  CHECK_THROWS_AS(TfIdfPool(1, 2, -1, TfIdfMode::TF, kCounts, kIndexes, kPool, {}), std::invalid_argument);
}

TEST_CASE("tf-idf: string tokens count like the integer ids their vocabulary gives them") {
  // The example pool as words: 2->"b", 3->"c", 5->"e", 4->"d", 6->"f", 7->"g", 8->"h".
  const std::vector<std::string> words = {"b", "c", "e", "d", "e", "f", "g", "h", "f", "g"};
  TokenVocabulary v(words);
  CHECK(v.id("e") == v.pool_ids()[2]);
  CHECK(v.pool_ids()[2] == v.pool_ids()[4]);  // one id per distinct word
  CHECK(v.id("not in the pool") == -1);
  const char* text[] = {"a", "a", "c", "c", "c", "g", "h", "f", "g", "e", "f", "h"};  // kRow as words
  std::vector<int64_t> row;
  for (auto* t : text) row.push_back(v.id(t));
  TfIdfPool p(2, 2, 0, TfIdfMode::TF, kCounts, kIndexes, v.pool_ids(), {});
  std::vector<float> out(size_t(p.output_size()), -1.f);
  p.row(row.data(), int64_t(row.size()), out.data());
  CHECK(out == run(2, 2, 0, TfIdfMode::TF, kRow));
}
