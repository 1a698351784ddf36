// TensorProto (.pb) decoding, independent of the host's own decoder so a
// host bug cannot hide behind a matching bug in the expected data.
#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>

#include "tensor_proto.hpp"

namespace conf {

namespace {
template <typename T, typename Src>
void put(std::vector<uint8_t>& out, size_t i, Src v) {
  T x = T(v);
  std::memcpy(out.data() + i * sizeof(T), &x, sizeof(T));
}
}  // namespace

std::string decode_tensor(const onnx::TensorProto& t, HostTensor& out, std::string* name) {
  if (name) *name = t.name();
  if (t.has_data_location() && t.data_location() == onnx::TensorProto::EXTERNAL) return "external data is not supported";
  out.dtype = nxrt_dtype(t.data_type());
  out.dims.assign(t.dims().begin(), t.dims().end());
  size_t es = dtype_size(out.dtype);
  if (es == 0) return std::string("element type ") + std::to_string(t.data_type()) + " is not supported";
  size_t n = size_t(numel(out.dims));
  out.bytes.assign(n * es, 0);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != n * es)
      return "raw_data has " + std::to_string(t.raw_data().size()) + " bytes, the shape needs " + std::to_string(n * es);
    std::memcpy(out.bytes.data(), t.raw_data().data(), n * es);
    return "";
  }
  auto need = [&](size_t have) { return have == n ? std::string() : "typed data has " + std::to_string(have) + " elements, the shape needs " + std::to_string(n); };
  switch (out.dtype) {
    case NXRT_DTYPE_FLOAT32:
      if (auto e = need(size_t(t.float_data_size())); !e.empty()) return e;
      for (size_t i = 0; i < n; ++i) put<float>(out.bytes, i, t.float_data(int(i)));
      return "";
    case NXRT_DTYPE_FLOAT64:
      if (auto e = need(size_t(t.double_data_size())); !e.empty()) return e;
      for (size_t i = 0; i < n; ++i) put<double>(out.bytes, i, t.double_data(int(i)));
      return "";
    case NXRT_DTYPE_INT64:
      if (auto e = need(size_t(t.int64_data_size())); !e.empty()) return e;
      for (size_t i = 0; i < n; ++i) put<int64_t>(out.bytes, i, t.int64_data(int(i)));
      return "";
    case NXRT_DTYPE_UINT32:
    case NXRT_DTYPE_UINT64:
      if (auto e = need(size_t(t.uint64_data_size())); !e.empty()) return e;
      for (size_t i = 0; i < n; ++i) {
        if (out.dtype == NXRT_DTYPE_UINT32) put<uint32_t>(out.bytes, i, t.uint64_data(int(i)));
        else put<uint64_t>(out.bytes, i, t.uint64_data(int(i)));
      }
      return "";
    case NXRT_DTYPE_INT32: case NXRT_DTYPE_INT16: case NXRT_DTYPE_INT8: case NXRT_DTYPE_UINT16:
    case NXRT_DTYPE_UINT8: case NXRT_DTYPE_BOOL: case NXRT_DTYPE_FLOAT16: case NXRT_DTYPE_BFLOAT16:
      if (auto e = need(size_t(t.int32_data_size())); !e.empty()) return e;
      for (size_t i = 0; i < n; ++i) {
        int32_t v = t.int32_data(int(i));
        switch (es) {
          case 4: put<int32_t>(out.bytes, i, v); break;
          case 2: put<uint16_t>(out.bytes, i, uint16_t(v)); break;  // float16/bfloat16 bits too
          default: put<uint8_t>(out.bytes, i, uint8_t(v)); break;
        }
      }
      return "";
    default:
      return "element type not supported";
  }
}

std::string read_tensor_pb(const std::string& path, HostTensor& out, std::string* name) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "cannot open " + path;
  onnx::TensorProto t;
  if (!t.ParseFromIstream(&f)) return path + " is not a TensorProto (sequence/optional/map data is not supported)";
  std::string e = decode_tensor(t, out, name);
  return e.empty() ? e : path + ": " + e;
}

}  // namespace conf
