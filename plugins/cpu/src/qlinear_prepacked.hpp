// QPackedStore (qlinear.hpp) over the SDK's prepacked buffers (ABI 2.4 kernel cache): a
// QConv / QMatMul made on kernel_create packs into buffers that kernel_export writes; one made
// on kernel_import reads them from the blob (zero copy) and never touches the weights.
#pragma once
#include <nxrt_sdk/prepacked.hpp>

#include "qlinear.hpp"

namespace nxrt::cpu {

class PrepackedQStore final : public QPackedStore {
 public:
  explicit PrepackedQStore(sdk::Prepacked& pp) : pp_(pp) {}
  void param(const char* name, int64_t value) override { pp_.param(name, value); }
  std::span<const uint32_t> words(const char* name, size_t count,
                                  const std::function<void(std::span<uint32_t>)>& fill) override {
    return pp_.buffer<uint32_t>(name, count, fill);
  }
  std::span<const int32_t> ints(const char* name, size_t count,
                                const std::function<void(std::span<int32_t>)>& fill) override {
    return pp_.buffer<int32_t>(name, count, fill);
  }
  [[noreturn]] void corrupt(const std::string& reason) override {
    throw sdk::BlobRejected{NXRT_CACHE_UNSUPPORTED, "corrupt blob: " + reason};
  }

 private:
  sdk::Prepacked& pp_;
};

}  // namespace nxrt::cpu
