// A small, correct SDK plugin for the diff suite ("conftest_ops"): float32
// Add/Sub/Mul/Div with full broadcasting, Relu, MatMul (batch broadcasting,
// 1-D operands), Gemm, Softmax/LogSoftmax at opsets 1-12 and 13+, declaring
// NXRT_FEATURE_CONCURRENT_RUN. Each BROKEN_* switch adds the one mistake a
// vendor's plugin made (issue 14), so the suite is shown to catch each by name:
//   BROKEN_MATMUL_BATCH_BROADCAST  batch index taken modulo each side's batch count
//   BROKEN_ADD_ONE_WAY             output takes A's shape: only B may broadcast
//   BROKEN_SOFTMAX_OPSET11         opset 11 given opset 13 (per-axis) semantics
//   BROKEN_SHARED_SCRATCH          MatMul accumulates in one buffer per kernel
#include <nxrt_sdk/sdk.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <mutex>
#include <vector>

#ifndef CONFTEST_NAME
#define CONFTEST_NAME "conftest_ops"
#endif

namespace {
using namespace nxrt::sdk;
using Dims = std::vector<int64_t>;

class OpsSession;

class SyncStream : public Stream {
 public:
  void synchronize() override {}
  void wait(Event&) override {}
};
class SyncEvent : public Event {
 public:
  void record(Stream&) override {}
  void synchronize() override {}
};

Dims to_dims(std::span<const int64_t> s) { return Dims(s.begin(), s.end()); }

// numpy broadcast of two shapes; nullopt when they do not broadcast.
std::optional<Dims> broadcast(const Dims& a, const Dims& b) {
  const size_t r = std::max(a.size(), b.size());
  Dims out(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = std::max(da, db);
  }
  return out;
}

// Flat index into `in` (right-aligned, size-1 dims broadcast) for output coordinate `co`.
int64_t source(const Dims& in, const Dims& co) {
  int64_t idx = 0;
  const size_t off = co.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) idx = idx * in[i] + (in[i] == 1 ? 0 : co[off + i]);
  return idx;
}
Dims coord(int64_t flat, const Dims& d) {
  Dims c(d.size());
  for (size_t i = d.size(); i-- > 0;) c[i] = flat % d[i], flat /= d[i];
  return c;
}
int64_t prod(const Dims& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

template <typename F>
class BinaryKernel : public Kernel {
 public:
  BinaryKernel(F f, bool one_way) : f_(f), one_way_(one_way) {}
  void compute(Context& ctx) override {
    auto a = ctx.input(0), b = ctx.input(1);
    const Dims da = to_dims(a.dims()), db = to_dims(b.dims());
    auto out_dims = broadcast(da, db);
    if (!out_dims) fail(NXRT_INVALID_ARGUMENT, "shapes do not broadcast");
    if (one_way_ && da.size() >= db.size()) out_dims = da;  // BROKEN_ADD_ONE_WAY: assumes A is the larger operand
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, std::span<const int64_t>(*out_dims));
    const float *pa = a.data<float>(), *pb = b.data<float>();
    float* out = y.data<float>();
    const int64_t n = element_count(*out_dims);
    for (int64_t i = 0; i < n; ++i) {
      const Dims co = coord(i, *out_dims);
      out[i] = f_(pa[source(da, co)], pb[source(db, co)]);
    }
  }

 private:
  F f_;
  bool one_way_;
};
template <typename F>
std::unique_ptr<Kernel> binary(F f, bool one_way = false) {
  return std::make_unique<BinaryKernel<F>>(f, one_way);
}
#ifdef BROKEN_ADD_ONE_WAY
constexpr bool kAddOneWay = true;
#else
constexpr bool kAddOneWay = false;
#endif

class ReluKernel : public Kernel {
 public:
  void compute(Context& ctx) override {
    auto a = ctx.input(0);
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, a.dims());
    const float* x = a.data<float>();
    float* out = y.data<float>();
    for (int64_t i = 0; i < a.numel(); ++i) out[i] = x[i] > 0 ? x[i] : 0.f;
  }
};

class MatMulKernel : public Kernel {
 public:
  void compute(Context& ctx) override {
    auto a = ctx.input(0), b = ctx.input(1);
    Dims da = to_dims(a.dims()), db = to_dims(b.dims());
    const bool a_vec = da.size() == 1, b_vec = db.size() == 1;
    if (a_vec) da.insert(da.begin(), 1);
    if (b_vec) db.push_back(1);
    const int64_t M = da[da.size() - 2], K = da.back(), N = db.back();
    if (db[db.size() - 2] != K) fail(NXRT_INVALID_ARGUMENT, "MatMul: inner dimensions differ");
    const Dims ba(da.begin(), da.end() - 2), bb(db.begin(), db.end() - 2);
    auto batch = broadcast(ba, bb);
    if (!batch) fail(NXRT_INVALID_ARGUMENT, "MatMul: batch dimensions do not broadcast");
    Dims out_dims = *batch;
    if (!a_vec) out_dims.push_back(M);
    if (!b_vec) out_dims.push_back(N);
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, std::span<const int64_t>(out_dims));
    const float *pa = a.data<float>(), *pb = b.data<float>();
    float* out = y.data<float>();
    const int64_t nb = element_count(*batch);
#ifdef BROKEN_SHARED_SCRATCH
    float* acc;
    {
      std::lock_guard lock(mu_);  // guards the resize, not the use: the buffer is shared by concurrent calls
      if (scratch_.size() < size_t(M * N)) scratch_.resize(size_t(M * N));
      acc = scratch_.data();
    }
#else
    std::vector<float> own(size_t(M * N));
    float* acc = own.data();
#endif
    for (int64_t bi = 0; bi < nb; ++bi) {
#ifdef BROKEN_MATMUL_BATCH_BROADCAST
      const int64_t ia = bi % element_count(ba), ib = bi % element_count(bb);  // right only when one side has no batch
#else
      const Dims co = coord(bi, *batch);
      const int64_t ia = source(ba, co), ib = source(bb, co);
#endif
      const float* A = pa + ia * M * K;
      const float* B = pb + ib * K * N;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < N; ++j) {
          float s = 0;
          for (int64_t k = 0; k < K; ++k) s += A[m * K + k] * B[k * N + j];
          acc[m * N + j] = s;
        }
      std::copy(acc, acc + M * N, out + bi * M * N);
    }
  }
#ifdef BROKEN_SHARED_SCRATCH
 private:
  std::mutex mu_;
  std::vector<float> scratch_;
#endif
};

class GemmKernel : public Kernel {
 public:
  GemmKernel(bool ta, bool tb, float alpha, float beta) : ta_(ta), tb_(tb), alpha_(alpha), beta_(beta) {}
  void compute(Context& ctx) override {
    auto a = ctx.input(0), b = ctx.input(1);
    auto c = ctx.optional_input(2);
    const Dims da = to_dims(a.dims()), db = to_dims(b.dims());
    if (da.size() != 2 || db.size() != 2) fail(NXRT_INVALID_ARGUMENT, "Gemm: A and B must be 2-D");
    const int64_t M = ta_ ? da[1] : da[0], K = ta_ ? da[0] : da[1], N = tb_ ? db[0] : db[1];
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, {M, N});
    const float *pa = a.data<float>(), *pb = b.data<float>();
    float* out = y.data<float>();
    const Dims dc = c ? to_dims(c->dims()) : Dims{};
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < N; ++j) {
        float s = 0;
        for (int64_t k = 0; k < K; ++k) s += pa[ta_ ? k * M + m : m * K + k] * pb[tb_ ? j * K + k : k * N + j];
        out[m * N + j] = alpha_ * s + (c ? beta_ * c->data<float>()[source(dc, {m, j})] : 0.f);
      }
  }

 private:
  bool ta_, tb_;
  float alpha_, beta_;
};

class SoftmaxKernel : public Kernel {
 public:
  SoftmaxKernel(int64_t axis, bool per_axis, bool log) : axis_(axis), per_axis_(per_axis), log_(log) {}
  void compute(Context& ctx) override {
    auto x = ctx.input(0);
    const Dims d = to_dims(x.dims());
    const int64_t rank = int64_t(d.size());
    int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    if (axis < 0 || axis >= rank) fail(NXRT_INVALID_ARGUMENT, "Softmax: axis out of range");
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    // Opset < 13 coerces to 2-D at axis; 13+ normalizes along axis alone.
    const int64_t outer = prod(d, 0, size_t(axis));
    const int64_t len = per_axis_ ? d[size_t(axis)] : prod(d, size_t(axis), d.size());
    const int64_t inner = per_axis_ ? prod(d, size_t(axis) + 1, d.size()) : 1;
    const float* in = x.data<float>();
    float* out = y.data<float>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        auto at = [&](int64_t k) { return (o * len + k) * inner + i; };
        float mx = -INFINITY;
        for (int64_t k = 0; k < len; ++k) mx = std::max(mx, in[at(k)]);
        float sum = 0;
        for (int64_t k = 0; k < len; ++k) sum += std::exp(in[at(k)] - mx);
        for (int64_t k = 0; k < len; ++k)
          out[at(k)] = log_ ? in[at(k)] - mx - std::log(sum) : std::exp(in[at(k)] - mx) / sum;
      }
  }

 private:
  int64_t axis_;
  bool per_axis_, log_;
};

std::optional<Refusal> f32_static(const Node& n) {
  if (auto r = require_dtypes(n, {NXRT_DTYPE_FLOAT32})) return r;
  for (size_t i = 0; i < n.input_count(); ++i)
    if (n.has_input(i) && !n.input(i).static_shape()) return refuse(NXRT_REFUSE_SHAPE, "static shapes only");
  return std::nullopt;
}

const KernelRegistry<OpsSession>& registry() {
  static KernelRegistry<OpsSession> r = [] {
    KernelRegistry<OpsSession> k;
    k.add({"Add", "", 7, INT_MAX, f32_static, [](const Node&, OpsSession&) { return binary([](float a, float b) { return a + b; }, kAddOneWay); }});
    k.add({"Sub", "", 7, INT_MAX, f32_static, [](const Node&, OpsSession&) { return binary([](float a, float b) { return a - b; }); }});
    k.add({"Mul", "", 7, INT_MAX, f32_static, [](const Node&, OpsSession&) { return binary([](float a, float b) { return a * b; }); }});
    k.add({"Div", "", 7, INT_MAX, f32_static, [](const Node&, OpsSession&) { return binary([](float a, float b) { return a / b; }); }});
    k.add({"Relu", "", 6, INT_MAX, f32_static,
           [](const Node&, OpsSession&) -> std::unique_ptr<Kernel> { return std::make_unique<ReluKernel>(); }});
    k.add({"MatMul", "", 9, INT_MAX, f32_static,
           [](const Node&, OpsSession&) -> std::unique_ptr<Kernel> { return std::make_unique<MatMulKernel>(); }});
    k.add({"Gemm", "", 11, INT_MAX, f32_static, [](const Node& n, OpsSession&) -> std::unique_ptr<Kernel> {
             return std::make_unique<GemmKernel>(n.attr_int("transA", 0) != 0, n.attr_int("transB", 0) != 0,
                                                 n.attr_float("alpha", 1.f), n.attr_float("beta", 1.f));
           }});
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      const bool log = std::string(op) == "LogSoftmax";
      k.add({op, "", 1, 12, f32_static, [log](const Node& n, OpsSession&) -> std::unique_ptr<Kernel> {
#ifdef BROKEN_SOFTMAX_OPSET11
               return std::make_unique<SoftmaxKernel>(n.attr_int("axis", -1), true, log);  // opset 13 rules
#else
               return std::make_unique<SoftmaxKernel>(n.attr_int("axis", 1), false, log);
#endif
             }});
      k.add({op, "", 13, INT_MAX, f32_static, [log](const Node& n, OpsSession&) -> std::unique_ptr<Kernel> {
               return std::make_unique<SoftmaxKernel>(n.attr_int("axis", -1), true, log);
             }});
    }
    return k;
  }();
  return r;
}

class OpsSession : public HostMemorySession {
 public:
  void get_capability(const Graph& g, nxrt_claim_sink* sink) override { registry().claim(g, sink); }
  std::unique_ptr<Kernel> create_kernel(const Graph& sub) override { return registry().create(sub, *this); }
  std::unique_ptr<Stream> create_stream() override { return std::make_unique<SyncStream>(); }
  std::unique_ptr<Event> create_event() override { return std::make_unique<SyncEvent>(); }
};

class OpsPlugin : public Plugin {
 public:
  const char* name() const override { return CONFTEST_NAME; }
  const char* version() const override { return "0.1.0"; }
  uint64_t features() const override { return NXRT_FEATURE_STREAMS | NXRT_FEATURE_CONCURRENT_RUN | kHostMemoryFeatures; }
  uint32_t device_count() override { return 1; }
  DeviceDescription describe_device(uint32_t) override {
    DeviceDescription d;
    d.kind = NXRT_DEVICE_CPU;
    d.name = "conformance ops test device";
    d.vendor = "nxrt";
    d.memory_bytes = 1ull << 32;
    d.dtypes = 1ull << NXRT_DTYPE_FLOAT32;
    d.host_addressable = true;
    return d;
  }
  std::unique_ptr<Session> create_session(uint32_t, const Options&) override { return std::make_unique<OpsSession>(); }
};

}  // namespace

NXRT_SDK_DEFINE_PLUGIN(OpsPlugin)
