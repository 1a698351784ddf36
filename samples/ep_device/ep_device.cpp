// ep_device: an EP with its own "device" memory. Its buffers live in a memory pool the host
// cannot address (host_addressable = false): the host sees opaque handles and moves data only
// through the plugin's upload / download / on-device copy (sdk::DeviceMemorySession). Kernels:
// float32 MatMul ([...,M,K] x [K,N]), Add (broadcasting), Relu, and the fused group MatMul+Add+Relu, claimed as
// one kernel when the MatMul's and the Add's results feed nothing else.
#include <nxrt_sdk/broadcast.hpp>
#include <nxrt_sdk/device_memory.hpp>
#include <nxrt_sdk/kernel_def.hpp>
#include <nxrt_sdk/sdk.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

namespace {

namespace sdk = nxrt::sdk;

// The device's memory: bytes the host never gets a pointer to.
struct Buffer {
  std::vector<std::byte> bytes;
};
using Ptr = sdk::DevicePtr<Buffer>;
using ConstPtr = sdk::DevicePtr<const Buffer>;
// "Device code" reads and writes buffers only through these.
const float* device_floats(ConstPtr p) { return reinterpret_cast<const float*>(p.buffer->bytes.data() + p.offset); }
float* device_floats(Ptr p) { return reinterpret_cast<float*>(p.buffer->bytes.data() + p.offset); }

// y = relu?(a[...,M,K] x b[K,N] + bias?), bias broadcast to the product's shape.
struct MatMulIo {
  int a = 0, b = 1, bias = -1;
  bool relu = false;
};
class MatMul : public sdk::Kernel {
 public:
  explicit MatMul(MatMulIo io = {}) : io_(io) {}
  void compute(sdk::Context& ctx) override {
    auto a = ctx.input(size_t(io_.a)), b = ctx.input(size_t(io_.b));
    if (a.rank() < 2 || b.rank() != 2 || a.dims().back() != b.dim(0))
      sdk::fail(NXRT_INVALID_ARGUMENT, "MatMul needs [...,M,K] x [K,N], got ranks {} and {}", a.rank(), b.rank());
    const int64_t k = b.dim(0), n = b.dim(1), m = k ? a.numel() / k : 0;
    std::vector<int64_t> dims = a.dims();
    dims.back() = n;
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, dims);
    const float *pa = device_floats(sdk::device_ptr<Buffer>(a)), *pb = device_floats(sdk::device_ptr<Buffer>(b));
    float* out = device_floats(sdk::device_ptr<Buffer>(y));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float s = 0;
        for (int64_t p = 0; p < k; ++p) s += pa[i * k + p] * pb[p * n + j];
        out[i * n + j] = s;
      }
    if (io_.bias >= 0) {
      auto c = ctx.input(size_t(io_.bias));
      if (sdk::broadcast_shape(c.dims(), dims) != dims) sdk::fail(NXRT_INVALID_ARGUMENT, "the bias does not broadcast to the product");
      const float* pc = device_floats(sdk::device_ptr<Buffer>(c));
      sdk::for_each_broadcast(dims, dims, c.dims(), [&](int64_t i, int64_t, int64_t ic) { out[i] += pc[ic]; });
    }
    if (io_.relu)
      for (int64_t i = 0; i < m * n; ++i) out[i] = std::max(out[i], 0.0f);
  }

 private:
  MatMulIo io_;
};

class Add : public sdk::Kernel {
 public:
  void compute(sdk::Context& ctx) override {
    auto a = ctx.input(0), b = ctx.input(1);
    auto dims = sdk::broadcast_shape(a.dims(), b.dims());
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, dims);
    const float *pa = device_floats(sdk::device_ptr<Buffer>(a)), *pb = device_floats(sdk::device_ptr<Buffer>(b));
    float* out = device_floats(sdk::device_ptr<Buffer>(y));
    sdk::for_each_broadcast(dims, a.dims(), b.dims(), [&](int64_t i, int64_t ia, int64_t ib) { out[i] = pa[ia] + pb[ib]; });
  }
};

class Relu : public sdk::Kernel {
 public:
  void compute(sdk::Context& ctx) override {
    auto x = ctx.input(0);
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    const float* in = device_floats(sdk::device_ptr<Buffer>(x));
    float* out = device_floats(sdk::device_ptr<Buffer>(y));
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = std::max(in[i], 0.0f);
  }
};

bool is(const sdk::Node& n, const char* op) { return n.op_type() == op && n.domain().empty(); }
// The one node consuming `v` inside the view, when `v` feeds nothing else.
std::optional<sdk::Node> sole_consumer(const sdk::Value& v) {
  auto users = v.consumers();
  if (users.size() != 1 || v.is_graph_output()) return std::nullopt;
  return users.front();
}

class DeviceSession : public sdk::DeviceMemorySession<Buffer> {
 public:
  // Each kernel with its ONNX opset range and type constraint.
  DeviceSession() {
    const sdk::Types f32{NXRT_DTYPE_FLOAT32};
    registry_.add(sdk::kernel<MatMul, DeviceSession>("MatMul", {.since = 9}, f32, [](const sdk::Node& n) -> std::optional<sdk::Refusal> {
      if (n.input(0).rank() < 2 || n.input(1).rank() != 2) return sdk::refuse(NXRT_REFUSE_SHAPE, "MatMul: [...,M,K] x [K,N] only");
      return std::nullopt;
    }));
    registry_.add(sdk::kernel<Add, DeviceSession>("Add", {.since = 7}, f32, [](const sdk::Node& n) { return sdk::check_broadcast(n); }));
    registry_.add(sdk::kernel<Relu, DeviceSession>("Relu", {.since = 6}, f32));
  }
  // MatMul -> Add -> Relu chains go as one group; every other node as the registry says.
  void get_capability(const sdk::Graph& g, nxrt_claim_sink* sink) override {
    auto verdict = [&](const sdk::Node& n) -> std::optional<sdk::Refusal> {  // nullopt: a kernel takes n
      sdk::Refusal why{};
      auto* def = registry_.find(n, g.opset(""), &why);
      return def ? def->check(n) : why;
    };
    std::vector<size_t> grouped;
    for (size_t i = 0; i < g.node_count(); ++i) {
      sdk::Node mm = g.node(i);
      if (!is(mm, "MatMul") || verdict(mm)) continue;
      auto add = sole_consumer(mm.output(0));
      if (!add || !is(*add, "Add") || verdict(*add)) continue;
      auto relu = sole_consumer(add->output(0));
      if (!relu || !is(*relu, "Relu") || verdict(*relu)) continue;
      size_t ids[3] = {mm.index(), add->index(), relu->index()};
      sdk::check(sdk::host().claim_nodes(sink, ids, 3, 0.0));
      grouped.insert(grouped.end(), ids, ids + 3);
    }
    for (size_t i = 0; i < g.node_count(); ++i) {
      sdk::Node n = g.node(i);
      size_t index = n.index();
      if (std::ranges::count(grouped, index)) continue;
      if (auto r = verdict(n)) sdk::check(sdk::host().refuse_node(sink, index, r->reason, r->message.c_str()));
      else sdk::check(sdk::host().claim_nodes(sink, &index, 1, 0.0));
    }
  }
  std::unique_ptr<sdk::Kernel> create_kernel(const sdk::Graph& g) override {
    if (g.node_count() == 1) return registry_.create(g, *this);
    if (g.node_count() != 3 || !is(g.node(0), "MatMul") || !is(g.node(1), "Add") || !is(g.node(2), "Relu"))
      sdk::fail(NXRT_UNSUPPORTED, "ep_device fuses MatMul+Add+Relu only, got a group of {}", g.node_count());
    auto slot = [&](const sdk::Value& v) {
      for (size_t i = 0; i < g.input_count(); ++i)
        if (g.input(i).raw() == v.raw()) return int(i);
      sdk::fail(NXRT_INTERNAL, "'{}' is not an input of the group", v.name());
    };
    sdk::Node mm = g.node(0), add = g.node(1);
    const bool first = add.input(0).raw() == mm.output(0).raw();  // which Add input is the bias
    return std::make_unique<MatMul>(MatMulIo{slot(mm.input(0)), slot(mm.input(1)), slot(add.input(first ? 1 : 0)), true});
  }
  std::unique_ptr<Buffer> allocate(uint64_t bytes, uint64_t) override { return std::make_unique<Buffer>(Buffer{std::vector<std::byte>(bytes)}); }
  void upload(Ptr dst, const void* src, uint64_t bytes, sdk::Stream*) override { std::memcpy(dst.buffer->bytes.data() + dst.offset, src, bytes); }
  void download(void* dst, ConstPtr src, uint64_t bytes, sdk::Stream*) override { std::memcpy(dst, src.buffer->bytes.data() + src.offset, bytes); }
  void copy_on_device(Ptr dst, ConstPtr src, uint64_t bytes, sdk::Stream*) override {
    std::memmove(dst.buffer->bytes.data() + dst.offset, src.buffer->bytes.data() + src.offset, bytes);
  }

 private:
  sdk::KernelRegistry<DeviceSession> registry_;
};

class DevicePlugin : public sdk::Plugin {
 public:
  const char* name() const override { return "device"; }
  const char* version() const override { return "1.0.0"; }
  uint64_t features() const override { return NXRT_FEATURE_FUSED_GROUPS | NXRT_FEATURE_MEMORY_STATS; }
  uint32_t device_count() override { return 1; }
  sdk::DeviceDescription describe_device(uint32_t) override {
    sdk::DeviceDescription d;
    d.kind = NXRT_DEVICE_OTHER;
    d.name = "ep_device simulated accelerator";
    d.vendor = "nxrt samples";
    d.dtypes = 1ull << NXRT_DTYPE_FLOAT32;
    d.host_addressable = false;  // handles are Buffer objects, never host pointers
    return d;
  }
  std::unique_ptr<sdk::Session> create_session(uint32_t, const sdk::Options&) override { return std::make_unique<DeviceSession>(); }
};

}  // namespace

NXRT_SDK_DEFINE_PLUGIN(DevicePlugin)
