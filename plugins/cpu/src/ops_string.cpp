// String ops on ABI 2.3 string tensors: StringNormalizer (opset 10). The math is in
// strings.cpp; Cast to and from string is in ops_cast.cpp.
#include "ops.hpp"
#include "strings.hpp"

namespace nxrt::cpu {
namespace {

std::optional<CaseChange> case_change_of(const std::string& s) {
  if (s == "NONE") return CaseChange::None;
  if (s == "LOWER") return CaseChange::Lower;
  if (s == "UPPER") return CaseChange::Upper;
  return std::nullopt;
}

Check normalizer_check(const Node& n) {
  if (n.input(0).dtype() != NXRT_DTYPE_STRING || n.output(0).dtype() != NXRT_DTYPE_STRING)
    return sdk::refuse(NXRT_REFUSE_DTYPE, "StringNormalizer takes and makes string tensors");
  const std::string action = n.attr_string("case_change_action", "NONE");
  if (!case_change_of(action))
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "StringNormalizer: case_change_action '{}' is not NONE, LOWER or UPPER", action);
  return known_attrs(n, {"case_change_action", "is_case_sensitive", "locale", "stopwords"});
}

std::unique_ptr<Kernel> normalizer_create(const Node& n, CpuSession&) {
  auto norm = std::make_shared<const StringNormalizer>(*case_change_of(n.attr_string("case_change_action", "NONE")),
                                                       n.attr_int("is_case_sensitive", 0) != 0, n.attr_strings("stopwords"));
  return make_kernel([norm](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    // [C] or [1, C] (the spec's two layouts).
    if (!(x.rank() == 1 || (x.rank() == 2 && x.dim(0) == 1)))
      sdk::fail(NXRT_INVALID_ARGUMENT, "StringNormalizer: input must be [C] or [1, C], got {}", dims_str(x.dims()));
    std::vector<std::string_view> in(size_t(x.numel()));
    for (size_t i = 0; i < in.size(); ++i) in[i] = x.string(i);
    std::vector<std::string> kept = norm->apply(in);
    // Everything filtered out: one empty string, as the spec says.
    if (kept.empty()) kept.emplace_back();
    const int64_t c = int64_t(kept.size());
    std::vector<int64_t> od = x.rank() == 2 ? std::vector<int64_t>{1, c} : std::vector<int64_t>{c};
    ctx.output(0, NXRT_DTYPE_STRING, od);
    for (size_t i = 0; i < kept.size(); ++i) ctx.set_string(0, i, kept[i]);
  });
}

}  // namespace

void register_string_ops(Registry& r) { r.add(Def{"StringNormalizer", "", 10, INT_MAX, normalizer_check, normalizer_create}); }

}  // namespace nxrt::cpu
