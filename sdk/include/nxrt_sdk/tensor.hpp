// A tensor as the host passed it: shape, element type and memory.
#pragma once
#include "dtype.hpp"
#include "status.hpp"

#include <numeric>
#include <span>
#include <vector>

namespace nxrt::sdk {

inline int64_t element_count(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

class TensorView {
 public:
  TensorView() = default;
  explicit TensorView(const nxrt_tensor& t)
      : dtype_(t.dtype),
        dims_(t.dims, t.dims + t.rank),
        data_(t.data),
        offset_(t.byte_offset),
        memory_(t.memory) {}

  nxrt_dtype dtype() const { return dtype_; }
  size_t rank() const { return dims_.size(); }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t dim(size_t i) const { return dims_[i]; }
  int64_t numel() const { return element_count(dims_); }
  size_t bytes() const { return size_t(numel()) * dtype_size(dtype_); }
  nxrt_memory_kind memory() const { return memory_; }
  // The allocation handle and offset, for plugins with opaque device memory.
  void* handle() const { return data_; }
  uint64_t byte_offset() const { return offset_; }

  // Element pointer; only for host-addressable memory.
  void* raw() const { return static_cast<char*>(data_) + offset_; }
  template <typename T>
  T* data() const {
    if (dtype_of<T>() != dtype_) fail(NXRT_INVALID_ARGUMENT, "tensor is {}, not {}", dtype_name(dtype_), dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw());
  }

 private:
  nxrt_dtype dtype_ = NXRT_DTYPE_UNDEFINED;
  std::vector<int64_t> dims_;
  void* data_ = nullptr;
  uint64_t offset_ = 0;
  nxrt_memory_kind memory_ = NXRT_MEMORY_HOST;
};

}  // namespace nxrt::sdk
