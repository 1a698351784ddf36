// Text-feature ops: TfIdfVectorizer (opset 9) on int32/int64 tokens, or on string
// tokens (ABI 2.3 string tensors) with pool_strings, mapped to ids by a TokenVocabulary.
// The pool and the counting are in tfidf.cpp.
#include <stdexcept>

#include "ops.hpp"
#include "tfidf.hpp"

namespace nxrt::cpu {
namespace {

Check tfidf_check(const Node& n) {
  const bool strings = n.input(0).dtype() == NXRT_DTYPE_STRING;
  if (strings != n.has_attr("pool_strings"))
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "TfIdfVectorizer: string tokens need pool_strings, integer tokens pool_int64s");
  if (!strings)
    if (auto r = index_dtype(n, 0, "X")) return r;
  if (n.output(0).dtype() != NXRT_DTYPE_FLOAT32)
    return sdk::refuse(NXRT_REFUSE_DTYPE, "TfIdfVectorizer output is {}, must be float32", sdk::dtype_name(n.output(0).dtype()));
  if (!strings && !n.has_attr("pool_int64s")) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "TfIdfVectorizer: pool_int64s is missing");
  const std::string mode = n.attr_string("mode", "");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "TfIdfVectorizer: mode '{}' is not TF, IDF or TFIDF", mode);
  return known_attrs(n, {"max_gram_length", "min_gram_length", "max_skip_count", "mode", "ngram_counts", "ngram_indexes",
                         "pool_int64s", "pool_strings", "weights"});
}

std::unique_ptr<Kernel> tfidf_create(const Node& n, CpuSession&) {
  const std::string m = n.attr_string("mode", "");
  const TfIdfMode mode = m == "TF" ? TfIdfMode::TF : m == "IDF" ? TfIdfMode::IDF : TfIdfMode::TFIDF;
  std::shared_ptr<const TfIdfPool> pool;
  std::shared_ptr<const TokenVocabulary> vocab;
  if (n.has_attr("pool_strings")) vocab = std::make_shared<const TokenVocabulary>(n.attr_strings("pool_strings"));
  try {
    pool = std::make_shared<const TfIdfPool>(n.attr_int("min_gram_length", 0), n.attr_int("max_gram_length", 0),
                                             n.attr_int("max_skip_count", 0), mode, n.attr_ints("ngram_counts"),
                                             n.attr_ints("ngram_indexes"), vocab ? vocab->pool_ids() : n.attr_ints("pool_int64s"),
                                             n.attr_floats("weights"));
  } catch (const std::invalid_argument& e) {
    sdk::fail(NXRT_INVALID_ARGUMENT, "TfIdfVectorizer: {}", e.what());
  }
  return make_kernel([pool, vocab](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    if (x.rank() != 1 && x.rank() != 2)
      sdk::fail(NXRT_INVALID_ARGUMENT, "TfIdfVectorizer: input must be [C] or [N, C], got {}", dims_str(x.dims()));
    const int64_t rows = x.rank() == 2 ? x.dim(0) : 1, cols = x.dim(x.rank() - 1);
    std::vector<int64_t> tokens;
    if (vocab) {
      tokens.resize(size_t(x.numel()));
      for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = vocab->id(x.string(i));
    } else {
      tokens = read_ints(x, "TfIdfVectorizer", "X");
    }
    std::vector<int64_t> od = x.rank() == 2 ? std::vector<int64_t>{rows, pool->output_size()} : std::vector<int64_t>{pool->output_size()};
    TensorView y = ctx.output(0, NXRT_DTYPE_FLOAT32, od);
    for (int64_t r = 0; r < rows; ++r) pool->row(tokens.data() + r * cols, cols, y.data<float>() + r * pool->output_size());
  });
}

}  // namespace

void register_text_ops(Registry& r) { r.add(Def{"TfIdfVectorizer", "", 9, INT_MAX, tfidf_check, tfidf_create}); }

}  // namespace nxrt::cpu
