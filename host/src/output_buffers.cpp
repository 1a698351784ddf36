#include "output_buffers.hpp"

#include <algorithm>
#include <utility>

namespace nxrt {

Bytes OutputBuffers::take(size_t bytes) {
  if (bytes < kMinBytes) return Bytes();
  std::lock_guard lock(mu_);
  size_t best = kept_.size();
  for (size_t i = 0; i < kept_.size(); ++i) {
    const size_t n = kept_[i].size();
    if (n >= bytes && n - bytes <= bytes / 4 && (best == kept_.size() || n < kept_[best].size())) best = i;
  }
  if (best == kept_.size()) return Bytes();
  Bytes b = std::move(kept_[best]);
  kept_.erase(kept_.begin() + std::ptrdiff_t(best));
  b.resize(bytes);  // shrinking writes nothing
  return b;
}

void OutputBuffers::give(Bytes&& b) {
  if (b.is_view() || b.size() < kMinBytes || max_buffers_ == 0) return;
  Bytes dropped;  // freed outside the lock
  {
    std::lock_guard lock(mu_);
    kept_.push_back(std::move(b));
    if (kept_.size() > max_buffers_) {
      auto largest = std::max_element(kept_.begin(), kept_.end(), [](const Bytes& x, const Bytes& y) { return x.size() < y.size(); });
      dropped = std::move(*largest);
      kept_.erase(largest);
    }
  }
}

}  // namespace nxrt
