// SHA-256 (FIPS 180-4) of a file, for the plugin allow-list and the load log. Small and
// dependency-free: the host links no crypto library for this one digest.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace nxrt {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  std::array<uint8_t, 32> finish();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;
};

// Lower-case hex digest of the bytes of the open file `fd` (read from offset 0 with pread, so
// the descriptor's offset is left alone); `name` is for the error, HostError(NOT_FOUND) when
// it cannot be read.
std::string sha256_fd(int fd, const std::string& name);

}  // namespace nxrt
