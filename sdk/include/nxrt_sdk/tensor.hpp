// A tensor as the host passed it: shape, element type and memory.
//
// Ownership: views never own the memory they describe (host- or plugin-allocated, valid for the
// call that gave them). Thread class: value types, safe to copy between threads; the memory's
// rules are the call's.
#pragma once
#include "dtype.hpp"
#include "status.hpp"

#include <numeric>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

namespace nxrt::sdk {

// The product of the dims; a product past int64 is an NXRT_INVALID_ARGUMENT failure, never a
// wrapped count that a kernel would then size buffers by.
inline int64_t element_count(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (auto d : dims)
    if (__builtin_mul_overflow(n, d, &n)) fail(NXRT_INVALID_ARGUMENT, "a shape of rank {} has more elements than int64 counts", dims.size());
  return n;
}

// A tensor view; `Const` views (kernel inputs, constants, TENSOR attributes)
// give only const element pointers: the ABI makes inputs read-only.
template <bool Const>
class BasicTensorView {
  using Ptr = std::conditional_t<Const, const void*, void*>;
  template <typename T>
  using Elem = std::conditional_t<Const, const T, T>;

 public:
  BasicTensorView() = default;
  template <typename CTensor>
  explicit BasicTensorView(const CTensor& t)
      : dtype_(t.dtype), dims_(t.dims, t.dims + t.rank), data_(t.data), offset_(t.byte_offset), memory_(t.memory) {}
  // An output may be read as an input, never the other way round.
  template <bool C = Const, typename = std::enable_if_t<C>>
  BasicTensorView(const BasicTensorView<false>& o)
      : dtype_(o.dtype()), dims_(o.dims()), data_(o.handle()), offset_(o.byte_offset()), memory_(o.memory()) {}

  nxrt_dtype dtype() const { return dtype_; }
  size_t rank() const { return dims_.size(); }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t dim(size_t i) const { return dims_[i]; }
  int64_t numel() const { return element_count(dims_); }
  size_t bytes() const { return size_t(numel()) * dtype_size(dtype_); }
  nxrt_memory_kind memory() const { return memory_; }
  // The allocation handle and offset, for plugins with opaque device memory.
  Ptr handle() const { return data_; }
  uint64_t byte_offset() const { return offset_; }

  // Element pointer; only for host-addressable memory.
  Ptr raw() const { return static_cast<Elem<char>*>(data_) + offset_; }
  template <typename T>
  Elem<T>* data() const {
    if (dtype_of<T>() != dtype_) fail(NXRT_INVALID_ARGUMENT, "tensor is {}, not {}", dtype_name(dtype_), dtype_name(dtype_of<T>()));
    return static_cast<Elem<T>*>(raw());
  }
  // Element i of a STRING tensor (host memory); valid until the run ends. Outputs are
  // written with Context::set_string.
  std::string_view string(size_t i) const {
    const nxrt_string& s = data<nxrt_string>()[i];
    return s.size ? std::string_view(s.data, size_t(s.size)) : std::string_view();
  }

 private:
  nxrt_dtype dtype_ = NXRT_DTYPE_UNDEFINED;
  std::vector<int64_t> dims_;
  Ptr data_ = nullptr;
  uint64_t offset_ = 0;
  nxrt_memory_kind memory_ = NXRT_MEMORY_HOST;
};

using TensorView = BasicTensorView<false>;      // outputs: writable
using ConstTensorView = BasicTensorView<true>;  // inputs, constants: read-only

}  // namespace nxrt::sdk
