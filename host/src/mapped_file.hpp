// A whole file mapped read-only (MAP_PRIVATE): model bytes to digest and parse, and cached
// artifacts whose blobs plugins may point into for as long as a session holds the map.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace nxrt {

class MappedFile {
 public:
  // Throws HostError: NOT_FOUND when the file cannot be opened, INVALID_ARGUMENT for a folder.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the whole pages of [begin, end) from this process's memory (madvise
  // MADV_DONTNEED): they stay in the page cache and are read back on the next access,
  // so it changes what the bytes cost, never what they are.
  void release(size_t begin, size_t end) const;

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace nxrt
