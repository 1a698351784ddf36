// Device interop (EP ABI 2.1) through the public C++ wrapper (nxrt.hpp over libnxrt):
// device tensors and I/O binding, the caller's streams, the caller's allocator, memory
// accounting and the memory cap. devmem (a simulated discrete device whose streams run
// only when synchronized) tests the host's logic; Vulkan (lavapipe here) tests it for real.
#include "doctest_skip.hpp"

#include <nxrt/nxrt.hpp>

#include <onnx/onnx_pb.h>
#include <vulkan/vulkan.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

std::string lib_path(const std::string& name) { return std::string(NXRT_LIB_DIR) + "/libnxrt_ep_" + name + ".so"; }
std::string test_plugin_path(const std::string& name) {
  return std::string(NXRT_TEST_PLUGIN_DIR) + "/libnxrt_ep_" + name + ".so";
}

// A chain of unary nodes {op, input, output} from x[rows,cols] to y, written to a temporary
// file; rows < 0: a symbolic "N".
std::string chain_model(const std::string& name, int64_t rows, int64_t cols,
                        const std::vector<std::array<const char*, 3>>& chain) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name(name);
  auto io = [&](onnx::ValueInfoProto* v, const char* value) {
    v->set_name(value);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    auto* d0 = tt->mutable_shape()->add_dim();
    if (rows < 0) d0->set_dim_param("N");
    else d0->set_dim_value(rows);
    tt->mutable_shape()->add_dim()->set_dim_value(cols);
  };
  io(g->add_input(), "x");
  io(g->add_output(), "y");
  for (auto& c : chain) {
    auto* n = g->add_node();
    n->set_op_type(c[0]);
    n->add_input(c[1]);
    n->add_output(c[2]);
  }
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("nxrt_interop_" + name + "_" + std::to_string(rows) + "x" + std::to_string(cols) + "_" + std::to_string(::getpid()) + ".onnx"))
                               .string();
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
  return path;
}

// x[rows,cols] -> Relu -> Relu -> y.
std::string relu_model(int64_t rows, int64_t cols) { return chain_model("relu2", rows, cols, {{"Relu", "x", "r"}, {"Relu", "r", "y"}}); }

nxrt::Env make_env(std::initializer_list<std::string> plugins) {
  nxrt::Env env(false);
  for (auto& p : plugins) env.register_plugin(p == "devmem" ? test_plugin_path(p) : lib_path(p));
  return env;
}

bool has_vulkan_device(nxrt::Env& env) {
  for (auto& p : env.plugins())
    if (std::string(p.name) == "vulkan") return p.loaded && p.device_count > 0;
  return false;
}

// The vulkan.host_import_alignment property of device 0 (0: no host-memory import).
uint64_t vulkan_host_import_alignment(nxrt::Env& env) {
  const auto plugins = env.plugins();
  for (size_t i = 0; i < plugins.size(); ++i) {
    if (std::string(plugins[i].name) != "vulkan" || !plugins[i].loaded || plugins[i].device_count == 0) continue;
    const std::string text = env.device_description(i, 0);
    const std::string key = "vulkan.host_import_alignment";
    size_t at = text.find(key);
    REQUIRE(at != std::string::npos);
    at += key.size();
    while (at < text.size() && !std::isdigit(static_cast<unsigned char>(text[at]))) ++at;
    return std::strtoull(text.c_str() + at, nullptr, 10);
  }
  return 0;
}

std::vector<float> host_floats(const nxrt_host_tensor& t) {
  size_t n = 1;
  for (uint32_t i = 0; i < t.rank; ++i) n *= size_t(t.dims[i]);
  const float* p = static_cast<const float*>(t.data);
  return std::vector<float>(p, p + n);
}

nxrt_memory_stats plugin_stats(const nxrt::Session& s, const std::string& ep) {
  nxrt_memory_usage u = s.memory_usage(ep);
  REQUIRE(u.has_plugin_stats);
  return u.plugin;
}

const std::vector<float> kX = {-1, 2, -3, 4, -5, 6};
const std::vector<float> kY = {0, 2, 0, 4, 0, 6};

}  // namespace

// ---------------------------------------------------------------------------------- devmem

TEST_CASE("io binding (devmem): device input and output stay on the device across 100 runs") {
  auto env = make_env({"devmem"});
  nxrt::Model model(relu_model(2, 3));
  nxrt::Session s(env, model, "devmem");
  const std::vector<int64_t> dims{2, 3};
  // Host path first: the reference.
  nxrt_host_tensor in{"x", 1, 2, dims.data(), kX.data()};
  CHECK(host_floats(s.run({in})[0]) == kY);

  nxrt::DeviceTensor x(s, "devmem", 1, dims), y(s, "devmem", 1, dims);
  x.upload(kX.data(), kX.size() * 4);
  nxrt::Binding b(s);
  b.bind_input("x", x);
  b.bind_output("y", y);
  const nxrt_memory_stats before = plugin_stats(s, "devmem");
  for (int i = 0; i < 100; ++i) {
    auto out = s.run(b);
    REQUIRE(out.size() == 1);
    CHECK(out[0].data == nullptr);  // on the device: shape only
    CHECK(out[0].rank == 2);
  }
  const nxrt_memory_stats after = plugin_stats(s, "devmem");
  CHECK(after.host_to_device_copies == before.host_to_device_copies);
  CHECK(after.device_to_host_copies == before.device_to_host_copies);
  CHECK(y.download<float>() == kY);

  // Left on the device: each run makes the tensor, the binding hands it out.
  b.bind_output_to_device("y", "devmem");
  s.run(b);
  nxrt::DeviceTensor left = b.output("y");
  CHECK(left.dims() == dims);
  CHECK(left.download<float>() == kY);
  CHECK(plugin_stats(s, "devmem").host_to_device_copies == after.host_to_device_copies);
  // And back to the host.
  b.bind_output_to_host("y");
  CHECK(host_floats(s.run(b)[0]) == kY);
}

TEST_CASE("io binding (devmem): wrong bindings are clear errors, and the session stays usable") {
  auto env = make_env({"devmem"});
  nxrt::Model model(relu_model(2, 3));
  nxrt::Session s(env, model, "devmem");
  nxrt::DeviceTensor wrong(s, "devmem", 1, {3, 2});
  nxrt::Binding b(s);
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const nxrt::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([&] { b.bind_output("y", wrong); }).find("output 'y' has shape [2,3] but the device tensor is [3,2]") !=
        std::string::npos);
  CHECK(message([&] { b.bind_input("nope", wrong); }).find("no input named 'nope'") != std::string::npos);
  CHECK(message([&] { s.run(b); }).find("input 'x' is not bound") != std::string::npos);
  b.bind_input("x", wrong);
  CHECK(message([&] { s.run(b); }).find("input 'x' has shape [3,2] but the model expects [2,3]") != std::string::npos);
  CHECK(message([&] { nxrt::DeviceTensor t(s, "cpu", 1, {1}); }).find("no EP 'cpu'") != std::string::npos);
  const std::vector<int64_t> dims{2, 3};
  nxrt_host_tensor in{"x", 1, 2, dims.data(), kX.data()};
  CHECK(host_floats(s.run({in})[0]) == kY);
}

TEST_CASE("caller stream (devmem): a device-resident run returns without waiting; the stream completes it") {
  auto env = make_env({"devmem"});
  nxrt::Model model(relu_model(2, 3));
  nxrt::Session s(env, model, "devmem");
  const std::vector<int64_t> dims{2, 3};
  nxrt::DeviceTensor x(s, "devmem", 1, dims), y(s, "devmem", 1, dims);
  x.upload(kX.data(), 24);
  const std::vector<float> sentinel(6, 42.f);
  y.upload(sentinel.data(), 24);
  nxrt::DeviceStream stream = s.create_stream("devmem");
  nxrt::Binding b(s);
  b.bind_input("x", x);
  b.bind_output("y", y);
  s.run(b, &stream);
  // devmem runs queued work only when its stream is synchronized: nothing ran yet, so
  // the run did not wait for the device.
  CHECK(y.download<float>() == sentinel);
  stream.synchronize();
  CHECK(y.download<float>() == kY);
  // The next run on the session's own streams reuses the run state the caller's stream
  // used: it is ordered after it and correct.
  nxrt_host_tensor in{"x", 1, 2, dims.data(), kX.data()};
  CHECK(host_floats(s.run({in})[0]) == kY);
  // Released with a run still queued on it: the release waits for that run, and the
  // session never touches the stream again.
  {
    nxrt::DeviceStream other = s.create_stream("devmem");
    y.upload(sentinel.data(), 24);
    s.run(b, &other);
    CHECK(y.download<float>() == sentinel);
  }
  CHECK(y.download<float>() == kY);
  CHECK(host_floats(s.run({in})[0]) == kY);
}

TEST_CASE("memory cap (devmem): going over it is RESOURCE_EXHAUSTED; a smaller input then runs") {
  auto env = make_env({"devmem"});
  nxrt::Model model(relu_model(-1, 64));
  nxrt::SessionOptions o;
  o.eps = "devmem";
  o.device_memory_limit = 64 * 1024;
  nxrt::Session s(env, model, o);
  auto run_rows = [&](int64_t rows) {
    std::vector<float> x(size_t(rows * 64), -1.f);
    x[0] = 3.f;
    const std::vector<int64_t> dims{rows, 64};
    nxrt_host_tensor in{"x", 1, 2, dims.data(), x.data()};
    return host_floats(s.run({in})[0]);
  };
  try {
    run_rows(1024);  // 256 KiB per value
    FAIL("no error");
  } catch (const nxrt::Error& e) {
    CHECK(e.code() == NXRT_ERR_RESOURCE_EXHAUSTED);
    CHECK(std::string(e.what()).find("device memory limit is 65536 bytes") != std::string::npos);
  }
  CHECK(s.memory_usage("devmem").bytes_in_use == 0);  // nothing leaked by the failed run
  auto y = run_rows(8);
  CHECK(y.size() == 8 * 64);
  CHECK(y[0] == 3.f);
  CHECK(y[1] == 0.f);
  const nxrt_memory_usage u = s.memory_usage("devmem");
  CHECK(u.limit_bytes == 64 * 1024);
  CHECK(u.peak_bytes > 0);
  CHECK(u.peak_bytes <= 64 * 1024);
  CHECK(u.allocation_count > 0);
  // Device tensors count too.
  CHECK_THROWS_AS(nxrt::DeviceTensor(s, "devmem", 1, {1024, 64}), nxrt::Error);
}

// ------------------------------------------------------------------------------------- cpu

namespace {

// A counting allocator for host memory (CPU-like EPs ask for HOST_POINTER).
struct CountingAllocator {
  std::mutex mu;
  std::map<uint64_t, uint64_t> live;  // handle -> bytes
  uint64_t calls = 0, live_bytes = 0, total_bytes = 0;
  std::vector<nxrt_native_type> types;
  uint64_t attempts = 0, fail_at = 0;  // fail_at > 0: allocation number fail_at is refused
  nxrt_device_allocator table{};
  explicit CountingAllocator(int32_t (*alloc)(void*, const nxrt_allocation_request*, nxrt_native_handle*),
                             void (*free)(void*, const nxrt_native_handle*)) {
    table.struct_size = sizeof table;
    table.user = this;
    table.alloc = alloc;
    table.free = free;
  }
  void add(uint64_t handle, uint64_t bytes, nxrt_native_type type) {
    std::lock_guard lock(mu);
    live[handle] = bytes;
    ++calls;
    live_bytes += bytes;
    total_bytes += bytes;
    types.push_back(type);
  }
  // Counts an allocation attempt; true when this one is to be refused (failure injection).
  bool refuse() {
    std::lock_guard lock(mu);
    return ++attempts == fail_at;
  }
  void remove(uint64_t handle) {
    std::lock_guard lock(mu);
    auto it = live.find(handle);
    REQUIRE(it != live.end());
    live_bytes -= it->second;
    live.erase(it);
  }
};

int32_t host_alloc(void* user, const nxrt_allocation_request* rq, nxrt_native_handle* out) {
  auto* a = static_cast<CountingAllocator*>(user);
  if (rq->type != NXRT_NATIVE_HOST_POINTER || a->refuse()) return 1;
  const uint64_t align = std::max<uint64_t>(rq->alignment, 64);
  void* p = std::aligned_alloc(align, (rq->bytes + align - 1) / align * align);
  if (!p) return 1;
  out->type = NXRT_NATIVE_HOST_POINTER;
  out->handle = uint64_t(uintptr_t(p));
  out->size = rq->bytes;
  a->add(out->handle, rq->bytes, rq->type);
  return 0;
}
void host_free(void* user, const nxrt_native_handle* h) {
  static_cast<CountingAllocator*>(user)->remove(h->handle);
  std::free(reinterpret_cast<void*>(uintptr_t(h->handle)));
}

}  // namespace

TEST_CASE("cpu: device tensors are host memory with HOST_POINTER handles; the caller's allocator gets every byte") {
  auto env = make_env({"cpu"});
  CountingAllocator alloc(host_alloc, host_free);
  {
    nxrt::Model model(relu_model(2, 3));
    nxrt::SessionOptions o;
    o.eps = "cpu";
    o.device_allocator = &alloc.table;
    nxrt::Session s(env, model, o);
    const std::vector<int64_t> dims{2, 3};
    nxrt::DeviceTensor x(s, "cpu", 1, dims), y(s, "cpu", 1, dims);
    x.upload(kX.data(), 24);
    const nxrt_native_handle h = x.native();
    CHECK(h.type == NXRT_NATIVE_HOST_POINTER);
    CHECK(std::memcmp(reinterpret_cast<const void*>(uintptr_t(h.handle)), kX.data(), 24) == 0);
    nxrt::Binding b(s);
    b.bind_input("x", x);
    b.bind_output("y", y);
    for (int i = 0; i < 3; ++i) s.run(b);
    CHECK(y.download<float>() == kY);
    CHECK(alloc.calls >= 2);
    const nxrt_memory_stats st = plugin_stats(s, "cpu");
    CHECK(st.reserved_bytes == alloc.live_bytes);
    CHECK(st.bytes_in_use >= 48);
  }
  CHECK(alloc.live_bytes == 0);
  CHECK(alloc.live.empty());
}

// ---------------------------------------------------------------------------------- vulkan

namespace {

std::string cnn32_path() { return std::string(NXRT_TESTDATA) + "/bench-models/cnn32.onnx"; }

std::vector<float> random_image(size_t n) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST_CASE("io binding (vulkan): the cnn with device-resident input and output, 10 runs, no per-run transfer") {
  auto env = make_env({"vulkan"});
  if (!has_vulkan_device(env)) NXRT_SKIP_CASE("no Vulkan device");
  nxrt::Model model(cnn32_path());
  nxrt::Session s(env, model, "vulkan");
  const std::vector<int64_t> in_dims{1, 3, 32, 32}, out_dims{1, 1000};
  const std::vector<float> image = random_image(3 * 32 * 32);
  nxrt_host_tensor in{"input", 1, 4, in_dims.data(), image.data()};
  const std::vector<float> reference = host_floats(s.run({in})[0]);

  nxrt::DeviceTensor x(s, "vulkan", 1, in_dims), y(s, "vulkan", 1, out_dims);
  x.upload(image.data(), image.size() * 4);  // asked for: one upload
  nxrt::Binding b(s);
  b.bind_input("input", x);
  b.bind_output("output", y);
  const nxrt_memory_stats before = plugin_stats(s, "vulkan");
  for (int i = 0; i < 10; ++i) s.run(b);  // 1.5 s a run on lavapipe
  const nxrt_memory_stats after = plugin_stats(s, "vulkan");
  CHECK(after.host_to_device_copies == before.host_to_device_copies);
  CHECK(after.device_to_host_copies == before.device_to_host_copies);
  CHECK(after.device_to_device_copies == before.device_to_device_copies);
  const std::vector<float> got = y.download<float>();  // asked for: one download
  CHECK(plugin_stats(s, "vulkan").device_to_host_copies == after.device_to_host_copies + 1);
  CHECK(max_abs_diff(got, reference) <= 1e-5f);
  // Memory accounting: arena, constants and the two tensors are held on the device.
  const nxrt_memory_usage u = s.memory_usage("vulkan");
  CHECK(u.bytes_in_use >= x.info().bytes + y.info().bytes + 11'000'000ull * 4);
  CHECK(u.arena_bytes > 0);
  CHECK(u.plugin.bytes_in_use >= u.bytes_in_use);
  CHECK(u.plugin.reserved_bytes >= u.plugin.bytes_in_use);
}

namespace {

// Vulkan objects the test itself creates on the session's VkDevice.
struct CallerVulkan {
  VkDevice dev;
  VkQueue queue;
  uint32_t family;
  VkCommandPool pool = VK_NULL_HANDLE;
  CallerVulkan(const nxrt_native_handle& d, const nxrt_native_handle& q)
      : dev(reinterpret_cast<VkDevice>(uintptr_t(d.handle))), queue(reinterpret_cast<VkQueue>(uintptr_t(q.handle))),
        family(uint32_t(d.value)) {
    VkCommandPoolCreateInfo ci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    ci.queueFamilyIndex = family;
    REQUIRE(vkCreateCommandPool(dev, &ci, nullptr, &pool) == VK_SUCCESS);
  }
  ~CallerVulkan() { vkDestroyCommandPool(dev, pool, nullptr); }
  VkSemaphore timeline(uint64_t initial) {
    VkSemaphoreTypeCreateInfo t{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
    t.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    t.initialValue = initial;
    VkSemaphoreCreateInfo ci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    ci.pNext = &t;
    VkSemaphore s;
    REQUIRE(vkCreateSemaphore(dev, &ci, nullptr, &s) == VK_SUCCESS);
    return s;
  }
  uint64_t value(VkSemaphore s) {
    uint64_t v = 0;
    REQUIRE(vkGetSemaphoreCounterValue(dev, s, &v) == VK_SUCCESS);
    return v;
  }
  // Records `record`, submits it waiting for `wait` >= wait_value and signalling `signal` = signal_value.
  template <typename F>
  VkCommandBuffer submit(F&& record, VkSemaphore wait, uint64_t wait_value, VkSemaphore signal, uint64_t signal_value) {
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkCommandBuffer cmd;
    REQUIRE(vkAllocateCommandBuffers(dev, &ai, &cmd) == VK_SUCCESS);
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    vkBeginCommandBuffer(cmd, &bi);
    record(cmd);
    REQUIRE(vkEndCommandBuffer(cmd) == VK_SUCCESS);
    VkTimelineSemaphoreSubmitInfo ti{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
    ti.waitSemaphoreValueCount = 1;
    ti.pWaitSemaphoreValues = &wait_value;
    ti.signalSemaphoreValueCount = 1;
    ti.pSignalSemaphoreValues = &signal_value;
    const VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.pNext = &ti;
    si.waitSemaphoreCount = 1;
    si.pWaitSemaphores = &wait;
    si.pWaitDstStageMask = &stage;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    si.signalSemaphoreCount = 1;
    si.pSignalSemaphores = &signal;
    REQUIRE(vkQueueSubmit(queue, 1, &si, VK_NULL_HANDLE) == VK_SUCCESS);
    return cmd;
  }
};

VkBuffer buffer_of(const nxrt::DeviceTensor& t, VkDeviceSize* offset) {
  const nxrt_native_handle h = t.native();
  REQUIRE(h.type == NXRT_NATIVE_VULKAN_BUFFER);
  *offset = h.value;
  return VkBuffer(h.handle);
}

}  // namespace

TEST_CASE("caller stream (vulkan): a run on an imported timeline is ordered after the caller's work and before the caller's next") {
  auto env = make_env({"vulkan"});
  if (!has_vulkan_device(env)) NXRT_SKIP_CASE("no Vulkan device");
  nxrt::Model model(relu_model(4, 256));
  nxrt::Session s(env, model, "vulkan");
  CallerVulkan vk(s.native_handle("vulkan", NXRT_NATIVE_OBJECT_DEVICE), s.native_handle("vulkan", NXRT_NATIVE_OBJECT_QUEUE));
  const std::vector<int64_t> dims{4, 256};
  nxrt::DeviceTensor x(s, "vulkan", 1, dims), y(s, "vulkan", 1, dims), z(s, "vulkan", 1, dims);
  const std::vector<float> minus(1024, -1.f);
  x.upload(minus.data(), 4096);  // the run would give all zeros from this
  VkDeviceSize xo, yo, zo;
  VkBuffer xb = buffer_of(x, &xo), yb = buffer_of(y, &yo), zb = buffer_of(z, &zo);

  VkSemaphore gate = vk.timeline(0), timeline = vk.timeline(0);
  // The caller's work: once the host opens the gate, fill x with 2.0f; signals timeline = 1.
  uint32_t two;
  const float f2 = 2.f;
  std::memcpy(&two, &f2, 4);
  VkCommandBuffer fill = vk.submit([&](VkCommandBuffer c) { vkCmdFillBuffer(c, xb, xo, 4096, two); }, gate, 1, timeline, 1);

  nxrt_native_handle point{};
  point.struct_size = sizeof point;
  point.type = NXRT_NATIVE_VULKAN_TIMELINE;
  point.handle = uint64_t(timeline);
  point.value = 1;
  nxrt::DeviceStream stream = s.import_stream("vulkan", point);
  nxrt::Binding b(s);
  b.bind_input("x", x);
  b.bind_output("y", y);
  s.run(b, &stream);  // returns without waiting: its work waits for timeline = 1
  const nxrt_native_handle done = stream.native();
  CHECK(done.type == NXRT_NATIVE_VULKAN_TIMELINE);
  CHECK(done.handle == uint64_t(timeline));
  CHECK(done.value > 1);
  CHECK(vk.value(timeline) == 0);  // nothing ran: the gate is closed

  // The caller's next work waits for the run on the device: copy y to z.
  VkSemaphore after = vk.timeline(0);
  VkCommandBuffer copy = vk.submit(
      [&](VkCommandBuffer c) {
        VkBufferCopy r{yo, zo, 4096};
        vkCmdCopyBuffer(c, yb, zb, 1, &r);
      },
      timeline, done.value, after, 1);

  VkSemaphoreSignalInfo open{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO};
  open.semaphore = gate;
  open.value = 1;
  REQUIRE(vkSignalSemaphore(vk.dev, &open) == VK_SUCCESS);
  VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  wi.semaphoreCount = 1;
  wi.pSemaphores = &after;
  const uint64_t one = 1;
  wi.pValues = &one;
  REQUIRE(vkWaitSemaphores(vk.dev, &wi, 10'000'000'000ull) == VK_SUCCESS);
  CHECK(y.download<float>() == std::vector<float>(1024, 2.f));  // saw the caller's fill
  CHECK(z.download<float>() == std::vector<float>(1024, 2.f));  // the caller's copy saw the run
  vkFreeCommandBuffers(vk.dev, vk.pool, 1, &fill);
  vkFreeCommandBuffers(vk.dev, vk.pool, 1, &copy);
  stream.synchronize();
  vkDestroySemaphore(vk.dev, after, nullptr);
  vkDestroySemaphore(vk.dev, gate, nullptr);
  // The stream must go before its imported semaphore.
  { nxrt::DeviceStream gone = std::move(stream); }
  vkDestroySemaphore(vk.dev, timeline, nullptr);
}

namespace {

int32_t vulkan_alloc(void* user, const nxrt_allocation_request* rq, nxrt_native_handle* out) {
  auto* a = static_cast<CountingAllocator*>(user);
  if (rq->type != NXRT_NATIVE_VULKAN_MEMORY || a->refuse()) return 1;
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = rq->bytes;
  ai.memoryTypeIndex = rq->memory_type_index;
  VkDeviceMemory mem;
  if (vkAllocateMemory(reinterpret_cast<VkDevice>(uintptr_t(rq->device)), &ai, nullptr, &mem) != VK_SUCCESS) return 1;
  out->type = NXRT_NATIVE_VULKAN_MEMORY;
  out->handle = uint64_t(mem);
  out->aux0 = rq->device;
  out->value = rq->memory_type_index;
  out->size = rq->bytes;
  a->add(out->handle, rq->bytes, rq->type);
  return 0;
}
void vulkan_free(void* user, const nxrt_native_handle* h) {
  static_cast<CountingAllocator*>(user)->remove(h->handle);
  vkFreeMemory(reinterpret_cast<VkDevice>(uintptr_t(h->aux0)), VkDeviceMemory(h->handle), nullptr);
}

}  // namespace

TEST_CASE("external allocator (vulkan): every device byte of the session comes from the caller") {
  auto env = make_env({"vulkan"});
  if (!has_vulkan_device(env)) NXRT_SKIP_CASE("no Vulkan device");
  CountingAllocator alloc(vulkan_alloc, vulkan_free);
  {
    nxrt::Model model(relu_model(4, 256));
    nxrt::SessionOptions o;
    o.eps = "vulkan";
    o.device_allocator = &alloc.table;
    nxrt::Session s(env, model, o);
    const std::vector<float> x(1024, -0.5f);
    const std::vector<int64_t> dims{4, 256};
    nxrt_host_tensor in{"x", 1, 2, dims.data(), x.data()};
    CHECK(host_floats(s.run({in})[0]) == std::vector<float>(1024, 0.f));
    nxrt::DeviceTensor t(s, "vulkan", 1, {1 << 20});
    CHECK(alloc.calls > 0);
    for (auto type : alloc.types) CHECK(type == NXRT_NATIVE_VULKAN_MEMORY);
    const nxrt_memory_stats st = plugin_stats(s, "vulkan");
    CHECK(st.reserved_bytes == alloc.live_bytes);  // nothing reserved behind the allocator's back
    CHECK(st.bytes_in_use <= st.reserved_bytes);
    CHECK(st.bytes_in_use >= (1u << 22));
  }
  CHECK(alloc.live_bytes == 0);
}

namespace {

// Failure injection: a session's life (creation, three runs, a device tensor) through the
// caller's allocator, once to count its allocations, then once per allocation with that one
// refused. Each refusal is an error that names memory, or the plugin copes (retries, falls
// back); never a crash, a wrong output or memory left allocated; and the next session works.
// `eps` "vulkan,cpu" runs x -> Relu -> Round (cpu) -> Relu, so pinned staging memory is
// allocated too; "cpu" runs x -> Relu -> Relu.
void every_allocation_refused(nxrt::Env& env, const std::string& eps,
                              int32_t (*alloc)(void*, const nxrt_allocation_request*, nxrt_native_handle*),
                              void (*free)(void*, const nxrt_native_handle*)) {
  const bool mixed = eps != "cpu";
  const std::string ep = eps.substr(0, eps.find(','));
  nxrt::Model model(mixed ? chain_model("mixed", 4, 256, {{"Relu", "x", "r"}, {"Round", "r", "q"}, {"Relu", "q", "y"}})
                          : relu_model(4, 256));
  const std::vector<int64_t> dims{4, 256};
  std::vector<float> x(1024), want(1024);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = float(int(i % 29) - 14) * 0.3f;
    want[i] = mixed ? std::nearbyint(std::max(x[i], 0.f)) : std::max(x[i], 0.f);
  }
  // "" when the whole life went right; else the first error. A run that failed is tried
  // again on the same session (the refusal was one allocation): it must then succeed.
  auto life = [&](CountingAllocator& a) -> std::string {
    nxrt::SessionOptions o;
    o.eps = eps;
    o.device_allocator = &a.table;
    std::optional<nxrt::Session> s;
    try {
      s.emplace(env, model, o);
    } catch (const nxrt::Error& e) {
      return e.what();
    }
    std::string first;
    nxrt_host_tensor in{"x", 1, 2, dims.data(), x.data()};
    for (int i = 0; i < 3; ++i) {
      try {
        auto out = s->run({in});  // outside CHECK, which would swallow the error
        CHECK(host_floats(out[0]) == want);
      } catch (const nxrt::Error& e) {
        if (!first.empty()) FAIL("a second run failed after one refused allocation: " << e.what());
        first = e.what();
        --i;  // the same run again
      }
    }
    // A small device tensor (inside a block the plugin holds) and one larger than its
    // blocks (an allocation of its own).
    for (int64_t n : {int64_t(1) << 16, int64_t(20) << 20}) {
      try {
        nxrt::DeviceTensor t(*s, ep, 1, {n});
      } catch (const nxrt::Error& e) {
        if (first.empty()) first = e.what();
      }
    }
    return first;
  };
  CountingAllocator probe(alloc, free);
  REQUIRE(life(probe).empty());
  const uint64_t n = probe.attempts;
  REQUIRE(n > 0);
  uint64_t surfaced = 0;
  for (uint64_t k = 1; k <= n; ++k) {
    CAPTURE(k);
    CountingAllocator a(alloc, free);
    a.fail_at = k;
    const std::string err = life(a);
    if (!err.empty()) {
      ++surfaced;
      std::string lower = err;
      for (auto& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
      CHECK_MESSAGE(lower.find("memory") != std::string::npos, err);
    }
    CHECK(a.live.empty());  // everything the session got back, even when it failed half way
  }
  MESSAGE(ep << ": " << n << " allocations, each refused once: " << surfaced << " surfaced as errors");
  CHECK(surfaced > 0);
  CountingAllocator after(alloc, free);
  CHECK(life(after).empty());
}

}  // namespace

TEST_CASE("allocation failure injected at every allocation of a session (cpu, vulkan): clear errors, nothing leaked, host usable") {
  {
    auto env = make_env({"cpu"});
    every_allocation_refused(env, "cpu", host_alloc, host_free);
  }
  auto env = make_env({"vulkan", "cpu"});
  if (!has_vulkan_device(env)) NXRT_SKIP_CASE("no Vulkan device");
  every_allocation_refused(env, "vulkan,cpu", vulkan_alloc, vulkan_free);
}

namespace {

// x[4,256] -> Relu (vulkan) -> Round (cpu: Vulkan lacks it) -> Relu (vulkan) -> y.
std::string vulkan_cpu_model() {
  return chain_model("mixed", 4, 256, {{"Relu", "x", "r"}, {"Round", "r", "q"}, {"Relu", "q", "y"}});
}

}  // namespace

TEST_CASE("pinned staging (vulkan + cpu): host values crossing to Vulkan live in its pinned memory, no bounce buffers") {
  auto env = make_env({"vulkan", "cpu"});
  if (!has_vulkan_device(env)) NXRT_SKIP_CASE("no Vulkan device");
  nxrt::Model model(vulkan_cpu_model());
  nxrt::Session s(env, model, "vulkan,cpu");
  const std::vector<int64_t> dims{4, 256};
  std::vector<float> x(1024), expect(1024);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = float(int(i % 41) - 20) * 0.37f;
    expect[i] = std::max(std::nearbyint(std::max(x[i], 0.f)), 0.f);
  }
  nxrt::DeviceTensor xd(s, "vulkan", 1, dims), yd(s, "vulkan", 1, dims);
  xd.upload(x.data(), 4096);
  nxrt::Binding b(s);
  b.bind_input("x", xd);
  b.bind_output("y", yd);
  s.run(b);  // warm: arenas made
  const nxrt_memory_stats before = plugin_stats(s, "vulkan");
  for (int i = 0; i < 5; ++i) s.run(b);
  const nxrt_memory_stats after = plugin_stats(s, "vulkan");
  CHECK(yd.download<float>() == expect);
  // Per run: r goes down to the CPU and q comes back up...
  CHECK(after.device_to_host_copies - before.device_to_host_copies == 5);
  CHECK(after.host_to_device_copies - before.host_to_device_copies == 5);
  // ...straight to and from the pinned host arena: no staging buffer is allocated per run.
  CHECK(after.allocation_count == before.allocation_count);
}

TEST_CASE("device tensor copies: within a session, between two sessions of one plugin, across plugins") {
  auto env = make_env({"vulkan", "cpu", "devmem"});
  nxrt::Model model(relu_model(2, 3));
  const std::vector<int64_t> dims{2, 3};
  // cpu -> cpu between two sessions: a peer copy (host memory both sides).
  nxrt::Session c1(env, model, "cpu"), c2(env, model, "cpu");
  nxrt::DeviceTensor a(c1, "cpu", 1, dims), b(c2, "cpu", 1, dims);
  a.upload(kX.data(), 24);
  b.copy_from(a);
  CHECK(b.download<float>() == kX);
  CHECK(plugin_stats(c2, "cpu").device_to_device_copies == 1);
  // cpu -> devmem (another plugin): an upload straight from the CPU tensor's memory.
  nxrt::Session d(env, model, "devmem");
  nxrt::DeviceTensor dm(d, "devmem", 1, dims);
  dm.copy_from(b);
  CHECK(dm.download<float>() == kX);
  nxrt::DeviceTensor wrong(d, "devmem", 1, {3, 2});
  CHECK_THROWS_AS(wrong.copy_from(dm), nxrt::Error);
  if (!has_vulkan_device(env)) NXRT_SKIP_CASE("the Vulkan part: no Vulkan device");
  // Model A's output, left on the device, becomes model B's input in another session:
  // a peer copy, the host never reads it.
  nxrt::Session va(env, model, "vulkan"), vb(env, model, "vulkan");
  nxrt::DeviceTensor x(va, "vulkan", 1, dims);
  x.upload(kX.data(), 24);
  nxrt::Binding ba(va);
  ba.bind_input("x", x);
  ba.bind_output_to_device("y", "vulkan");
  va.run(ba);
  nxrt::DeviceTensor ya = ba.output("y");
  nxrt::DeviceTensor xb(vb, "vulkan", 1, dims);
  const nxrt_memory_stats a_before = plugin_stats(va, "vulkan");
  xb.copy_from(ya);
  CHECK(plugin_stats(va, "vulkan").device_to_host_copies == a_before.device_to_host_copies);
  CHECK(plugin_stats(vb, "vulkan").device_to_device_copies == 1);
  nxrt::Binding bb(vb);
  bb.bind_input("x", xb);
  bb.bind_output_to_device("y", "vulkan");
  vb.run(bb);
  CHECK(bb.output("y").download<float>() == kY);
  // devmem -> vulkan: two plugins. devmem exports its pages as HOST_POINTER memory and
  // Vulkan imports them (ABI 2.2 memory import) when the device can: one device-side copy,
  // no download from devmem and no upload into Vulkan. Without the extension: through the host.
  nxrt::DeviceTensor v2(vb, "vulkan", 1, dims);
  const nxrt_memory_stats vb_before = plugin_stats(vb, "vulkan"), dm_before = plugin_stats(d, "devmem");
  v2.copy_from(dm);
  CHECK(v2.download<float>() == kX);
  const nxrt_memory_stats vb_after = plugin_stats(vb, "vulkan"), dm_after = plugin_stats(d, "devmem");
  if (vulkan_host_import_alignment(env) > 0) {
    CHECK(dm_after.device_to_host_copies == dm_before.device_to_host_copies);
    CHECK(vb_after.host_to_device_copies == vb_before.host_to_device_copies);
    CHECK(vb_after.device_to_device_copies == vb_before.device_to_device_copies + 1);
    CHECK(vb_after.bytes_in_use == vb_before.bytes_in_use);  // the import is gone again
  } else {
    nxrt_test::record_skip("devmem -> vulkan import: no VK_EXT_external_memory_host (went through the host)");
  }
}

// ------------------------------------------------------------------ memory import (2.2)

TEST_CASE("memory import (cpu): the caller's host memory is bound as input and output in place") {
  auto env = make_env({"cpu"});
  nxrt::Model model(relu_model(2, 3));
  nxrt::Session s(env, model, "cpu");
  std::vector<float> x = kX, y(6, 42.f);
  auto host_native = [](void* p, size_t bytes) {
    nxrt_native_handle h{};
    h.struct_size = sizeof h;
    h.type = NXRT_NATIVE_HOST_POINTER;
    h.handle = uint64_t(uintptr_t(p));
    h.size = bytes;
    return h;
  };
  nxrt::DeviceTensor xd = nxrt::DeviceTensor::import(s, "cpu", host_native(x.data(), 24), 1, {2, 3});
  nxrt::DeviceTensor yd = nxrt::DeviceTensor::import(s, "cpu", host_native(y.data(), 24), 1, {2, 3});
  CHECK(xd.info().handle == x.data());  // no copy: the tensor is the caller's memory
  const nxrt_memory_stats before = plugin_stats(s, "cpu");
  nxrt::Binding b(s);
  b.bind_input("x", xd);
  b.bind_output("y", yd);
  s.run(b);
  CHECK(y == kY);  // written in place, into the caller's vector
  x[0] = 7.f;      // the input is read in place too
  s.run(b);
  CHECK(y[0] == 7.f);
  const nxrt_memory_stats after = plugin_stats(s, "cpu");
  CHECK(after.allocation_count == before.allocation_count);  // imports are not allocations
  // Too small for the tensor: a clear error before the plugin is asked.
  try {
    nxrt::DeviceTensor::import(s, "cpu", host_native(x.data(), 20), 1, {2, 3});
    FAIL("a 20-byte import of a 24-byte tensor was accepted");
  } catch (const nxrt::Error& e) {
    CHECK(std::string(e.what()).find("holds 20 bytes") != std::string::npos);
  }
  xd = nxrt::DeviceTensor();
  yd = nxrt::DeviceTensor();
  CHECK(x[0] == 7.f);  // releasing an import leaves the memory to its owner
}

namespace {

uint32_t host_visible_type(const nxrt_native_handle& device, uint32_t bits) {
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(reinterpret_cast<VkPhysicalDevice>(uintptr_t(device.aux0)), &mp);
  const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i)
    if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
  return UINT32_MAX;
}

}  // namespace

TEST_CASE("memory import (vulkan): the caller's VkBuffer and page-aligned host memory become device tensors, used in place") {
  auto env = make_env({"vulkan"});
  if (!has_vulkan_device(env)) NXRT_SKIP_CASE("no Vulkan device");
  nxrt::Model model(relu_model(4, 256));
  nxrt::Session s(env, model, "vulkan");
  const nxrt_native_handle device = s.native_handle("vulkan", NXRT_NATIVE_OBJECT_DEVICE);
  VkDevice dev = reinterpret_cast<VkDevice>(uintptr_t(device.handle));
  // The caller's own buffer: x at offset 0, y at offset 4096, host-visible so the test reads it.
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = 8192;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  VkBuffer buf;
  REQUIRE(vkCreateBuffer(dev, &bci, nullptr, &buf) == VK_SUCCESS);
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev, buf, &req);
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = host_visible_type(device, req.memoryTypeBits);
  REQUIRE(mai.memoryTypeIndex != UINT32_MAX);
  VkDeviceMemory mem;
  REQUIRE(vkAllocateMemory(dev, &mai, nullptr, &mem) == VK_SUCCESS);
  REQUIRE(vkBindBufferMemory(dev, buf, mem, 0) == VK_SUCCESS);
  float* mapped = nullptr;
  REQUIRE(vkMapMemory(dev, mem, 0, VK_WHOLE_SIZE, 0, reinterpret_cast<void**>(&mapped)) == VK_SUCCESS);
  std::vector<float> x(1024), expect(1024);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = float(int(i % 13) - 6);
    expect[i] = std::max(x[i], 0.f);
  }
  std::memcpy(mapped, x.data(), 4096);
  std::fill(mapped + 1024, mapped + 2048, -1.f);

  auto buffer_native = [&](VkDeviceSize offset) {
    nxrt_native_handle h{};
    h.struct_size = sizeof h;
    h.type = NXRT_NATIVE_VULKAN_BUFFER;
    h.handle = uint64_t(buf);
    h.aux0 = device.handle;
    h.value = offset;
    h.size = 4096;
    return h;
  };
  const std::vector<int64_t> dims{4, 256};
  {
    nxrt::DeviceTensor xd = nxrt::DeviceTensor::import(s, "vulkan", buffer_native(0), 1, dims);
    nxrt::DeviceTensor yd = nxrt::DeviceTensor::import(s, "vulkan", buffer_native(4096), 1, dims);
    CHECK(yd.native().handle == uint64_t(buf));  // the caller's buffer, at its offset
    CHECK(yd.native().value == 4096);
    nxrt::Binding b(s);
    b.bind_input("x", xd);
    b.bind_output("y", yd);
    s.run(b);  // warm: arenas made
    const nxrt_memory_stats before = plugin_stats(s, "vulkan");
    s.run(b);
    const nxrt_memory_stats after = plugin_stats(s, "vulkan");
    CHECK(std::vector<float>(mapped + 1024, mapped + 2048) == expect);  // in the caller's buffer
    CHECK(after.host_to_device_copies == before.host_to_device_copies);
    CHECK(after.device_to_host_copies == before.device_to_host_copies);
    CHECK(after.allocation_count == before.allocation_count);

    // Another VkDevice's buffer: refused with the reason, the session stays usable.
    nxrt_native_handle other = buffer_native(0);
    other.aux0 = 0x1234;
    try {
      nxrt::DeviceTensor::import(s, "vulkan", other, 1, dims);
      FAIL("a buffer of another VkDevice was imported");
    } catch (const nxrt::Error& e) {
      CHECK(e.code() == NXRT_ERR_UNSUPPORTED);
      CHECK(std::string(e.what()).find("VkDevice") != std::string::npos);
    }
    s.run(b);
  }

  // Host memory, aligned as the device requires (VK_EXT_external_memory_host).
  const uint64_t align = vulkan_host_import_alignment(env);
  if (align == 0) {
    nxrt_test::record_skip("host-memory import: no VK_EXT_external_memory_host");
  } else {
    const size_t bytes = std::max<size_t>(4096, align);
    float* host = static_cast<float*>(std::aligned_alloc(align, bytes));
    REQUIRE(host);
    std::memcpy(host, x.data(), 4096);
    nxrt_native_handle h{};
    h.struct_size = sizeof h;
    h.type = NXRT_NATIVE_HOST_POINTER;
    h.handle = uint64_t(uintptr_t(host));
    h.size = bytes;
    {
      nxrt::DeviceTensor xd = nxrt::DeviceTensor::import(s, "vulkan", h, 1, dims);
      nxrt::DeviceTensor yd(s, "vulkan", 1, dims);
      nxrt::Binding b(s);
      b.bind_input("x", xd);
      b.bind_output("y", yd);
      s.run(b);
      const nxrt_memory_stats before = plugin_stats(s, "vulkan");
      host[0] = 5.f;  // read in place by the next run: no upload
      s.run(b);
      const nxrt_memory_stats after = plugin_stats(s, "vulkan");
      CHECK(after.host_to_device_copies == before.host_to_device_copies);
      std::vector<float> want = expect;
      want[0] = 5.f;
      CHECK(yd.download<float>() == want);
      // Misaligned host memory: refused with the reason.
      nxrt_native_handle bad = h;
      bad.handle += 4;
      bad.size -= 4;
      CHECK_THROWS_AS(nxrt::DeviceTensor::import(s, "vulkan", bad, 1, {16}), nxrt::Error);
    }
    CHECK(host[0] == 5.f);  // still the caller's
    std::free(host);
  }
  vkUnmapMemory(dev, mem);
  vkDestroyBuffer(dev, buf, nullptr);
  vkFreeMemory(dev, mem, nullptr);
}
