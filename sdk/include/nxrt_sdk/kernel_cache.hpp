// ABI 2.4 compiled-kernel cache, for plugins (NXRT_FEATURE_KERNEL_CACHE): a verdict with
// its reason, a writer kernels export through, and a bounds-checked reader for blobs.
//
// Ownership: BlobWriter writes through the host's writer (the host copies each write).
// BlobReader reads a blob it does not own; spans it returns point into the blob, which
// the host keeps valid and unchanged until the kernel made from it is released.
// A blob is untrusted input: every read is checked, and a reader that runs out or finds
// nonsense throws BlobRejected, which the SDK turns into an UNSUPPORTED verdict (the host
// then compiles the kernel), never a crash or a failed session.
#pragma once
#include "digest64.hpp"
#include "status.hpp"

#include <nxrt_ep.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace nxrt::sdk {

// `s` with every byte that is not part of a well-formed UTF-8 sequence replaced by '?', and
// control characters by ' ': reasons and messages quote untrusted text (a fingerprint).
inline std::string printable_utf8(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size() && !(n == 2 && c < 0xc2);
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (!ok) {
      out += '?';
      ++i;
    } else if (n == 1 && (c < 0x20 || c == 0x7f)) {
      out += ' ';
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

// `s` cut to fewer than `max_bytes` bytes at a UTF-8 character boundary (room for a NUL).
inline std::string clip_utf8(std::string s, size_t max_bytes) {
  if (max_bytes == 0) return {};
  if (s.size() >= max_bytes) {
    size_t cut = max_bytes - 1;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;
    s.resize(cut);
  }
  return s;
}

struct CacheJudgement {
  nxrt_cache_verdict verdict = NXRT_CACHE_OPTIMAL;
  std::string reason;  // one line; empty for OPTIMAL
};

// Thrown by BlobReader (or by a plugin) for a blob it cannot use.
struct BlobRejected {
  nxrt_cache_verdict verdict = NXRT_CACHE_UNSUPPORTED;
  std::string reason;
};

class BlobWriter {
 public:
  explicit BlobWriter(const nxrt_blob_writer* w) : w_(w) {}
  void write(const void* bytes, uint64_t size) {
    check(w_->write(w_->user, bytes, size));
    written_ += size;
  }
  template <typename T>
  void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    write(&v, sizeof v);
  }
  void string(const std::string& s) {
    pod(uint64_t(s.size()));
    write(s.data(), s.size());
  }
  // Zero bytes up to a multiple of `alignment` from the blob's start (blobs start
  // NXRT_CACHE_BLOB_ALIGNMENT-aligned, so data after this is aligned in memory too).
  void align(uint64_t alignment) {
    static const uint8_t zeros[64] = {};
    while (written_ % alignment) write(zeros, std::min<uint64_t>(sizeof zeros, alignment - written_ % alignment));
  }
  uint64_t written() const { return written_; }

 private:
  const nxrt_blob_writer* w_;
  uint64_t written_ = 0;
};

class BlobReader {
 public:
  BlobReader(const void* blob, uint64_t size) : p_(static_cast<const uint8_t*>(blob)), size_(size) {}
  std::span<const uint8_t> bytes(uint64_t n) {
    if (n > size_ - pos_) reject("it ends at byte {} but {} more bytes are needed at byte {}", size_, n, pos_);
    auto s = std::span<const uint8_t>(p_ + pos_, size_t(n));
    pos_ += n;
    return s;
  }
  template <typename T>
  T pod() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    std::memcpy(&v, bytes(sizeof v).data(), sizeof v);
    return v;
  }
  // A string of at most `max` bytes.
  std::string string(uint64_t max = 1u << 20) {
    const uint64_t n = pod<uint64_t>();
    if (n > max) reject("a string of {} bytes at byte {} (at most {})", n, pos_, max);
    auto b = bytes(n);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  void align(uint64_t alignment) {
    const uint64_t pad = (alignment - pos_ % alignment) % alignment;
    bytes(pad);
  }
  // `n` elements of T, aligned for T inside the blob (the writer aligned them).
  template <typename T>
  std::span<const T> array(uint64_t n) {
    if (n > size_ / sizeof(T)) reject("an array of {} elements of {} bytes in a blob of {} bytes", n, sizeof(T), size_);
    auto b = bytes(n * sizeof(T));
    if (reinterpret_cast<uintptr_t>(b.data()) % alignof(T)) reject("a misaligned array at byte {}", pos_ - b.size());
    return {reinterpret_cast<const T*>(b.data()), size_t(n)};
  }
  uint64_t position() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }
  template <typename... Args>
  [[noreturn]] void reject(fmt::format_string<Args...> f, Args&&... args) const {
    throw BlobRejected{NXRT_CACHE_UNSUPPORTED, "corrupt blob: " + fmt::format(f, std::forward<Args>(args)...)};
  }

 private:
  const uint8_t* p_;
  uint64_t size_, pos_ = 0;
};

// A session fingerprint written as "<plugin> <version>; key=value; ...; name=<device name>"
// (the device name last: it may itself hold "; "), read back to judge a blob: the version and
// the fields in order, "name" last.
struct Fingerprint {
  std::string version;
  std::vector<std::pair<std::string, std::string>> fields;
  const std::string* get(const std::string& k) const {
    for (auto& [key, v] : fields)
      if (key == k) return &v;
    return nullptr;
  }
};

// Parses `s` as `plugin`'s fingerprint; false for text of another plugin or another form.
inline bool parse_fingerprint(const std::string& s, std::string_view plugin, Fingerprint& out) {
  const std::string prefix = std::string(plugin) + " ";
  if (s.rfind(prefix, 0) != 0) return false;
  const size_t name_at = s.find("; name=");
  if (name_at == std::string::npos) return false;
  std::string_view head(s.data(), name_at);
  size_t pos = head.find("; ");
  if (pos == std::string_view::npos || pos < prefix.size()) return false;
  out.version = std::string(head.substr(prefix.size(), pos - prefix.size()));
  if (out.version.empty()) return false;
  while (pos != std::string_view::npos) {
    const size_t start = pos + 2, next = head.find("; ", start);
    std::string_view f = head.substr(start, next == std::string_view::npos ? std::string_view::npos : next - start);
    const size_t eq = f.find('=');
    if (eq == std::string_view::npos || eq == 0) return false;
    out.fields.emplace_back(std::string(f.substr(0, eq)), std::string(f.substr(eq + 1)));
    pos = next;
  }
  out.fields.emplace_back("name", s.substr(name_at + 7));
  return true;
}

}  // namespace nxrt::sdk
