// Device tensors of the I/O binding: allocation through the EP session (counted and
// capped by its memory policy) and synchronous transfers to and from host memory.
#include "io_binding.hpp"

#include "error.hpp"
#include "host_tensor.hpp"
#include "status.hpp"

#include <fmt/format.h>

namespace nxrt {

std::shared_ptr<DeviceTensor> DeviceTensor::allocate(std::shared_ptr<EpInstance> ep, nxrt_dtype dtype, std::vector<int64_t> dims) {
  if (dtype_size(dtype) == 0) raise(NXRT_ERR_UNSUPPORTED, "device tensors of {} are not supported", dtype_name(dtype));
  for (auto d : dims)
    if (d < 0) raise(NXRT_ERR_INVALID_ARGUMENT, "device tensor shape {} has a negative dimension", shape_str(dims));
  auto t = std::make_shared<DeviceTensor>();
  t->dtype = dtype;
  t->bytes = uint64_t(element_count(dims)) * dtype_size(dtype);
  t->dims = std::move(dims);
  t->handle = ep->alloc_device(t->bytes, fmt::format("allocating a {}-byte device tensor on EP '{}'", t->bytes, ep->lib->name()));
  t->ep = std::move(ep);
  return t;
}

namespace {

void transfer(const EpInstance& ep, nxrt_copy_region& r, const char* what) {
  r.struct_size = sizeof r;
  if (!r.bytes) return;
  const nxrt_copy_region* region = &r;
  check_plugin(*ep.lib, guarded(ep.lib->name(), "copy", [&] { return ep.lib->api().copy(ep.session, &region, 1, nullptr); }), what);
}

}  // namespace

void DeviceTensor::upload(const void* data, uint64_t n) const {
  if (n != bytes) raise(NXRT_ERR_INVALID_ARGUMENT, "upload of {} bytes into a device tensor of {} bytes ({} {})", n, bytes, dtype_name(dtype), shape_str(dims));
  if (!data && n) raise(NXRT_ERR_INVALID_ARGUMENT, "upload from NULL");
  nxrt_copy_region r{};
  r.src_memory = NXRT_MEMORY_HOST;
  r.src = data;
  r.dst_memory = NXRT_MEMORY_DEVICE;
  r.dst = handle;
  r.dst_offset = offset;
  r.bytes = n;
  transfer(*ep, r, "uploading a device tensor");
}

void DeviceTensor::download(void* data, uint64_t n) const {
  if (n != bytes) raise(NXRT_ERR_INVALID_ARGUMENT, "download of a device tensor of {} bytes ({} {}) into {} bytes", bytes, dtype_name(dtype), shape_str(dims), n);
  if (!data && n) raise(NXRT_ERR_INVALID_ARGUMENT, "download into NULL");
  nxrt_copy_region r{};
  r.src_memory = NXRT_MEMORY_DEVICE;
  r.src = handle;
  r.src_offset = offset;
  r.dst_memory = NXRT_MEMORY_HOST;
  r.dst = data;
  r.bytes = n;
  transfer(*ep, r, "downloading a device tensor");
}

DeviceTensor::~DeviceTensor() {
  if (ep && handle) ep->free_device(handle);
}

}  // namespace nxrt
