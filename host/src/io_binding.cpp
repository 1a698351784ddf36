// Device tensors of the I/O binding: allocation through the EP session (counted and
// capped by its memory policy) and synchronous transfers to and from host memory.
#include "io_binding.hpp"

#include "error.hpp"
#include "host_tensor.hpp"
#include "status.hpp"

#include <fmt/format.h>

namespace nxrt {

std::shared_ptr<DeviceTensor> DeviceTensor::allocate(std::shared_ptr<EpInstance> ep, nxrt_dtype dtype, std::vector<int64_t> dims) {
  if (dtype_size(dtype) == 0 || dtype == NXRT_DTYPE_STRING)
    raise(NXRT_ERR_UNSUPPORTED, "device tensors of {} are not supported{}", dtype_name(dtype),
          dtype == NXRT_DTYPE_STRING ? " (string tensors live in host memory)" : "");
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
// Native handles whose `value` is the byte offset of the memory inside the object: an
// import takes the object from offset 0 and the offset moves to the tensor.
bool value_is_offset(nxrt_native_type t) { return t == NXRT_NATIVE_VULKAN_BUFFER; }

// `native` as the plugin imports it (the whole object), and where the bytes start in it.
std::pair<nxrt_native_handle, uint64_t> whole_object(nxrt_native_handle native) {
  uint64_t offset = 0;
  if (value_is_offset(native.type)) {
    offset = native.value;
    native.size += native.value;
    native.value = 0;
  }
  native.struct_size = sizeof native;
  return {native, offset};
}
}  // namespace

std::shared_ptr<DeviceTensor> DeviceTensor::import(std::shared_ptr<EpInstance> ep, const nxrt_native_handle& native,
                                                   nxrt_dtype dtype, std::vector<int64_t> dims) {
  if (dtype_size(dtype) == 0 || dtype == NXRT_DTYPE_STRING)
    raise(NXRT_ERR_UNSUPPORTED, "device tensors of {} are not supported{}", dtype_name(dtype),
          dtype == NXRT_DTYPE_STRING ? " (string tensors live in host memory)" : "");
  for (auto d : dims)
    if (d < 0) raise(NXRT_ERR_INVALID_ARGUMENT, "device tensor shape {} has a negative dimension", shape_str(dims));
  const uint64_t bytes = uint64_t(element_count(dims)) * dtype_size(dtype);
  if (native.size < bytes)
    raise(NXRT_ERR_INVALID_ARGUMENT, "the native memory holds {} bytes, a {} {} tensor needs {}", native.size, dtype_name(dtype),
          shape_str(dims), bytes);
  auto [whole, offset] = whole_object(native);
  std::string why;
  void* h = ep->import_memory(whole, &why);
  if (!h) raise(NXRT_ERR_UNSUPPORTED, "cannot import native memory of type {}: {}", native.type, why);
  auto t = std::make_shared<DeviceTensor>();
  t->dtype = dtype;
  t->bytes = bytes;
  t->dims = std::move(dims);
  t->handle = h;
  t->offset = offset;
  t->imported = true;
  t->ep = std::move(ep);
  return t;
}

void DeviceTensor::upload(const void* data, uint64_t n) const {
  if (n != bytes) raise(NXRT_ERR_INVALID_ARGUMENT, "upload of {} bytes into a device tensor of {} bytes ({} {})", n, bytes, dtype_name(dtype), shape_str(dims));
  if (!data && n) raise(NXRT_ERR_INVALID_ARGUMENT, "upload from NULL");
  ep->copy(copy_region(NXRT_MEMORY_HOST, data, 0, NXRT_MEMORY_DEVICE, handle, offset, n), nullptr, "uploading a device tensor");
}

void DeviceTensor::download(void* data, uint64_t n) const {
  if (n != bytes) raise(NXRT_ERR_INVALID_ARGUMENT, "download of a device tensor of {} bytes ({} {}) into {} bytes", bytes, dtype_name(dtype), shape_str(dims), n);
  if (!data && n) raise(NXRT_ERR_INVALID_ARGUMENT, "download into NULL");
  ep->copy(copy_region(NXRT_MEMORY_DEVICE, handle, offset, NXRT_MEMORY_HOST, data, 0, n), nullptr, "downloading a device tensor");
}

// One side imports the other's memory (the destination first) and copies device to
// device on its own; false when neither can.
bool DeviceTensor::copy_by_import(const DeviceTensor& src, const DeviceTensor& dst) {
  for (const bool dst_imports : {true, false}) {
    const DeviceTensor& other = dst_imports ? src : dst;  // whose memory is imported
    EpInstance& importer = dst_imports ? *dst.ep : *src.ep;
    nxrt_native_handle native;
    if (!importer.lib->has(NXRT_FEATURE_MEMORY_IMPORT) || !other.ep->native_memory(other.handle, &native)) continue;
    auto [whole, base] = whole_object(native);
    std::string why;
    void* h = importer.import_memory(whole, &why);
    if (!h) continue;
    const nxrt_copy_region r =
        dst_imports ? copy_region(NXRT_MEMORY_DEVICE, h, base + src.offset, NXRT_MEMORY_DEVICE, dst.handle, dst.offset, src.bytes)
                    : copy_region(NXRT_MEMORY_DEVICE, src.handle, src.offset, NXRT_MEMORY_DEVICE, h, base + dst.offset, src.bytes);
    try {
      importer.copy(r, nullptr, "copying a device tensor through imported memory");
    } catch (...) {
      importer.free_device(h);
      throw;
    }
    importer.free_device(h);
    return true;
  }
  return false;
}

void DeviceTensor::copy(const DeviceTensor& src, const DeviceTensor& dst) {
  if (src.dtype != dst.dtype || src.dims != dst.dims)
    raise(NXRT_ERR_INVALID_ARGUMENT, "copy from a {} {} tensor into a {} {} one", dtype_name(src.dtype), shape_str(src.dims),
          dtype_name(dst.dtype), shape_str(dst.dims));
  if (!src.bytes) return;
  const nxrt_copy_region r = copy_region(NXRT_MEMORY_DEVICE, src.handle, src.offset, NXRT_MEMORY_DEVICE, dst.handle, dst.offset, src.bytes);
  if (src.ep == dst.ep) return dst.ep->copy(r, nullptr, "copying a device tensor");
  const PluginLibrary& lib = *dst.ep->lib;
  if (src.ep->lib == dst.ep->lib && lib.has(NXRT_FEATURE_PEER_COPY)) {
    const nxrt_copy_region* region = &r;
    nxrt_status* st = guarded(lib.name(), "copy_peer", [&] {
      return lib.api().copy_peer(dst.ep->session, src.ep->session, &region, 1, nullptr);
    });
    if (!st) return;
    if (st->code != NXRT_UNSUPPORTED) check_plugin(lib, st, "copying a device tensor between two EP sessions");
    release_status(st);  // this pair cannot: stage through the host
  }
  char* src_host = src.ep->host_addressable ? static_cast<char*>(src.handle) + src.offset : nullptr;
  char* dst_host = dst.ep->host_addressable ? static_cast<char*>(dst.handle) + dst.offset : nullptr;
  if (src_host) return dst.upload(src_host, src.bytes);
  if (dst_host) return src.download(dst_host, src.bytes);
  if (copy_by_import(src, dst)) return;
  // A bounce buffer: the source plugin's pinned memory when it offers it.
  void* pinned = src.ep->alloc_pinned(src.bytes);
  std::vector<char> plain(pinned ? 0 : src.bytes);
  char* bounce = pinned ? static_cast<char*>(pinned) : plain.data();
  try {
    src.download(bounce, src.bytes);
    dst.upload(bounce, src.bytes);
  } catch (...) {
    src.ep->free_pinned(pinned);
    throw;
  }
  src.ep->free_pinned(pinned);
}

DeviceTensor::~DeviceTensor() {
  if (ep && handle) ep->free_device(handle);
}

}  // namespace nxrt
