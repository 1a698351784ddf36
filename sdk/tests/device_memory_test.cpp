// nxrt_sdk/device_memory.hpp: handles are the plugin's Buffer objects, copies are sorted into
// upload / download / on-device by memory kind, bad regions and foreign handles are refused.
#include <doctest/doctest.h>

#include <nxrt_sdk/device_memory.hpp>

#include <cstring>
#include <string>
#include <vector>

namespace sdk = nxrt::sdk;

namespace {

struct Buffer {
  std::vector<char> bytes;
  int* destroyed;
  char* foreign = nullptr;  // adopted memory: the owner's, never freed here
  ~Buffer() { ++*destroyed; }
};

class FakeDevice : public sdk::DeviceMemorySession<Buffer> {
 public:
  int uploads = 0, downloads = 0, device_copies = 0, destroyed = 0;
  void get_capability(const sdk::Graph&, nxrt_claim_sink*) override {}
  std::unique_ptr<sdk::Kernel> create_kernel(const sdk::Graph&) override { return nullptr; }
  std::unique_ptr<Buffer> allocate(uint64_t bytes, uint64_t) override {
    return std::unique_ptr<Buffer>(new Buffer{std::vector<char>(bytes), &destroyed});
  }
  void upload(sdk::DevicePtr<Buffer> dst, const void* src, uint64_t n, sdk::Stream*) override {
    ++uploads;
    std::memcpy(dst.buffer->bytes.data() + dst.offset, src, n);
  }
  void download(void* dst, sdk::DevicePtr<const Buffer> src, uint64_t n, sdk::Stream*) override {
    ++downloads;
    std::memcpy(dst, src.buffer->bytes.data() + src.offset, n);
  }
  void copy_on_device(sdk::DevicePtr<Buffer> dst, sdk::DevicePtr<const Buffer> src, uint64_t n, sdk::Stream*) override {
    ++device_copies;
    std::memmove(dst.buffer->bytes.data() + dst.offset, src.buffer->bytes.data() + src.offset, n);
  }
  nxrt_native_handle native_memory(const Buffer& b) override {
    nxrt_native_handle h{};
    h.type = NXRT_NATIVE_HOST_POINTER;
    h.handle = uint64_t(uintptr_t(b.bytes.data()));
    h.size = b.bytes.size();
    return h;
  }
  std::unique_ptr<Buffer> adopt(const nxrt_native_handle& n) override {
    if (n.type != NXRT_NATIVE_HOST_POINTER) sdk::fail(NXRT_UNSUPPORTED, "host pointers only");
    auto b = std::unique_ptr<Buffer>(new Buffer{{}, &destroyed});
    b->foreign = reinterpret_cast<char*>(uintptr_t(n.handle));
    return b;
  }
};

nxrt_copy_region region(nxrt_memory_kind sk, const void* src, uint64_t so, nxrt_memory_kind dk, void* dst, uint64_t dof, uint64_t n) {
  nxrt_copy_region r{};
  r.struct_size = sizeof r;
  r.src_memory = sk;
  r.dst_memory = dk;
  r.src = src;
  r.dst = dst;
  r.src_offset = so;
  r.dst_offset = dof;
  r.bytes = n;
  return r;
}

}  // namespace

TEST_CASE("device handles are Buffers; copies go through upload, download, copy_on_device") {
  FakeDevice s;
  void* a = s.alloc(NXRT_MEMORY_DEVICE, 16, 64);
  void* b = s.alloc(NXRT_MEMORY_DEVICE, 16, 64);
  REQUIRE(static_cast<Buffer*>(a)->bytes.size() == 16);
  const char host_in[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  char host_out[8] = {};
  nxrt_copy_region r[3] = {region(NXRT_MEMORY_HOST, host_in, 0, NXRT_MEMORY_DEVICE, a, 4, 8),
                           region(NXRT_MEMORY_DEVICE, a, 4, NXRT_MEMORY_DEVICE, b, 8, 8),
                           region(NXRT_MEMORY_DEVICE, b, 8, NXRT_MEMORY_HOST, host_out, 0, 8)};
  s.copy(r, nullptr);
  CHECK(s.uploads == 1);
  CHECK(s.device_copies == 1);
  CHECK(s.downloads == 1);
  CHECK(std::memcmp(host_in, host_out, 8) == 0);
  auto st = s.memory_stats();
  CHECK(st.host_to_device_copies == 1);
  CHECK(st.device_to_host_bytes == 8);
  s.free(NXRT_MEMORY_DEVICE, a);
  CHECK(s.destroyed == 1);
  s.free(NXRT_MEMORY_DEVICE, a);  // twice: ignored, not a double destroy
  CHECK(s.destroyed == 1);
  s.free(NXRT_MEMORY_DEVICE, b);
  CHECK(s.destroyed == 2);
}

TEST_CASE("regions past a buffer and foreign handles are refused before the plugin sees them") {
  FakeDevice s;
  void* a = s.alloc(NXRT_MEMORY_DEVICE, 16, 64);
  char host[32] = {};
  nxrt_copy_region over = region(NXRT_MEMORY_HOST, host, 0, NXRT_MEMORY_DEVICE, a, 12, 8);
  try {
    s.copy({&over, 1}, nullptr);
    FAIL("no error");
  } catch (const sdk::Error& e) {
    CHECK(e.code() == NXRT_INVALID_ARGUMENT);
    CHECK(std::string(e.what()).find("overrun a 16-byte device buffer") != std::string::npos);
  }
  int not_ours = 0;
  nxrt_copy_region foreign = region(NXRT_MEMORY_DEVICE, &not_ours, 0, NXRT_MEMORY_HOST, host, 0, 4);
  CHECK_THROWS_WITH_AS(s.copy({&foreign, 1}, nullptr), doctest::Contains("is not a device buffer of this session"), sdk::Error);
  CHECK(s.uploads + s.downloads == 0);
  s.free(NXRT_MEMORY_DEVICE, a);
}

TEST_CASE("HOST_PINNED memory is host memory; device_ptr refuses host tensors") {
  FakeDevice s;
  void* p = s.alloc(NXRT_MEMORY_HOST_PINNED, 100, 128);
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % 128 == 0);
  std::memset(p, 7, 100);  // addressable
  s.free(NXRT_MEMORY_HOST_PINNED, p);

  void* a = s.alloc(NXRT_MEMORY_DEVICE, 16, 64);
  const int64_t dims[1] = {4};
  nxrt_const_tensor t{};
  t.struct_size = sizeof t;
  t.dtype = NXRT_DTYPE_FLOAT32;
  t.rank = 1;
  t.dims = dims;
  t.data = a;
  t.byte_offset = 4;
  t.memory = NXRT_MEMORY_DEVICE;
  auto ptr = sdk::device_ptr<Buffer>(sdk::ConstTensorView(t));
  CHECK(ptr.buffer == static_cast<Buffer*>(a));
  CHECK(ptr.offset == 4);
  t.memory = NXRT_MEMORY_HOST;
  CHECK_THROWS_WITH_AS(sdk::device_ptr<Buffer>(sdk::ConstTensorView(t)), doctest::Contains("expected a device tensor"), sdk::Error);
  s.free(NXRT_MEMORY_DEVICE, a);
}

TEST_CASE("interop: native handles of live buffers only; adopted memory is tracked, never counted") {
  FakeDevice s;
  void* a = s.alloc(NXRT_MEMORY_DEVICE, 32, 64);
  auto h = s.native_handle(NXRT_NATIVE_OBJECT_MEMORY, a, nullptr);
  CHECK(h.handle == uint64_t(uintptr_t(static_cast<Buffer*>(a)->bytes.data())));
  CHECK(h.size == 32);
  int not_ours = 0;
  CHECK_THROWS_WITH_AS(s.native_handle(NXRT_NATIVE_OBJECT_MEMORY, &not_ours, nullptr),
                       doctest::Contains("is not a device buffer of this session"), sdk::Error);
  try {
    s.native_handle(NXRT_NATIVE_OBJECT_DEVICE, nullptr, nullptr);
    FAIL("no error");
  } catch (const sdk::Error& e) {
    CHECK(e.code() == NXRT_UNSUPPORTED);
  }
  const uint64_t in_use = s.memory_stats().bytes_in_use;
  char owner_memory[64] = {};
  nxrt_native_handle n{};
  n.struct_size = sizeof n;
  n.type = NXRT_NATIVE_HOST_POINTER;
  n.handle = uint64_t(uintptr_t(owner_memory));
  n.size = sizeof owner_memory;
  void* imported = s.import_memory(n);
  CHECK(static_cast<Buffer*>(imported)->foreign == owner_memory);
  CHECK(s.memory_stats().bytes_in_use == in_use);
  char host[8] = {};
  nxrt_copy_region past = region(NXRT_MEMORY_DEVICE, imported, 60, NXRT_MEMORY_HOST, host, 0, 8);
  CHECK_THROWS_AS(s.copy({&past, 1}, nullptr), sdk::Error);  // range-checked against native.size
  s.free(NXRT_MEMORY_DEVICE, imported);
  CHECK(s.memory_stats().bytes_in_use == in_use);
  n.type = NXRT_NATIVE_CUDA_POINTER;
  CHECK_THROWS_WITH_AS(s.import_memory(n), doctest::Contains("host pointers only"), sdk::Error);
  s.free(NXRT_MEMORY_DEVICE, a);
}
