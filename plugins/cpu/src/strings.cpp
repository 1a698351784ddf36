#include "strings.hpp"

#include <algorithm>
#include <charconv>
#include <clocale>
#include <cmath>
#include <cstring>
#include <cwctype>
#include <limits>
#include <locale.h>

namespace nxrt::cpu {
namespace {

template <typename F>
std::string float_text(F v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip
  return std::string(buf, r.ptr);
}

template <typename T>
T load(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void store(void* p, size_t i, T v) {
  std::memcpy(static_cast<char*>(p) + i * sizeof(T), &v, sizeof(T));
}

std::string_view trim(std::string_view s) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

template <typename F>
bool parse_float(std::string_view s, F& out) {
  const bool neg = !s.empty() && s.front() == '-';
  std::string_view body = s;
  if (!body.empty() && (body.front() == '-' || body.front() == '+')) body.remove_prefix(1);
  if (iequals(body, "nan")) {
    out = std::numeric_limits<F>::quiet_NaN();
    return true;
  }
  if (iequals(body, "inf") || iequals(body, "infinity")) {
    out = neg ? -std::numeric_limits<F>::infinity() : std::numeric_limits<F>::infinity();
    return true;
  }
  if (body.empty()) return false;
  F v{};
  auto r = std::from_chars(body.data(), body.data() + body.size(), v);
  // Out of range: from_chars leaves v alone; C's strtod gives +-inf, which is what a
  // float cast of a huge number means.
  if (r.ec == std::errc::result_out_of_range) {
    std::string z(body);
    v = F(std::strtod(z.c_str(), nullptr));
  } else if (r.ec != std::errc() || r.ptr != body.data() + body.size()) {
    return false;
  }
  out = neg ? -v : v;
  return true;
}

template <typename I>
bool parse_int(std::string_view s, I& out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// UTF-8 decoding of one code point at s[i]; -1 (and one byte) for an invalid sequence.
int32_t decode(std::string_view s, size_t& i) {
  const auto b = static_cast<unsigned char>(s[i]);
  int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + size_t(len) > s.size()) {
    ++i;
    return -1;
  }
  int32_t cp = len == 1 ? b : b & (0x7f >> len);
  for (int k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(s[i + size_t(k)]);
    if ((c >> 6) != 2) {
      ++i;
      return -1;
    }
    cp = (cp << 6) | (c & 0x3f);
  }
  i += size_t(len);
  return cp;
}

void encode(int32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3f));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

// C.UTF-8's character tables, opened once, never installed as the process locale, and freed
// when the plugin is unloaded (else every load and unload leaks one; LeakSanitizer saw it).
locale_t utf8_locale() {
  struct Owned {
    locale_t l;
    ~Owned() {
      if (l) freelocale(l);
    }
  };
  static const Owned loc{[] {
    locale_t l = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t(0));
    return l ? l : newlocale(LC_CTYPE_MASK, "C", locale_t(0));
  }()};
  return loc.l;
}

}  // namespace

std::string number_to_string(const void* src, Elem e, size_t i) {
  switch (e) {
    case Elem::F32: return float_text(load<float>(src, i));
    case Elem::F64: return float_text(load<double>(src, i));
    case Elem::F16: return float_text(half_to_float(load<uint16_t>(src, i)));
    case Elem::BF16: return float_text(bfloat16_to_float(load<uint16_t>(src, i)));
    case Elem::I8: return std::to_string(load<int8_t>(src, i));
    case Elem::U8: return std::to_string(load<uint8_t>(src, i));
    case Elem::I16: return std::to_string(load<int16_t>(src, i));
    case Elem::U16: return std::to_string(load<uint16_t>(src, i));
    case Elem::I32: return std::to_string(load<int32_t>(src, i));
    case Elem::U32: return std::to_string(load<uint32_t>(src, i));
    case Elem::I64: return std::to_string(load<int64_t>(src, i));
    case Elem::U64: return std::to_string(load<uint64_t>(src, i));
    case Elem::Bool: return load<uint8_t>(src, i) ? "1" : "0";
  }
  return {};
}

bool string_to_number(std::string_view text, Elem e, void* dst, size_t i) {
  const std::string_view s = trim(text);
  auto as_int = [&]<typename I>(I) {
    I v{};
    if (!parse_int(s, v)) return false;
    store(dst, i, v);
    return true;
  };
  switch (e) {
    case Elem::F32: {
      float v;
      if (!parse_float(s, v)) return false;
      store(dst, i, v);
      return true;
    }
    case Elem::F64: {
      double v;
      if (!parse_float(s, v)) return false;
      store(dst, i, v);
      return true;
    }
    case Elem::F16:
    case Elem::BF16: {
      float v;
      if (!parse_float(s, v)) return false;
      store(dst, i, e == Elem::F16 ? float_to_half(v) : float_to_bfloat16(v, Bf16Round::NearestEven));
      return true;
    }
    case Elem::I8: return as_int(int8_t{});
    case Elem::U8: return as_int(uint8_t{});
    case Elem::I16: return as_int(int16_t{});
    case Elem::U16: return as_int(uint16_t{});
    case Elem::I32: return as_int(int32_t{});
    case Elem::U32: return as_int(uint32_t{});
    case Elem::I64: return as_int(int64_t{});
    case Elem::U64: return as_int(uint64_t{});
    case Elem::Bool: {
      const bool t = s == "1" || iequals(s, "true"), f = s == "0" || iequals(s, "false");
      if (!t && !f) return false;
      store(dst, i, uint8_t(t ? 1 : 0));
      return true;
    }
  }
  return false;
}

std::string change_case(std::string_view utf8, CaseChange c) {
  if (c == CaseChange::None) return std::string(utf8);
  std::string out;
  out.reserve(utf8.size());
  const locale_t loc = utf8_locale();
  for (size_t i = 0; i < utf8.size();) {
    const size_t start = i;
    const int32_t cp = decode(utf8, i);
    if (cp < 0) {
      out.append(utf8.substr(start, i - start));
      continue;
    }
    const wint_t m = c == CaseChange::Lower ? towlower_l(wint_t(cp), loc) : towupper_l(wint_t(cp), loc);
    encode(int32_t(m), out);
  }
  return out;
}

StringNormalizer::StringNormalizer(CaseChange change, bool case_sensitive, const std::vector<std::string>& stopwords)
    : change_(change), case_sensitive_(case_sensitive) {
  for (auto& w : stopwords) stop_.push_back(case_sensitive ? w : change_case(w, CaseChange::Lower));
  std::sort(stop_.begin(), stop_.end());
}

std::vector<std::string> StringNormalizer::apply(const std::vector<std::string_view>& in) const {
  std::vector<std::string> out;
  for (std::string_view s : in) {
    const std::string key = case_sensitive_ ? std::string(s) : change_case(s, CaseChange::Lower);
    if (std::binary_search(stop_.begin(), stop_.end(), key)) continue;
    out.push_back(change_case(s, change_));
  }
  return out;
}

}  // namespace nxrt::cpu
