// Test plugin that behaves like a discrete accelerator, so the host's device
// path is tested without a GPU: memory handles are opaque (not host pointers),
// work is deferred on streams until synchronize, and maximal runs of supported
// nodes are claimed as fused groups. Ops: float32 Relu (any shape, so values of
// dynamic shape are allocated per run) and Mul (same static shapes). Memory stats
// (ABI 2.1) count every allocation and copy, so tests see the transfers a run makes.
#include <nxrt_sdk/sdk.hpp>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <deque>
#include <functional>
#include <map>

namespace {

using namespace nxrt::sdk;

// Device memory: the handle points at this struct, never at the bytes. The bytes are
// whole pages, exported as HOST_POINTER native handles (like a device whose memory can be
// shared), so another plugin may import them (ABI 2.2) instead of staging through the host.
constexpr size_t kPage = 4096;
struct Buffer {
  uint64_t magic = 0xdeb1ce;
  size_t size = 0;  // whole pages
  std::unique_ptr<uint8_t, decltype(&std::free)> mem{nullptr, &std::free};
  uint8_t* data() const { return mem.get(); }
};

Buffer& buffer(void* handle) {
  auto* b = static_cast<Buffer*>(handle);
  if (!b || b->magic != 0xdeb1ce) fail(NXRT_INVALID_ARGUMENT, "not a devmem buffer handle");
  return *b;
}

float* device_floats(const TensorView& t) {
  if (t.memory() != NXRT_MEMORY_DEVICE) fail(NXRT_INVALID_ARGUMENT, "devmem kernels need device tensors");
  return reinterpret_cast<float*>(buffer(t.handle()).data() + t.byte_offset());
}
// Inputs are read-only: the kernel only reads through this pointer.
const float* device_floats(const ConstTensorView& t) {
  if (t.memory() != NXRT_MEMORY_DEVICE) fail(NXRT_INVALID_ARGUMENT, "devmem kernels need device tensors");
  return reinterpret_cast<const float*>(buffer(const_cast<void*>(t.handle())).data() + t.byte_offset());
}

class DeferredStream : public Stream {
 public:
  std::deque<std::function<void()>> work;
  void synchronize() override {
    while (!work.empty()) {
      work.front()();
      work.pop_front();
    }
  }
  void wait(Event&) override {}  // one queue per session: already ordered
};

class FlagEvent : public Event {
 public:
  DeferredStream* stream = nullptr;
  void record(Stream& s) override { stream = static_cast<DeferredStream*>(&s); }
  void synchronize() override {
    if (stream) stream->synchronize();
  }
};

// Runs a fused group: nodes in order over a private value table.
class GroupKernel : public Kernel {
 public:
  struct Step { bool relu; int a, b, out; };
  GroupKernel(const Graph& g) {
    std::map<const nxrt_value*, int> ids;
    for (size_t i = 0; i < g.input_count(); ++i) ids[g.input(i).raw()] = int(i);
    int next = int(g.input_count());
    for (size_t i = 0; i < g.node_count(); ++i) {
      Node n = g.node(i);
      Step s{n.op_type() == "Relu", ids.at(n.input(0).raw()), n.op_type() == "Relu" ? -1 : ids.at(n.input(1).raw()), next};
      ids[n.output(0).raw()] = next++;
      steps_.push_back(s);
    }
    values_ = next;
    for (size_t i = 0; i < g.output_count(); ++i) outputs_.push_back(ids.at(g.output(i).raw()));
  }
  void compute(Context& ctx) override {
    auto x = ctx.input(0);
    std::vector<int64_t> dims = x.dims();
    std::vector<const float*> in;
    for (size_t i = 0; i < ctx.input_count(); ++i) in.push_back(device_floats(ctx.input(i)));
    std::vector<float*> out;
    for (size_t i = 0; i < ctx.output_count(); ++i) out.push_back(device_floats(ctx.output(i, NXRT_DTYPE_FLOAT32, dims)));
    auto* stream = stream_of<DeferredStream>(ctx);
    if (!stream) fail(NXRT_INVALID_ARGUMENT, "devmem kernels need a stream");
    size_t n = size_t(x.numel());
    auto steps = steps_;
    int values = values_;
    auto outputs = outputs_;
    stream->work.push_back([=] {  // runs later, at synchronize: the host must wait for it
      std::vector<std::vector<float>> v(static_cast<size_t>(values));
      for (size_t i = 0; i < in.size(); ++i) v[i].assign(in[i], in[i] + n);
      for (auto& s : steps) {
        v[size_t(s.out)].resize(n);
        for (size_t k = 0; k < n; ++k)
          v[size_t(s.out)][k] = s.relu ? std::max(v[size_t(s.a)][k], 0.f) : v[size_t(s.a)][k] * v[size_t(s.b)][k];
      }
      for (size_t o = 0; o < outputs.size(); ++o) std::memcpy(out[o], v[size_t(outputs[o])].data(), n * 4);
    });
  }

 private:
  std::vector<Step> steps_;
  int values_ = 0;
  std::vector<int> outputs_;
};

bool supported(const Node& n) {
  if (n.op_type() != "Relu" && n.op_type() != "Mul") return false;
  if (require_dtypes(n, {NXRT_DTYPE_FLOAT32})) return false;
  auto a = n.input(0);
  if (n.op_type() == "Relu") return true;
  return a.static_shape() && n.input(1).static_shape() && std::ranges::equal(a.dims(), n.input(1).dims());
}

class DevmemSession : public Session {
 public:
  void get_capability(const Graph& g, nxrt_claim_sink* sink) override {
    std::vector<size_t> run;
    auto flush = [&] {
      if (!run.empty()) check(host().claim_nodes(sink, run.data(), run.size(), 0));
      run.clear();
    };
    for (size_t i = 0; i < g.node_count(); ++i) {
      Node n = g.node(i);
      if (supported(n)) {
        run.push_back(n.index());
      } else {
        flush();
        check(host().refuse_node(sink, n.index(), NXRT_REFUSE_OP, "devmem runs float32 Relu and same-shape Mul only"));
      }
    }
    flush();
  }
  std::unique_ptr<Kernel> create_kernel(const Graph& g) override { return std::make_unique<GroupKernel>(g); }
  void* alloc(nxrt_memory_kind kind, uint64_t bytes, uint64_t) override {
    if (kind != NXRT_MEMORY_DEVICE) fail(NXRT_UNSUPPORTED, "devmem allocates device memory only");
    auto b = std::make_unique<Buffer>();
    b->size = (std::max<uint64_t>(bytes, 1) + kPage - 1) / kPage * kPage;
    b->mem.reset(static_cast<uint8_t*>(std::aligned_alloc(kPage, b->size)));
    if (!b->mem) fail(NXRT_OUT_OF_MEMORY, "cannot allocate {} bytes", b->size);
    counters_.alloc(b->size);
    counters_.reserve(b->size);
    return b.release();
  }
  void free(nxrt_memory_kind, void* handle) override {
    Buffer& b = buffer(handle);
    counters_.free(b.size);
    counters_.unreserve(b.size);
    delete &b;
  }
  nxrt_native_handle native_handle(nxrt_native_object what, const void* memory, Stream*) override {
    if (what != NXRT_NATIVE_OBJECT_MEMORY) fail(NXRT_UNSUPPORTED, "devmem has native handles for memory only");
    const Buffer& b = buffer(const_cast<void*>(memory));
    nxrt_native_handle h{};
    h.type = NXRT_NATIVE_HOST_POINTER;
    h.handle = uint64_t(uintptr_t(b.data()));
    h.size = b.size;
    return h;
  }
  nxrt_memory_stats memory_stats() override { return counters_.stats(); }
  void copy(std::span<const nxrt_copy_region> regions, Stream* s) override {
    for (auto r : regions) {
      counters_.copied(r.src_memory, r.dst_memory, r.bytes);
      auto op = [r] {
        const uint8_t* src = r.src_memory == NXRT_MEMORY_DEVICE ? buffer(const_cast<void*>(r.src)).data() : static_cast<const uint8_t*>(r.src);
        uint8_t* dst = r.dst_memory == NXRT_MEMORY_DEVICE ? buffer(r.dst).data() : static_cast<uint8_t*>(r.dst);
        std::memcpy(dst + r.dst_offset, src + r.src_offset, r.bytes);
      };
      if (s) static_cast<DeferredStream*>(s)->work.push_back(op);
      else op();
    }
  }
  std::unique_ptr<Stream> create_stream() override { return std::make_unique<DeferredStream>(); }
  std::unique_ptr<Event> create_event() override { return std::make_unique<FlagEvent>(); }

 private:
  MemoryCounters counters_;
};

class DevmemPlugin : public Plugin {
 public:
  const char* name() const override { return "devmem"; }
  const char* version() const override { return "0.0.1"; }
  uint64_t features() const override {
    return NXRT_FEATURE_FUSED_GROUPS | NXRT_FEATURE_STREAMS | NXRT_FEATURE_MEMORY_STATS | NXRT_FEATURE_NATIVE_HANDLES;
  }
  uint32_t device_count() override { return 1; }
  DeviceDescription describe_device(uint32_t) override {
    DeviceDescription d;
    d.kind = NXRT_DEVICE_OTHER;
    d.name = "simulated discrete device";
    d.vendor = "nxrt tests";
    d.dtypes = 1ull << NXRT_DTYPE_FLOAT32;
    d.host_addressable = false;
    return d;
  }
  std::unique_ptr<nxrt::sdk::Session> create_session(uint32_t, const Options&) override {
    return std::make_unique<DevmemSession>();
  }
};

}  // namespace

NXRT_SDK_DEFINE_PLUGIN(DevmemPlugin)
