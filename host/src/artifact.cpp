#include "artifact.hpp"

#include "digest.hpp"
#include "error.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace nxrt {
namespace {

// Header: 64 bytes, little-endian.
struct Header {
  char magic[8];
  uint32_t container_version;
  uint32_t header_bytes;
  uint32_t abi_major;
  uint32_t abi_minor;
  uint64_t file_bytes;
  uint64_t directory_offset;
  uint64_t directory_bytes;
  uint64_t directory_checksum;
  uint64_t header_checksum;  // xxh64 of the 56 bytes before it
};
static_assert(sizeof(Header) == 64);

// Directory record, followed by `meta_bytes` of meta text.
struct Record {
  uint32_t kind;
  uint32_t meta_bytes;
  uint64_t offset;
  uint64_t size;
  uint64_t checksum;
};
static_assert(sizeof(Record) == 32);

constexpr uint64_t kAlign = NXRT_CACHE_BLOB_ALIGNMENT;
uint64_t align_up(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

Verdict corrupt(std::string why) { return {NXRT_CACHE_RECOMPILE, "corrupt or truncated: " + why}; }

}  // namespace

const char* verdict_name(nxrt_cache_verdict v) {
  switch (v) {
    case NXRT_CACHE_OPTIMAL: return "optimal";
    case NXRT_CACHE_USABLE: return "usable but slower";
    case NXRT_CACHE_RECOMPILE: return "must recompile";
    case NXRT_CACHE_UNSUPPORTED: return "unsupported";
  }
  return "unknown verdict";
}

const char* entry_kind_name(EntryKind k) {
  switch (k) {
    case EntryKind::Info: return "info";
    case EntryKind::Graph: return "graph";
    case EntryKind::Weights: return "weights";
    case EntryKind::Plugin: return "plugin";
    case EntryKind::Kernel: return "kernel";
  }
  return "unknown";
}

std::string encode_meta(const Meta& m) {
  std::string s;
  for (auto& [k, v] : m) {
    s += k;
    s += '=';
    for (char c : v) {
      if (c == '\\') s += "\\\\";
      else if (c == '\n') s += "\\n";
      else s += c;
    }
    s += '\n';
  }
  return s;
}

bool decode_meta(std::span<const uint8_t> bytes, Meta* out) {
  out->clear();
  std::string line;
  const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) return false;  // every line ends with \n
    line = text.substr(pos, nl - pos);
    pos = nl + 1;
    const size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) return false;
    std::string v;
    for (size_t i = eq + 1; i < line.size(); ++i) {
      if (line[i] != '\\') {
        v += line[i];
        continue;
      }
      if (++i >= line.size()) return false;
      if (line[i] == 'n') v += '\n';
      else if (line[i] == '\\') v += '\\';
      else return false;
    }
    (*out)[line.substr(0, eq)] = std::move(v);
  }
  return true;
}

void ArtifactWriter::add(EntryKind kind, Meta meta, std::vector<uint8_t> data) {
  entries_.push_back(Pending{kind, std::move(meta), std::move(data)});
}

void ArtifactWriter::write(const std::string& path) const {
  // Directory right after the header, then each entry's data at an aligned offset.
  std::vector<std::string> metas;
  uint64_t dir_bytes = 4;
  for (auto& e : entries_) {
    metas.push_back(encode_meta(e.meta));
    dir_bytes += sizeof(Record) + metas.back().size();
  }
  std::vector<uint8_t> dir(dir_bytes);
  uint8_t* d = dir.data();
  const uint32_t count = uint32_t(entries_.size());
  std::memcpy(d, &count, 4);
  d += 4;
  uint64_t offset = align_up(sizeof(Header) + dir_bytes);
  std::vector<uint64_t> offsets;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto& e = entries_[i];
    Record r{uint32_t(e.kind), uint32_t(metas[i].size()), offset, e.data.size(), xxh64(e.data.data(), e.data.size())};
    offsets.push_back(offset);
    std::memcpy(d, &r, sizeof r);
    d += sizeof r;
    std::memcpy(d, metas[i].data(), metas[i].size());
    d += metas[i].size();
    offset = align_up(offset + e.data.size());
  }
  const uint64_t file_bytes = entries_.empty() ? sizeof(Header) + dir_bytes : offsets.back() + entries_.back().data.size();
  Header h{};
  std::memcpy(h.magic, kArtifactMagic, 8);
  h.container_version = kContainerVersion;
  h.header_bytes = sizeof h;
  h.abi_major = NXRT_EP_ABI_MAJOR;
  h.abi_minor = NXRT_EP_ABI_MINOR;
  h.file_bytes = file_bytes;
  h.directory_offset = sizeof h;
  h.directory_bytes = dir_bytes;
  h.directory_checksum = xxh64(dir.data(), dir.size());
  h.header_checksum = xxh64(&h, offsetof(Header, header_checksum));

  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path tmp = target.parent_path() / fmt::format(".{}.{}.tmp", target.filename().string(), ::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) raise(NXRT_ERR_NOT_FOUND, "cannot write compiled model '{}'", tmp.string());
    static const char zeros[kAlign] = {};
    f.write(reinterpret_cast<const char*>(&h), sizeof h);
    f.write(reinterpret_cast<const char*>(dir.data()), std::streamsize(dir.size()));
    uint64_t at = sizeof h + dir.size();
    for (size_t i = 0; i < entries_.size(); ++i) {
      f.write(zeros, std::streamsize(offsets[i] - at));
      f.write(reinterpret_cast<const char*>(entries_[i].data.data()), std::streamsize(entries_[i].data.size()));
      at = offsets[i] + entries_[i].data.size();
    }
    if (!f.flush()) {
      f.close();
      std::error_code ec;
      fs::remove(tmp, ec);
      raise(NXRT_ERR_RUNTIME, "writing compiled model '{}' failed (disk full?)", path);
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    raise(NXRT_ERR_RUNTIME, "cannot move the compiled model into place at '{}': {}", path, ec.message());
  }
}

bool looks_like_artifact(const uint8_t* data, size_t size) {
  return size >= sizeof kArtifactMagic && std::memcmp(data, kArtifactMagic, sizeof kArtifactMagic) == 0;
}

std::shared_ptr<const Artifact> Artifact::open(const std::string& path, Verdict* verdict) {
  return from(MappedFile::open(path), verdict);
}

std::shared_ptr<const Artifact> Artifact::from(std::shared_ptr<const MappedFile> file, Verdict* verdict) {
  const uint8_t* p = file->data();
  const size_t n = file->size();
  if (!looks_like_artifact(p, n)) {
    *verdict = {NXRT_CACHE_UNSUPPORTED, "not an nxrt compiled model (no NXRTCMP header)"};
    return nullptr;
  }
  if (n < sizeof(Header)) {
    *verdict = corrupt(fmt::format("{} bytes, shorter than the {}-byte header", n, sizeof(Header)));
    return nullptr;
  }
  Header h;
  std::memcpy(&h, p, sizeof h);
  if (h.header_checksum != xxh64(&h, offsetof(Header, header_checksum))) {
    *verdict = corrupt("the header checksum does not match");
    return nullptr;
  }
  if (h.container_version != kContainerVersion) {
    *verdict = {NXRT_CACHE_UNSUPPORTED,
                fmt::format("container version {}, this host reads version {}", h.container_version, kContainerVersion)};
    return nullptr;
  }
  if (h.abi_major != NXRT_EP_ABI_MAJOR) {
    *verdict = {NXRT_CACHE_RECOMPILE,
                fmt::format("made by a host of EP ABI {}.{}, this host speaks {}.x", h.abi_major, h.abi_minor, NXRT_EP_ABI_MAJOR)};
    return nullptr;
  }
  if (h.file_bytes != n) {
    *verdict = corrupt(fmt::format("the header says {} bytes, the file has {}", h.file_bytes, n));
    return nullptr;
  }
  if (h.header_bytes != sizeof(Header) || h.directory_offset < sizeof(Header) || h.directory_offset > n ||
      h.directory_bytes > n - h.directory_offset || h.directory_bytes < 4) {
    *verdict = corrupt("the directory lies outside the file");
    return nullptr;
  }
  const uint8_t* d = p + h.directory_offset;
  if (xxh64(d, h.directory_bytes) != h.directory_checksum) {
    *verdict = corrupt("the directory checksum does not match");
    return nullptr;
  }
  std::shared_ptr<Artifact> a(new Artifact());
  a->file_ = std::move(file);
  a->abi_major_ = h.abi_major;
  a->abi_minor_ = h.abi_minor;
  uint32_t count;
  std::memcpy(&count, d, 4);
  uint64_t at = 4;
  for (uint32_t i = 0; i < count; ++i) {
    Record r;
    if (h.directory_bytes - at < sizeof r) {
      *verdict = corrupt(fmt::format("the directory ends inside entry {}", i));
      return nullptr;
    }
    std::memcpy(&r, d + at, sizeof r);
    at += sizeof r;
    if (r.meta_bytes > h.directory_bytes - at) {
      *verdict = corrupt(fmt::format("entry {}'s description runs past the directory", i));
      return nullptr;
    }
    ArtifactEntry e;
    e.kind = EntryKind(r.kind);
    e.offset = r.offset;
    e.size = r.size;
    e.checksum = r.checksum;
    if (!decode_meta({d + at, r.meta_bytes}, &e.meta)) {
      *verdict = corrupt(fmt::format("entry {}'s description is not key=value lines", i));
      return nullptr;
    }
    at += r.meta_bytes;
    if (r.offset > n || r.size > n - r.offset || r.offset % kAlign) {
      *verdict = corrupt(fmt::format("entry {} ({}) lies outside the file or is misaligned", i, entry_kind_name(e.kind)));
      return nullptr;
    }
    a->entries_.push_back(std::move(e));
  }
  a->checked_ = std::make_unique<std::atomic<bool>[]>(a->entries_.size());
  *verdict = {};
  return a;
}

const ArtifactEntry* Artifact::find(EntryKind kind) const {
  for (auto& e : entries_)
    if (e.kind == kind) return &e;
  return nullptr;
}

bool Artifact::data(const ArtifactEntry& e, std::span<const uint8_t>* out, std::string* why) const {
  const size_t i = size_t(&e - entries_.data());
  if (i >= entries_.size()) {
    *why = "not an entry of this file";
    return false;
  }
  const uint8_t* p = file_->data() + e.offset;
  if (!checked_[i].load()) {
    if (xxh64(p, e.size) != e.checksum) {
      *why = fmt::format("the {} entry's checksum does not match (corrupt file)", entry_kind_name(e.kind));
      return false;
    }
    checked_[i].store(true);  // two threads may both check: harmless
  }
  *out = {p, size_t(e.size)};
  return true;
}

const Meta& Artifact::info() const {
  static const Meta none;
  const ArtifactEntry* e = find(EntryKind::Info);
  return e ? e->meta : none;
}

std::string Artifact::info(const std::string& key) const {
  const Meta& m = info();
  auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

}  // namespace nxrt
