#include "host_tensor.hpp"

#include "error.hpp"
#include "string_tensor.hpp"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <sstream>

namespace nxrt {

int64_t element_count(const std::vector<int64_t>& dims) {
  // Checked: a count past kMaxElements would overflow the byte sizes computed from it
  // (count * element size) and give a short buffer instead of an error.
  int64_t n = 1;
  for (auto d : dims)
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements || n < -kMaxElements)
      raise(NXRT_ERR_INVALID_ARGUMENT, "shape {} has more elements than a tensor may hold (2^59)", shape_str(dims));
  return n;
}

std::string shape_str(const int64_t* dims, size_t rank) {
  std::string s = "[";
  for (size_t i = 0; i < rank; ++i) {
    if (i) s += ',';
    s += dims[i] < 0 ? std::string("?") : std::to_string(dims[i]);
  }
  s += ']';
  return s;
}

int64_t HostTensor::numel() const { return element_count(dims); }

namespace {

template <typename Dst, typename Field>
void unpack(const Field& field, Bytes& out) {
  out.resize(size_t(field.size()) * sizeof(Dst));
  Dst* p = reinterpret_cast<Dst*>(out.data());
  for (int i = 0; i < field.size(); ++i) p[i] = static_cast<Dst>(field.Get(i));
}

std::string read_external(const onnx::TensorProto& t, const std::filesystem::path& base_dir) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::stoll(kv.value());
    else if (kv.key() == "length") length = std::stoll(kv.value());
  }
  if (location.empty()) raise(NXRT_ERR_MODEL, "tensor '{}' has external data without a location", t.name());
  if (base_dir.empty()) raise(NXRT_ERR_MODEL, "tensor '{}' uses external data but there is no model folder", t.name());
  namespace fs = std::filesystem;
  fs::path rel(location);
  if (rel.is_absolute()) raise(NXRT_ERR_MODEL, "tensor '{}': external data path '{}' is absolute; it must be inside the model's folder", t.name(), location);
  std::error_code ec;
  fs::path base = fs::weakly_canonical(base_dir, ec);
  fs::path full = fs::weakly_canonical(base / rel, ec);
  auto [b, f] = std::mismatch(base.begin(), base.end(), full.begin(), full.end());
  if (b != base.end()) raise(NXRT_ERR_MODEL, "tensor '{}': external data path '{}' leaves the model's folder", t.name(), location);
  std::ifstream in(full, std::ios::binary);
  if (!in) raise(NXRT_ERR_MODEL, "tensor '{}': cannot open external data file '{}'", t.name(), full.string());
  in.seekg(0, std::ios::end);
  int64_t size = in.tellg();
  if (offset < 0 || offset > size) raise(NXRT_ERR_MODEL, "tensor '{}': external data offset {} is past the end of '{}'", t.name(), offset, location);
  if (length < 0) length = size - offset;
  if (offset + length > size) raise(NXRT_ERR_MODEL, "tensor '{}': external data needs {} bytes at offset {} but '{}' has {}", t.name(), length, offset, location, size);
  std::string bytes(size_t(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  return bytes;
}

}  // namespace

HostTensor decode_tensor(const onnx::TensorProto& t, const std::filesystem::path& base_dir) {
  HostTensor out;
  out.name = t.name();
  out.dtype = static_cast<nxrt_dtype>(t.data_type());
  for (auto d : t.dims()) {
    if (d < 0) raise(NXRT_ERR_MODEL, "tensor '{}' has a negative dimension {}", t.name(), d);
    out.dims.push_back(d);
  }
  if (out.dtype == NXRT_DTYPE_STRING) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL || t.has_raw_data())
      raise(NXRT_ERR_MODEL, "string tensor '{}' must hold its strings in string_data (not raw or external data)", t.name());
    if (t.string_data_size() != out.numel())
      raise(NXRT_ERR_MODEL, "string tensor '{}' of shape {} needs {} strings but has {}", t.name(), shape_str(out.dims),
            out.numel(), t.string_data_size());
    return make_string_tensor(out.name, out.dims, {t.string_data().begin(), t.string_data().end()});
  }
  const size_t esize = dtype_size(out.dtype);
  if (esize == 0)
    raise(NXRT_ERR_UNSUPPORTED, "tensor '{}' has element type {} ({}), which nxrt does not support", t.name(),
          dtype_name(out.dtype), t.data_type());
  const size_t expect = size_t(out.numel()) * esize;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string bytes = read_external(t, base_dir);
    out.data.assign(bytes.begin(), bytes.end());
  } else if (t.has_raw_data()) {
    out.data.assign(t.raw_data().begin(), t.raw_data().end());
  } else {
    switch (out.dtype) {
      case NXRT_DTYPE_FLOAT32: unpack<float>(t.float_data(), out.data); break;
      case NXRT_DTYPE_FLOAT64: unpack<double>(t.double_data(), out.data); break;
      case NXRT_DTYPE_INT64: unpack<int64_t>(t.int64_data(), out.data); break;
      case NXRT_DTYPE_UINT32: case NXRT_DTYPE_UINT64:
        if (out.dtype == NXRT_DTYPE_UINT32) unpack<uint32_t>(t.uint64_data(), out.data);
        else unpack<uint64_t>(t.uint64_data(), out.data);
        break;
      case NXRT_DTYPE_INT32: unpack<int32_t>(t.int32_data(), out.data); break;
      case NXRT_DTYPE_INT16: unpack<int16_t>(t.int32_data(), out.data); break;
      case NXRT_DTYPE_UINT16: case NXRT_DTYPE_FLOAT16: case NXRT_DTYPE_BFLOAT16:
        unpack<uint16_t>(t.int32_data(), out.data); break;
      case NXRT_DTYPE_INT8: unpack<int8_t>(t.int32_data(), out.data); break;
      case NXRT_DTYPE_UINT8: case NXRT_DTYPE_BOOL: unpack<uint8_t>(t.int32_data(), out.data); break;
      default: break;
    }
  }
  if (out.data.size() != expect)
    raise(NXRT_ERR_MODEL, "tensor '{}' of shape [{}] {} needs {} bytes of data but has {}", t.name(),
          fmt::join(out.dims, ","), dtype_name(out.dtype), expect, out.data.size());
  return out;
}

void encode_tensor(const HostTensor& t, onnx::TensorProto& out) {
  out.Clear();
  out.set_name(t.name);
  out.set_data_type(int(t.dtype));
  for (auto d : t.dims) out.add_dims(d);
  if (t.dtype == NXRT_DTYPE_STRING) {
    for (size_t i = 0; i < t.data.size() / sizeof(nxrt_string); ++i) out.add_string_data(std::string(string_at(t.data.data(), i)));
    return;
  }
  out.set_raw_data(t.data.data(), t.data.size());
}

HostTensor read_tensor_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) raise(NXRT_ERR_NOT_FOUND, "cannot open tensor file '{}'", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  onnx::TensorProto t;
  if (!t.ParseFromString(bytes)) raise(NXRT_ERR_INVALID_ARGUMENT, "'{}' is not a valid ONNX TensorProto file", path.string());
  if (t.data_type() == 0) raise(NXRT_ERR_INVALID_ARGUMENT, "'{}' holds a tensor without an element type", path.string());
  try {
    return decode_tensor(t, path.parent_path());
  } catch (const HostError& e) {
    raise(e.code(), "'{}': {}", path.string(), e.what());
  }
}

void write_tensor_file(const std::filesystem::path& path, const HostTensor& t) {
  onnx::TensorProto p;
  encode_tensor(t, p);
  std::ofstream out(path, std::ios::binary);
  if (!out || !p.SerializeToOstream(&out)) raise(NXRT_ERR_RUNTIME, "cannot write tensor file '{}'", path.string());
}

}  // namespace nxrt
