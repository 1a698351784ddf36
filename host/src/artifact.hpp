// The compiled-model container (docs/abi.md, "Compiled-model cache"): what `nxrt compile`
// writes next to a model and what a cache folder holds. The host owns the format: a
// checksummed header and directory, then entries (the model's graph and weights, one per
// plugin with its fingerprint, one per compiled kernel with the plugin's blob), each
// checksummed and NXRT_CACHE_BLOB_ALIGNMENT-aligned. Nothing read from it is trusted
// before its checksum matches; anything wrong becomes a verdict, never a crash.
#pragma once
#include "mapped_file.hpp"

#include <nxrt_ep.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace nxrt {

struct Verdict {
  nxrt_cache_verdict verdict = NXRT_CACHE_OPTIMAL;
  std::string reason;  // one line; empty for optimal
  bool usable() const { return verdict == NXRT_CACHE_OPTIMAL || verdict == NXRT_CACHE_USABLE; }
};
// "optimal", "usable but slower", "must recompile", "unsupported".
const char* verdict_name(nxrt_cache_verdict v);

inline constexpr uint32_t kContainerVersion = 1;
inline constexpr char kArtifactMagic[8] = {'N', 'X', 'R', 'T', 'C', 'M', 'P', '\x1a'};

enum class EntryKind : uint32_t { Info = 1, Graph = 2, Weights = 3, Plugin = 4, Kernel = 5 };
const char* entry_kind_name(EntryKind k);

using Meta = std::map<std::string, std::string>;
// Meta as stored: "key=value\n" lines, values escaped (\\ and \n).
std::string encode_meta(const Meta& m);
bool decode_meta(std::span<const uint8_t> bytes, Meta* out);

struct ArtifactEntry {
  EntryKind kind = EntryKind::Info;
  Meta meta;
  uint64_t offset = 0, size = 0, checksum = 0;
  std::string get(const std::string& key) const {
    auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
  }
};

class ArtifactWriter {
 public:
  void add(EntryKind kind, Meta meta, std::vector<uint8_t> data);
  // Writes the container to `path` atomically (a temporary file in the same folder, then
  // rename), so a reader never sees half a file. Throws HostError.
  void write(const std::string& path) const;
  size_t entry_count() const { return entries_.size(); }

 private:
  struct Pending {
    EntryKind kind;
    Meta meta;
    std::vector<uint8_t> data;
  };
  std::vector<Pending> entries_;
};

// True when the first bytes are the container's magic (a model path may name either).
bool looks_like_artifact(const uint8_t* data, size_t size);

class Artifact {
 public:
  // Maps and checks the header and directory. A file that is not a usable container gives
  // NULL and the verdict saying why (unsupported: not ours or a newer format; must
  // recompile: truncated, corrupt, another ABI major). Throws only when the file cannot be
  // opened.
  static std::shared_ptr<const Artifact> open(const std::string& path, Verdict* verdict);
  static std::shared_ptr<const Artifact> from(std::shared_ptr<const MappedFile> file, Verdict* verdict);

  const std::vector<ArtifactEntry>& entries() const { return entries_; }
  const ArtifactEntry* find(EntryKind kind) const;
  // The entry's bytes once their checksum matched (checked once, remembered); false with
  // the reason otherwise.
  bool data(const ArtifactEntry& e, std::span<const uint8_t>* out, std::string* why) const;
  const Meta& info() const;  // the Info entry's meta (empty if none)
  std::string info(const std::string& key) const;  // one value of it ("" if none)
  const std::string& path() const { return file_->path(); }
  // The whole mapped file (read-only): weights loaded from it are views into these bytes.
  std::span<const uint8_t> mapping() const { return {file_->data(), file_->size()}; }
  size_t size() const { return file_->size(); }
  uint32_t abi_major() const { return abi_major_; }
  uint32_t abi_minor() const { return abi_minor_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  std::vector<ArtifactEntry> entries_;
  uint32_t abi_major_ = 0, abi_minor_ = 0;
  std::unique_ptr<std::atomic<bool>[]> checked_;  // per entry: checksum already matched
};

}  // namespace nxrt
