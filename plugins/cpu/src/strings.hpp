// String kernels (ABI 2.3 string tensors): numbers to and from text (Cast), and
// StringNormalizer's case change and stop-word filter. Pure functions on
// std::string / string_view, free of the ABI; the op glue is ops_string.cpp.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor_ops.hpp"

namespace nxrt::cpu {

// Element i of `src` (type e) as text: floats in their shortest round-trip form
// ("0.039187793", "1e-05", "nan", "inf", "-inf"), as numpy's str() writes them for
// values in its positional range; integers in decimal; bool as "1" / "0".
std::string number_to_string(const void* src, Elem e, size_t i);

// Parses `text` into element i of `dst` (type e): leading/trailing blanks and a
// leading '+' allowed; "nan", "inf", "infinity" in any case for floats; integers
// must fit the type; bool takes "1"/"0"/"true"/"false". false when it does not parse.
bool string_to_number(std::string_view text, Elem e, void* dst, size_t i);

enum class CaseChange { None, Lower, Upper };

// Lower- or upper-cases UTF-8 text code point by code point (the C.UTF-8 tables,
// never the process locale). Invalid UTF-8 bytes pass through unchanged.
std::string change_case(std::string_view utf8, CaseChange c);

// StringNormalizer: drops stop words (compared exactly, or after lower-casing both
// sides when not case-sensitive), then changes the case of what is left.
class StringNormalizer {
 public:
  StringNormalizer(CaseChange change, bool case_sensitive, const std::vector<std::string>& stopwords);
  // The kept strings, transformed, in order.
  std::vector<std::string> apply(const std::vector<std::string_view>& in) const;

 private:
  CaseChange change_;
  bool case_sensitive_;
  std::vector<std::string> stop_;  // lower-cased when not case-sensitive; sorted
};

}  // namespace nxrt::cpu
