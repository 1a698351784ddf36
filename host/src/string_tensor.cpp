#include "string_tensor.hpp"

#include "error.hpp"

#include <cstring>

namespace nxrt {
namespace {

using Store = std::vector<std::string>;

// Points the tensor's elements at the store's strings and keeps the store.
void attach(HostTensor& t, std::shared_ptr<Store> store) {
  t.data.resize(store->size() * sizeof(nxrt_string));
  auto* e = reinterpret_cast<nxrt_string*>(t.data.data());
  for (size_t i = 0; i < store->size(); ++i) {
    const std::string& s = (*store)[i];
    e[i].data = s.empty() ? nullptr : s.data();
    e[i].size = s.size();
  }
  t.strings = std::move(store);
}

}  // namespace

HostTensor make_string_tensor(std::string name, std::vector<int64_t> dims, std::vector<std::string> values) {
  HostTensor t;
  t.name = std::move(name);
  t.dtype = NXRT_DTYPE_STRING;
  t.dims = std::move(dims);
  if (size_t(element_count(t.dims)) != values.size())
    raise(NXRT_ERR_INVALID_ARGUMENT, "string tensor '{}' of shape {} needs {} strings, got {}", t.name, shape_str(t.dims),
          element_count(t.dims), values.size());
  attach(t, std::make_shared<Store>(std::move(values)));
  return t;
}

void own_strings(HostTensor& t) {
  if (t.dtype != NXRT_DTYPE_STRING) return;
  const size_t n = t.data.size() / sizeof(nxrt_string);
  auto store = std::make_shared<Store>(n);
  for (size_t i = 0; i < n; ++i) (*store)[i] = std::string(string_at(t.data.data(), i));
  attach(t, std::move(store));
}

HostTensor copy_tensor(nxrt_dtype dtype, const std::vector<int64_t>& dims, const void* data) {
  HostTensor t;
  t.dtype = dtype;
  t.dims = dims;
  t.data.resize(bytes_of(dtype, dims));
  if (!t.data.empty()) std::memcpy(t.data.data(), data, t.data.size());
  own_strings(t);
  return t;
}

nxrt_string StringPool::add(const char* bytes, uint64_t size) {
  if (!size) return nxrt_string{nullptr, 0};
  std::lock_guard lock(mu_);
  const std::string& s = items_.emplace_back(bytes, size_t(size));
  return nxrt_string{s.data(), s.size()};
}

}  // namespace nxrt
