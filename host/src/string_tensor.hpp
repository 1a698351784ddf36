// String tensors in the host (ABI 2.3): a STRING HostTensor's `data` holds nxrt_string
// elements, the ABI's own layout, so the planner, copies and slicing treat them like any
// fixed-size element; the bytes they point at live in a store the tensor shares
// (HostTensor::strings). Copies of a HostTensor share the store, which never changes.
#pragma once
#include "host_tensor.hpp"

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace nxrt {

// A STRING tensor owning `values` (row-major; as many as the dims' element count).
HostTensor make_string_tensor(std::string name, std::vector<int64_t> dims, std::vector<std::string> values);

// Element i of nxrt_string elements at `data`.
inline std::string_view string_at(const void* data, size_t i) {
  const nxrt_string& s = static_cast<const nxrt_string*>(data)[i];
  return s.size ? std::string_view(s.data, size_t(s.size)) : std::string_view();
}

// The tensor's strings copied into a store of its own: after this it no longer
// depends on whatever its elements pointed at (a run's pools, a caller's buffers).
void own_strings(HostTensor& t);

// A tensor of n elements at `data` (nxrt_string for STRING, else raw bytes), owning
// a copy of everything: for host steps and runs that hand tensors out of their memory.
HostTensor copy_tensor(nxrt_dtype dtype, const std::vector<int64_t>& dims, const void* data);

// Bytes written by kernels during one run (ctx_output_string_set). Stable addresses,
// thread-safe; a run's outputs are copied out (own_strings) before the pool goes.
class StringPool {
 public:
  nxrt_string add(const char* bytes, uint64_t size);

 private:
  std::mutex mu_;
  std::deque<std::string> items_;
};

}  // namespace nxrt
