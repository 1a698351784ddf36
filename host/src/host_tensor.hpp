// Dense host tensors and their ONNX TensorProto encoding (.pb files, initializers).
#pragma once
#include <nxrt_ep.h>
#include "dtype.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace onnx { class TensorProto; }

namespace nxrt {

// madvise(MADV_HUGEPAGE) on a large buffer (host_tensor.cpp); harmless where THP is off.
void advise_huge(void* p, size_t bytes);

// 64-byte aligned storage, so kernels may use aligned vector loads on host tensors; buffers
// of 2 MiB or more are 2 MiB aligned and ask for transparent huge pages, so filling a large
// weight takes a few page faults instead of one per 4 KiB (model loading and folding).
template <typename T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <typename U> AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes >= kHugeBytes) {  // weights: 2 MiB pages, one fault each instead of 512
      void* p = ::operator new(bytes, std::align_val_t(kHugeBytes));
      advise_huge(p, bytes);
      return static_cast<T*>(p);
    }
    return static_cast<T*>(::operator new(bytes, std::align_val_t(64)));
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) >= kHugeBytes) ::operator delete(p, std::align_val_t(kHugeBytes));
    else ::operator delete(p, std::align_val_t(64));
  }
  static constexpr size_t kHugeBytes = size_t(2) << 20;
  template <typename U> bool operator==(const AlignedAllocator<U>&) const { return true; }
};

// A tensor's bytes: owned (64-byte aligned), or a read-only view of memory another object
// keeps alive (the weights of a compiled model, mapped from its file: loading copies
// nothing). Writing (non-const data(), resize) turns a view into an owned copy first, so a
// view is never written through.
class Bytes {
 public:
  Bytes() = default;
  explicit Bytes(size_t n) : own_(n) {}
  // `n` bytes at `p` (64-byte aligned), valid while `keep` lives.
  static Bytes view(const uint8_t* p, size_t n, std::shared_ptr<const void> keep) {
    Bytes b;
    b.view_ = p;
    b.view_size_ = n;
    b.keep_ = std::move(keep);
    return b;
  }
  bool is_view() const { return view_ != nullptr; }
  const uint8_t* data() const { return view_ ? view_ : own_.data(); }
  uint8_t* data() {
    own();
    return own_.data();
  }
  size_t size() const { return view_ ? view_size_ : own_.size(); }
  bool empty() const { return size() == 0; }
  void resize(size_t n) {
    own();
    own_.resize(n);
  }
  void clear() {
    drop_view();
    own_.clear();
  }
  template <typename It>
  void assign(It first, It last) {
    drop_view();
    own_.assign(first, last);
  }
  void assign(size_t n, uint8_t v) {
    drop_view();
    own_.assign(n, v);
  }
  uint8_t& operator[](size_t i) { return data()[i]; }
  const uint8_t& operator[](size_t i) const { return data()[i]; }
  const uint8_t* begin() const { return data(); }
  const uint8_t* end() const { return data() + size(); }

 private:
  void own() {
    if (!view_) return;
    own_.assign(view_, view_ + view_size_);
    drop_view();
  }
  void drop_view() {
    view_ = nullptr;
    view_size_ = 0;
    keep_.reset();
  }
  std::vector<uint8_t, AlignedAllocator<uint8_t>> own_;
  const uint8_t* view_ = nullptr;
  size_t view_size_ = 0;
  std::shared_ptr<const void> keep_;
};

struct HostTensor {
  std::string name;
  nxrt_dtype dtype = NXRT_DTYPE_UNDEFINED;
  std::vector<int64_t> dims;
  Bytes data;  // dense row-major, 64-byte aligned; STRING: nxrt_string elements
  // STRING: keeps alive the bytes the elements point at (string_tensor.hpp); shared by copies.
  std::shared_ptr<const void> strings;

  int64_t numel() const;
};

// Elements of a tensor of these dims; throws HostError(INVALID_ARGUMENT) past kMaxElements,
// so no byte size computed from it can overflow 64 bits.
inline constexpr int64_t kMaxElements = int64_t(1) << 59;
int64_t element_count(const std::vector<int64_t>& dims);
// Bytes of a dense tensor of this type and shape (checked through element_count).
inline size_t bytes_of(nxrt_dtype t, const std::vector<int64_t>& dims) { return size_t(element_count(dims)) * dtype_size(t); }
// "[2,?,3]": a shape for messages, "?" for a dimension unknown before run time.
std::string shape_str(const int64_t* dims, size_t rank);
inline std::string shape_str(const std::vector<int64_t>& dims) { return shape_str(dims.data(), dims.size()); }

// Decodes a TensorProto; `base_dir` resolves external data, which must stay inside it.
// Where a tensor's external data lies, checked: a relative path that stays inside the
// model's folder after `..` and symbolic links are resolved, a regular file with one
// link, offset and length decimal and >= 0 (length -1: to the end). Throws MODEL otherwise.
struct ExternalData {
  std::string location;  // as the model wrote it
  std::filesystem::path file;
  int64_t offset = 0, length = -1;
};
ExternalData locate_external(const onnx::TensorProto& t, const std::filesystem::path& base_dir);

HostTensor decode_tensor(const onnx::TensorProto& t, const std::filesystem::path& base_dir = {});
// Refuses (NXRT_ERR_MODEL, naming the tensor) a tensor whose inline data does not have the size
// its type and shape need, without copying it: the loader runs it on every tensor of every graph
// before libonnx's shape inference, which trusts raw_data sizes (onnx::ParseData).
void check_tensor_data_size(const onnx::TensorProto& t);
void encode_tensor(const HostTensor& t, onnx::TensorProto& out);

HostTensor read_tensor_file(const std::filesystem::path& path);
void write_tensor_file(const std::filesystem::path& path, const HostTensor& t);

}  // namespace nxrt
