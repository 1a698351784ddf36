// Test plugin for the graph-view fuzzer (fuzz_graph_view.cpp): its get_capability reads
// everything the host's graph view offers a plugin (every node, value, attribute, constant
// and control-flow body, producers and consumers), touching every byte a pointer promises,
// so AddressSanitizer sees any view that lies about its sizes. It claims nothing: each node
// is refused, and the session then fails cleanly as unsupported.
#include <nxrt_sdk/sdk.hpp>

#include <cstdint>
#include <cstring>

namespace {

namespace sdk = nxrt::sdk;

// Sums bytes so the reads cannot be optimized away.
struct Walker {
  uint64_t sum = 0;

  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) sum += b[i];
  }
  void text(const char* s) {
    if (s) bytes(s, std::strlen(s));
  }
  void tensor(const nxrt_const_tensor& t) {
    uint64_t n = 1;
    for (uint32_t d = 0; d < t.rank; ++d) n *= uint64_t(t.dims[d]);
    if (!t.data || t.memory != NXRT_MEMORY_HOST) return;
    const auto* base = static_cast<const unsigned char*>(t.data) + t.byte_offset;
    if (t.dtype == NXRT_DTYPE_STRING) {
      const auto* s = reinterpret_cast<const nxrt_string*>(base);
      for (uint64_t i = 0; i < n; ++i) bytes(s[i].data, s[i].size);
    } else {
      bytes(base, n * nxrt_dtype_size(t.dtype));
    }
  }
  void value(const nxrt_graph* g, const nxrt_value* v) {
    const auto& h = sdk::host();
    if (!v) return;
    text(h.value_name(v));
    sum += uint64_t(h.value_dtype(v));
    const int64_t rank = h.value_rank(v);
    if (rank > 0) bytes(h.value_dims(v), size_t(rank) * sizeof(int64_t));
    if (h.value_is_constant(v)) {
      nxrt_const_tensor t{};
      t.struct_size = sizeof t;
      if (nxrt_status* s = h.value_constant(v, &t)) h.status_release(s);
      else tensor(t);
    }
    if (const nxrt_node* p = h.value_producer(g, v)) sum += h.node_index(p);
    const size_t consumers = h.value_consumer_count(g, v);
    for (size_t i = 0; i < consumers; ++i) sum += h.node_index(h.value_consumer(g, v, i));
    sum += uint64_t(h.value_is_graph_output(v));
  }
  void attribute(const nxrt_attribute* a, int depth) {
    const auto& h = sdk::host();
    text(h.attribute_name(a));
    size_t n = 0;
    switch (h.attribute_type(a)) {
      case NXRT_ATTR_INT: sum += uint64_t(h.attribute_int(a)); break;
      case NXRT_ATTR_FLOAT: sum += uint64_t(h.attribute_float(a) != 0.0f); break;
      case NXRT_ATTR_STRING: bytes(h.attribute_string(a, &n), n); break;
      case NXRT_ATTR_INTS: {
        const int64_t* p = h.attribute_ints(a, &n);
        bytes(p, n * sizeof *p);
        break;
      }
      case NXRT_ATTR_FLOATS: {
        const float* p = h.attribute_floats(a, &n);
        bytes(p, n * sizeof *p);
        break;
      }
      case NXRT_ATTR_STRINGS:
        for (size_t i = 0, c = h.attribute_string_count(a); i < c; ++i) bytes(h.attribute_string_at(a, i, &n), n);
        break;
      case NXRT_ATTR_TENSOR: {
        nxrt_const_tensor t{};
        t.struct_size = sizeof t;
        if (nxrt_status* s = h.attribute_tensor(a, &t)) h.status_release(s);
        else tensor(t);
        break;
      }
      case NXRT_ATTR_GRAPH: {
        const nxrt_graph* body = nullptr;
        if (nxrt_status* s = h.attribute_graph(a, &body)) h.status_release(s);
        else if (body) graph(body, depth + 1);
        break;
      }
      default: break;
    }
  }
  void graph(const nxrt_graph* g, int depth) {
    const auto& h = sdk::host();
    sum += uint64_t(h.graph_opset(g, "")) + uint64_t(h.graph_opset(g, "com.microsoft"));
    for (size_t i = 0, n = h.graph_input_count(g); i < n; ++i) value(g, h.graph_input(g, i));
    for (size_t i = 0, n = h.graph_output_count(g); i < n; ++i) value(g, h.graph_output(g, i));
    for (size_t i = 0, n = h.graph_node_count(g); i < n; ++i) {
      const nxrt_node* node = h.graph_node(g, i);
      sum += h.node_index(node);
      text(h.node_name(node));
      text(h.node_op_type(node));
      text(h.node_domain(node));
      for (size_t k = 0, c = h.node_input_count(node); k < c; ++k) value(g, h.node_input(node, k));
      for (size_t k = 0, c = h.node_output_count(node); k < c; ++k) value(g, h.node_output(node, k));
      for (size_t k = 0, c = h.node_attribute_count(node); k < c; ++k) {
        const nxrt_attribute* a = h.node_attribute_at(node, k);
        attribute(a, depth);
        // Lookup by name must find the same attribute.
        if (h.node_attribute(node, h.attribute_name(a)) == nullptr) sdk::fail(NXRT_INTERNAL, "attribute lookup by name failed");
      }
      sum += h.node_attribute(node, "no such attribute") != nullptr;
    }
  }
};

class WalkSession : public sdk::HostMemorySession {
 public:
  void get_capability(const sdk::Graph& g, nxrt_claim_sink* sink) override {
    Walker w;
    w.graph(g.raw(), 0);
    volatile uint64_t keep = w.sum;
    (void)keep;
    for (size_t i = 0; i < g.node_count(); ++i)
      sdk::check(sdk::host().refuse_node(sink, g.node(i).index(), NXRT_REFUSE_OP, "graphwalk claims nothing"));
  }
  std::unique_ptr<sdk::Kernel> create_kernel(const sdk::Graph&) override {
    sdk::fail(NXRT_UNSUPPORTED, "graphwalk has no kernels");
  }
};

class WalkPlugin : public sdk::Plugin {
 public:
  const char* name() const override { return "graphwalk"; }
  const char* version() const override { return "0.0.1"; }
  uint64_t features() const override { return NXRT_FEATURE_STRING_TENSORS; }
  uint32_t device_count() override { return 1; }
  sdk::DeviceDescription describe_device(uint32_t) override {
    sdk::DeviceDescription d;
    d.kind = NXRT_DEVICE_CPU;
    d.name = "graph view walker";
    d.vendor = "nxrt fuzz";
    d.dtypes = ~0ull;
    d.host_addressable = true;
    return d;
  }
  std::unique_ptr<sdk::Session> create_session(uint32_t, const sdk::Options&) override { return std::make_unique<WalkSession>(); }
};

}  // namespace

NXRT_SDK_DEFINE_PLUGIN(WalkPlugin)
