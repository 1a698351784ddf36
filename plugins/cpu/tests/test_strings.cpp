// String kernels: numbers to text as numpy's str() writes float32 (shortest round
// trip), text to numbers with the blanks, signs and spellings real data has, and
// StringNormalizer's UTF-8 case mapping and stop words, checked against hand values.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "strings.hpp"

using namespace nxrt::cpu;

TEST_CASE("strings: numbers to text") {
  const float f[] = {0.039187793f, 0.9767611f, -2.5f, 1e-5f, 1e16f, std::nanf(""), -std::numeric_limits<float>::infinity(), 0.0f};
  const char* want[] = {"0.039187793", "0.9767611", "-2.5", "1e-05", "1e+16", "nan", "-inf", "0"};
  for (size_t i = 0; i < 8; ++i) CHECK(number_to_string(f, Elem::F32, i) == want[i]);
  const double d[] = {0.1, 1.0 / 3};
  CHECK(number_to_string(d, Elem::F64, 0) == "0.1");
  CHECK(number_to_string(d, Elem::F64, 1) == "0.3333333333333333");
  const int64_t i64[] = {-9223372036854775807LL - 1};
  CHECK(number_to_string(i64, Elem::I64, 0) == "-9223372036854775808");
  const uint8_t u8[] = {255};
  CHECK(number_to_string(u8, Elem::U8, 0) == "255");
  const uint16_t h[] = {float_to_half(1.5f)};
  CHECK(number_to_string(h, Elem::F16, 0) == "1.5");
}

TEST_CASE("strings: text to numbers") {
  float f[6];
  CHECK(string_to_number(" 0.47892547 ", Elem::F32, f, 0));
  CHECK(f[0] == 0.47892547f);
  CHECK(string_to_number("+2e3", Elem::F32, f, 1));
  CHECK(f[1] == 2000.0f);
  CHECK(string_to_number("-INF", Elem::F32, f, 2));
  CHECK((std::isinf(f[2]) && f[2] < 0));
  CHECK(string_to_number("NaN", Elem::F32, f, 3));
  CHECK(std::isnan(f[3]));
  CHECK(string_to_number("1e999", Elem::F32, f, 4));  // out of range: infinity, as a float cast gives
  CHECK(std::isinf(f[4]));
  CHECK_FALSE(string_to_number("one", Elem::F32, f, 5));
  CHECK_FALSE(string_to_number("1.5x", Elem::F32, f, 5));
  CHECK_FALSE(string_to_number("", Elem::F32, f, 5));
  int8_t i8[2];
  CHECK(string_to_number("-128", Elem::I8, i8, 0));
  CHECK(i8[0] == -128);
  CHECK_FALSE(string_to_number("128", Elem::I8, i8, 1));  // does not fit
  uint64_t u64[1];
  CHECK(string_to_number("18446744073709551615", Elem::U64, u64, 0));
  CHECK(u64[0] == 18446744073709551615ull);
  uint8_t b[3];
  CHECK(string_to_number("true", Elem::Bool, b, 0));
  CHECK(string_to_number("0", Elem::Bool, b, 1));
  CHECK((b[0] == 1 && b[1] == 0));
  CHECK_FALSE(string_to_number("yes", Elem::Bool, b, 2));
}

TEST_CASE("strings: case mapping is UTF-8 aware and keeps invalid bytes") {
  CHECK(change_case("Monday", CaseChange::Upper) == "MONDAY");
  CHECK(change_case("ÄÖÜ ÉCOLE", CaseChange::Lower) == "äöü école");
  CHECK(change_case("ωμέγα", CaseChange::Upper) == "ΩΜΈΓΑ");
  CHECK(change_case(std::string("a\xff" "b", 3), CaseChange::Upper) == std::string("A\xff" "B", 3));
  CHECK(change_case(std::string("x\0y", 3), CaseChange::Upper) == std::string("X\0Y", 3));
  CHECK(change_case("MiXeD", CaseChange::None) == "MiXeD");
}

TEST_CASE("strings: StringNormalizer drops stop words, then changes case") {
  const std::vector<std::string_view> week = {"Monday", "tuesday", "wednesday", "Monday", "tuesday", "wednesday"};
  StringNormalizer insensitive(CaseChange::Upper, false, {"monday"});
  CHECK(insensitive.apply(week) == std::vector<std::string>{"TUESDAY", "WEDNESDAY", "TUESDAY", "WEDNESDAY"});
  StringNormalizer sensitive(CaseChange::Lower, true, {"monday"});
  CHECK(sensitive.apply(week) == std::vector<std::string>{"monday", "tuesday", "wednesday", "monday", "tuesday", "wednesday"});
  StringNormalizer all(CaseChange::None, true, {"a", "b"});
  CHECK(all.apply({"a", "b", "a"}).empty());
  StringNormalizer unicode(CaseChange::None, false, {"ÉTÉ"});
  CHECK(unicode.apply({"été", "hiver"}) == std::vector<std::string>{"hiver"});
}
