#include "host_tensor.hpp"

#include <sys/mman.h>

#include "error.hpp"
#include "string_tensor.hpp"

#include <onnx/onnx_pb.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

namespace nxrt {

void advise_huge(void* p, size_t bytes) { ::madvise(p, bytes, MADV_HUGEPAGE); }

namespace {

// A non-negative decimal int64 (external data offset and length); anything else is refused.
int64_t external_number(const onnx::TensorProto& t, const std::string& key, const std::string& v) {
  int64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p != v.data() + v.size() || n < 0)
    raise(NXRT_ERR_MODEL, "tensor '{}': external data {} '{}' is not a non-negative 64-bit integer", t.name(), key, v);
  return n;
}

}  // namespace

ExternalData locate_external(const onnx::TensorProto& t, const std::filesystem::path& base_dir) {
  namespace fs = std::filesystem;
  ExternalData x;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") x.location = kv.value();
    else if (kv.key() == "offset") x.offset = external_number(t, "offset", kv.value());
    else if (kv.key() == "length") x.length = external_number(t, "length", kv.value());
  }
  if (x.location.empty()) raise(NXRT_ERR_MODEL, "tensor '{}' has external data without a location", t.name());
  if (base_dir.empty()) raise(NXRT_ERR_MODEL, "tensor '{}' uses external data but there is no model folder", t.name());
  const fs::path rel(x.location);
  if (rel.is_absolute())
    raise(NXRT_ERR_MODEL, "tensor '{}': external data path '{}' is absolute; it must be inside the model's folder", t.name(), x.location);
  // Canonical paths resolve `..` and symbolic links: where the bytes really are must be
  // inside the model's folder.
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(base_dir, ec);
  x.file = fs::weakly_canonical(base / rel, ec);
  auto [b, f] = std::mismatch(base.begin(), base.end(), x.file.begin(), x.file.end());
  if (b != base.end()) raise(NXRT_ERR_MODEL, "tensor '{}': external data path '{}' leaves the model's folder", t.name(), x.location);
  struct stat st {};
  if (::stat(x.file.c_str(), &st) != 0)
    raise(NXRT_ERR_MODEL, "tensor '{}': cannot open external data file '{}': {}", t.name(), x.location, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) raise(NXRT_ERR_MODEL, "tensor '{}': external data path '{}' is not a regular file", t.name(), x.location);
  // A hard link has no "real" path to check: a second name of a file outside the folder
  // looks inside. Files with more than one link are refused.
  if (st.st_nlink > 1)
    raise(NXRT_ERR_MODEL, "tensor '{}': external data file '{}' has {} hard links; nxrt refuses hard-linked data files "
          "(a hard link can make a file outside the model's folder appear inside it)", t.name(), x.location, st.st_nlink);
  return x;
}

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

// `expect`: the bytes the tensor's shape and type need; checked before anything is allocated.
std::string read_external(const onnx::TensorProto& t, const std::filesystem::path& base_dir, size_t expect) {
  const ExternalData x = locate_external(t, base_dir);
  std::ifstream in(x.file, std::ios::binary);
  if (!in) raise(NXRT_ERR_MODEL, "tensor '{}': cannot open external data file '{}'", t.name(), x.file.string());
  in.seekg(0, std::ios::end);
  const int64_t size = in.tellg();
  if (x.offset > size) raise(NXRT_ERR_MODEL, "tensor '{}': external data offset {} is past the end of '{}'", t.name(), x.offset, x.location);
  const int64_t length = x.length < 0 ? size - x.offset : x.length;
  if (length > size - x.offset)  // not offset + length: both may be near INT64_MAX
    raise(NXRT_ERR_MODEL, "tensor '{}': external data needs {} bytes at offset {} but '{}' has {}", t.name(), length, x.offset, x.location, size);
  if (uint64_t(length) != expect)
    raise(NXRT_ERR_MODEL, "tensor '{}' needs {} bytes of data but its external data in '{}' has {}", t.name(), expect, x.location, length);
  std::string bytes(size_t(length), '\0');
  in.seekg(x.offset);
  in.read(bytes.data(), length);
  if (in.gcount() != length) raise(NXRT_ERR_MODEL, "tensor '{}': cannot read {} bytes of '{}'", t.name(), length, x.location);
  return bytes;
}

std::vector<int64_t> checked_dims(const onnx::TensorProto& t) {
  std::vector<int64_t> dims;
  for (auto d : t.dims()) {
    if (d < 0) raise(NXRT_ERR_MODEL, "tensor '{}' has a negative dimension {}", t.name(), d);
    dims.push_back(d);
  }
  element_count(dims);  // refuses a count that overflows
  return dims;
}

// Calls f(field, Dst{}) with the typed field a tensor of this type keeps its values in and the
// element type they are stored as in memory; nothing for a type without one. The one mapping
// both the size check and decode_tensor's unpack use.
template <typename F>
void visit_typed_field(const onnx::TensorProto& t, nxrt_dtype dtype, F&& f) {
  switch (dtype) {
    case NXRT_DTYPE_FLOAT32: f(t.float_data(), float{}); break;
    case NXRT_DTYPE_FLOAT64: f(t.double_data(), double{}); break;
    case NXRT_DTYPE_INT64: f(t.int64_data(), int64_t{}); break;
    case NXRT_DTYPE_UINT32: f(t.uint64_data(), uint32_t{}); break;
    case NXRT_DTYPE_UINT64: f(t.uint64_data(), uint64_t{}); break;
    case NXRT_DTYPE_INT32: f(t.int32_data(), int32_t{}); break;
    case NXRT_DTYPE_INT16: f(t.int32_data(), int16_t{}); break;
    case NXRT_DTYPE_UINT16: case NXRT_DTYPE_FLOAT16: case NXRT_DTYPE_BFLOAT16: f(t.int32_data(), uint16_t{}); break;
    case NXRT_DTYPE_INT8: f(t.int32_data(), int8_t{}); break;
    case NXRT_DTYPE_UINT8: case NXRT_DTYPE_BOOL: f(t.int32_data(), uint8_t{}); break;
    default: break;
  }
}

// check_tensor_data_size with the dims already read (checked_dims).
void check_data_size(const onnx::TensorProto& t, const std::vector<int64_t>& dims) {
  const auto dtype = static_cast<nxrt_dtype>(t.data_type());
  if (dtype == NXRT_DTYPE_STRING) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL || t.has_raw_data())
      raise(NXRT_ERR_MODEL, "string tensor '{}' must hold its strings in string_data (not raw or external data)", t.name());
    if (t.string_data_size() != element_count(dims))
      raise(NXRT_ERR_MODEL, "string tensor '{}' of shape {} needs {} strings but has {}", t.name(), shape_str(dims),
            element_count(dims), t.string_data_size());
    return;
  }
  const size_t esize = dtype_size(dtype);
  // External data is checked where it is read; types nxrt does not support are refused there too.
  if (esize == 0 || t.data_location() == onnx::TensorProto::EXTERNAL) return;
  const size_t expect = size_t(element_count(dims)) * esize;
  size_t has = t.raw_data().size();
  if (!t.has_raw_data()) visit_typed_field(t, dtype, [&](const auto& field, auto) { has = size_t(field.size()) * esize; });
  if (has != expect)
    raise(NXRT_ERR_MODEL, "tensor '{}' of shape [{}] {} needs {} bytes of data but has {}", t.name(), fmt::join(dims, ","),
          dtype_name(dtype), expect, has);
}

}  // namespace

void check_tensor_data_size(const onnx::TensorProto& t) { check_data_size(t, checked_dims(t)); }

HostTensor decode_tensor(const onnx::TensorProto& t, const std::filesystem::path& base_dir) {
  HostTensor out;
  out.name = t.name();
  out.dtype = static_cast<nxrt_dtype>(t.data_type());
  out.dims = checked_dims(t);
  if (out.dtype == NXRT_DTYPE_STRING) {
    check_data_size(t, out.dims);
    return make_string_tensor(out.name, out.dims, {t.string_data().begin(), t.string_data().end()});
  }
  const size_t esize = dtype_size(out.dtype);
  if (esize == 0)
    raise(NXRT_ERR_UNSUPPORTED, "tensor '{}' has element type {} ({}), which nxrt does not support", t.name(),
          dtype_name(out.dtype), t.data_type());
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string bytes = read_external(t, base_dir, size_t(out.numel()) * esize);
    out.data.assign(bytes.begin(), bytes.end());
    return out;
  }
  check_data_size(t, out.dims);  // before anything is allocated
  if (t.has_raw_data()) out.data.assign(t.raw_data().begin(), t.raw_data().end());
  else visit_typed_field(t, out.dtype, [&](const auto& field, auto dst) { unpack<decltype(dst)>(field, out.data); });
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
