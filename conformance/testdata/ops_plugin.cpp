// A small, correct SDK plugin for the diff suite ("conftest_ops"): float32
// Add/Sub/Mul/Div with full broadcasting, Relu, MatMul (batch broadcasting,
// 1-D operands), Gemm, Softmax/LogSoftmax at opsets 1-12 and 13+, declaring
// NXRT_FEATURE_CONCURRENT_RUN, and a compiled-kernel cache (ABI 2.4, KERNEL_CACHE and
// OFFLINE_COMPILE; the "compiled-kernel cache" section): constant inputs are copied at kernel_create, as
// prepacked weights would be, and an imported kernel reads them in place from its blob.
// Each BROKEN_* switch adds one mistake, so the diff and cache suites are shown to catch
// each by name:
//   BROKEN_MATMUL_BATCH_BROADCAST  batch index taken modulo each side's batch count
//   BROKEN_ADD_ONE_WAY             output takes A's shape: only B may broadcast
//   BROKEN_SOFTMAX_OPSET11         opset 11 given opset 13 (per-axis) semantics
//   BROKEN_SHARED_SCRATCH          MatMul accumulates in one buffer per kernel
//   BROKEN_IMPORT_IGNORES_CLAIM    kernel_import never checks that the blob is this claim's
//   BROKEN_BLOB_AFTER_RELEASE      a session keeps imported weights (pointers into the blob)
//                                  for later kernels of the same claim, past the release
//   BROKEN_FINGERPRINT_CHANGES     the fingerprint holds a per-session counter
//   BROKEN_IMPORT_CRASHES_TRUNCATED kernel_import trusts the payload size in the header
//   BROKEN_CHECK_ACCEPTS_GARBAGE   cache_check answers OPTIMAL whatever the fingerprint
//   BROKEN_WRITES_BLOB             kernel_import writes a flag into the (read-only) blob
//   BROKEN_IGNORES_BYTE_OFFSET     inputs are read from their allocation's start (byte_offset ignored)
//   BROKEN_MATMUL_EMPTY_K          MatMul with K = 0 leaves its output unwritten (not zeros)
//   BROKEN_SAFE_DIV                Div gives 0 for a zero divisor (IEEE: +-Inf or NaN)
//   BROKEN_SIZES_FROM_FIRST_RUN    Softmax keeps its row sizes from the first run (dynamic dims)
//   BROKEN_SETS_FTZ                Relu turns on flush-to-zero/denormals-are-zero "for speed" and leaves it on
//   BROKEN_LEAKS_THREAD            each session starts a worker thread that nothing stops
//   BROKEN_TAIL_STORE              Relu stores whole blocks of 8: up to 7 floats past the output's end
//   BROKEN_INT_ADD_SATURATES       integer Add clamps to the type's range instead of wrapping around
//   BROKEN_INT_DIV_FLOOR           integer Div rounds toward -inf (Python's //) instead of toward zero
//   BROKEN_KEEPS_INPUT_POINTER     Add keeps input B's pointer from its first run ("B never changes")
//   BROKEN_KEEPS_VIEW_POINTER      Softmax keeps the SDK Node (a pointer into the graph view) and reads axis at compute
//   BROKEN_CHANGES_AFTER_N_RUNS    Relu switches to a "tuned" path after 16 runs that leaves the tail unwritten
//   BROKEN_SCALAR_RANK1            binary ops give a scalar (rank-0) result the shape [1]
//   BROKEN_THREAD_LOCAL_SCRATCH    MatMul's scratch is thread_local, sized on the thread that created the kernel
//   BROKEN_CRASH_HANDLER           each session installs a SIGSEGV handler ("crash reporter") and never restores the host's
#include <nxrt_sdk/sdk.hpp>

#include <cstring>
#ifdef BROKEN_SETS_FTZ
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <type_traits>
#include <mutex>
#include <thread>

#include <signal.h>
#include <unistd.h>
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
    out[i] = da == 1 ? db : da;  // a size-0 dim broadcasts against 1 to 0
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

// The kernels' base: constant inputs the kernel holds itself ("pinned": copied at
// kernel_create, or read in place from the blob an imported kernel came from) are read
// from there instead of the context.
class OpKernel : public Kernel {
 public:
  struct Pinned {
    Dims dims;
    const float* data = nullptr;
  };
  std::map<size_t, Pinned> pinned;        // input index -> the kernel's own copy
  std::vector<std::vector<float>> owned;  // copies made at kernel_create
  uint64_t digest = 0;                    // the claim it was made for (claim_digest)

  void export_blob(BlobWriter& w) override;

 protected:
  ConstTensorView in(Context& ctx, size_t i) const {
    auto it = pinned.find(i);
#ifdef BROKEN_IGNORES_BYTE_OFFSET
    if (it == pinned.end()) return without_offset(ctx.input(i));  // reads from the allocation's start
#else
    if (it == pinned.end()) return ctx.input(i);
#endif
    return view(it->second);
  }
  std::optional<ConstTensorView> optional_in(Context& ctx, size_t i) const {
    auto it = pinned.find(i);
    if (it == pinned.end()) return ctx.optional_input(i);
    return view(it->second);
  }

 private:
  static ConstTensorView without_offset(const ConstTensorView& t) {
    nxrt_const_tensor c{};
    c.struct_size = sizeof c;
    c.dtype = t.dtype();
    c.rank = uint32_t(t.rank());
    c.memory = t.memory();
    c.dims = t.dims().data();
    c.data = t.handle();
    return ConstTensorView(c);
  }
  static ConstTensorView view(const Pinned& p) {
    nxrt_const_tensor t{};
    t.struct_size = sizeof t;
    t.dtype = NXRT_DTYPE_FLOAT32;
    t.rank = uint32_t(p.dims.size());
    t.memory = NXRT_MEMORY_HOST;
    t.dims = p.dims.data();
    t.data = p.data;
    return ConstTensorView(t);
  }
};

enum class IntOp { Add, Sub, Mul, Div };

// ONNX integer arithmetic: two's complement, wrapping around; Div truncates toward zero.
template <typename T>
T int_apply(IntOp op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case IntOp::Add:
#ifdef BROKEN_INT_ADD_SATURATES
    {  // "overflow is a bug in the model anyway": clamp like a saturating SIMD add
      const long double x = (long double)a + (long double)b;
      return x > (long double)std::numeric_limits<T>::max()   ? std::numeric_limits<T>::max()
             : x < (long double)std::numeric_limits<T>::min() ? std::numeric_limits<T>::min()
                                                              : T(a + b);
    }
#else
      return T(U(a) + U(b));
#endif
    case IntOp::Sub: return T(U(a) - U(b));
    case IntOp::Mul: return T(U(a) * U(b));
    case IntOp::Div:
#ifdef BROKEN_INT_DIV_FLOOR
      if constexpr (std::is_signed_v<T>)
        if ((a % b != 0) && ((a < 0) != (b < 0))) return T(a / b - 1);  // Python's floor division
#endif
      return T(a / b);
  }
  return T(0);
}

template <typename F>
class BinaryKernel : public OpKernel {
 public:
  BinaryKernel(F f, bool one_way, IntOp op) : f_(f), one_way_(one_way), op_(op) {}
  void compute(Context& ctx) override {
    auto a = in(ctx, 0), b = in(ctx, 1);
#ifdef BROKEN_KEEPS_INPUT_POINTER
    if (op_ == IntOp::Add) {  // "the bias never changes between runs": B's data pointer from the first run
      if (!kept_b_) kept_b_ = b.handle(), kept_offset_ = b.byte_offset();
    }
#endif
    const Dims da = to_dims(a.dims()), db = to_dims(b.dims());
    auto out_dims = broadcast(da, db);
    if (!out_dims) fail(NXRT_INVALID_ARGUMENT, "shapes do not broadcast");
    if (one_way_ && da.size() >= db.size()) out_dims = da;  // BROKEN_ADD_ONE_WAY: assumes A is the larger operand
#ifdef BROKEN_SCALAR_RANK1
    if (out_dims->empty()) out_dims = Dims{1};  // "a tensor has at least one dim"
#endif
    auto y = ctx.output(0, a.dtype(), std::span<const int64_t>(*out_dims));
    const int64_t n = element_count(*out_dims);
    auto run = [&](auto tag, auto op) {
      using T = decltype(tag);
      const T *pa = a.data<T>(), *pb = b.data<T>();
#ifdef BROKEN_KEEPS_INPUT_POINTER
      if (kept_b_) pb = reinterpret_cast<const T*>(static_cast<const char*>(kept_b_) + kept_offset_);
#endif
      T* out = y.data<T>();
      for (int64_t i = 0; i < n; ++i) {
        const Dims co = coord(i, *out_dims);
        out[i] = op(pa[source(da, co)], pb[source(db, co)]);
      }
    };
    auto ints = [&](auto tag) { run(tag, [this](auto p, auto q) { return int_apply<decltype(tag)>(op_, p, q); }); };
    switch (a.dtype()) {
      case NXRT_DTYPE_INT8: ints(int8_t{}); break;
      case NXRT_DTYPE_UINT8: ints(uint8_t{}); break;
      case NXRT_DTYPE_INT32: ints(int32_t{}); break;
      case NXRT_DTYPE_INT64: ints(int64_t{}); break;
      default: run(float{}, f_); break;
    }
  }

 private:
  F f_;
  bool one_way_;
  IntOp op_;
#ifdef BROKEN_KEEPS_INPUT_POINTER
  const void* kept_b_ = nullptr;
  uint64_t kept_offset_ = 0;
#endif
};
template <typename F>
std::unique_ptr<Kernel> binary(F f, IntOp op, bool one_way = false) {
  return std::make_unique<BinaryKernel<F>>(f, one_way, op);
}
#ifdef BROKEN_ADD_ONE_WAY
constexpr bool kAddOneWay = true;
#else
constexpr bool kAddOneWay = false;
#endif

class ReluKernel : public OpKernel {
 public:
  void compute(Context& ctx) override {
    auto a = in(ctx, 0);
    auto y = ctx.output(0, a.dtype(), a.dims());
    auto ints = [&](auto tag) {
      using T = decltype(tag);
      const T* x = a.data<T>();
      T* out = y.data<T>();
      for (int64_t i = 0; i < a.numel(); ++i) out[i] = x[i] > 0 ? x[i] : T(0);
    };
    switch (a.dtype()) {
      case NXRT_DTYPE_INT8: return ints(int8_t{});
      case NXRT_DTYPE_INT32: return ints(int32_t{});
      case NXRT_DTYPE_INT64: return ints(int64_t{});
      default: break;
    }
    const float* x = a.data<float>();
    float* out = y.data<float>();
#ifdef BROKEN_SETS_FTZ
    _mm_setcsr(_mm_getcsr() | 0x8040);  // FTZ | DAZ, for the whole thread, never restored
#endif
#ifdef BROKEN_TAIL_STORE
    const int64_t n = a.numel();  // the tail block is stored whole, padding included
    for (int64_t i = 0; i < n; i += 8)
      for (int64_t j = 0; j < 8; ++j) out[i + j] = i + j < n && x[i + j] > 0 ? x[i + j] : 0.f;
#elif defined(BROKEN_CHANGES_AFTER_N_RUNS)
    // After 16 runs "the autotuner" picks the blocked path, which forgets the tail.
    const int64_t n = ++runs_ > 16 ? a.numel() / 8 * 8 : a.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0 ? x[i] : 0.f;
#else
    for (int64_t i = 0; i < a.numel(); ++i) out[i] = x[i] > 0 ? x[i] : 0.f;
#endif
  }
#ifdef BROKEN_CHANGES_AFTER_N_RUNS
 private:
  std::atomic<int> runs_{0};
#endif
};

#ifdef BROKEN_THREAD_LOCAL_SCRATCH
thread_local std::vector<float> tl_scratch;  // "one scratch per thread, no locks"
#endif

class MatMulKernel : public OpKernel {
 public:
#ifdef BROKEN_THREAD_LOCAL_SCRATCH
  MatMulKernel() { tl_scratch.resize(4096); }  // sized where the kernel is made: the creator's thread only
#endif
  void compute(Context& ctx) override {
    auto a = in(ctx, 0), b = in(ctx, 1);
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
#ifdef BROKEN_MATMUL_EMPTY_K
    if (K == 0) return;  // "nothing to multiply": the output is left unwritten instead of zeros
#endif
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
#elif defined(BROKEN_THREAD_LOCAL_SCRATCH)
    float* acc = tl_scratch.data();  // empty (NULL) on any other thread
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

class GemmKernel : public OpKernel {
 public:
  GemmKernel(bool ta, bool tb, float alpha, float beta) : ta_(ta), tb_(tb), alpha_(alpha), beta_(beta) {}
  void compute(Context& ctx) override {
    auto a = in(ctx, 0), b = in(ctx, 1);
    auto c = optional_in(ctx, 2);
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

class SoftmaxKernel : public OpKernel {
 public:
  SoftmaxKernel(int64_t axis, bool per_axis, bool log) : axis_(axis), per_axis_(per_axis), log_(log) {}
#ifdef BROKEN_KEEPS_VIEW_POINTER
  SoftmaxKernel(const Node& n, bool per_axis, bool log) : SoftmaxKernel(0, per_axis, log) { node_ = n; }
#endif
  void compute(Context& ctx) override {
    auto x = in(ctx, 0);
    const Dims d = to_dims(x.dims());
    const int64_t rank = int64_t(d.size());
#ifdef BROKEN_KEEPS_VIEW_POINTER
    // "Attributes are read when needed": through the node of the view kernel_create received.
    const int64_t ax = node_ ? node_->attr_int("axis", -1) : axis_;
#else
    const int64_t ax = axis_;
#endif
    int64_t axis = ax < 0 ? ax + rank : ax;
    if (axis < 0 || axis >= rank) fail(NXRT_INVALID_ARGUMENT, "Softmax: axis out of range");
    auto y = ctx.output(0, NXRT_DTYPE_FLOAT32, x.dims());
    // Opset < 13 coerces to 2-D at axis; 13+ normalizes along axis alone.
#ifdef BROKEN_SIZES_FROM_FIRST_RUN
    if (!len_) {  // "the sizes never change once known"
      outer_ = prod(d, 0, size_t(axis));
      len_ = per_axis_ ? d[size_t(axis)] : prod(d, size_t(axis), d.size());
      inner_ = per_axis_ ? prod(d, size_t(axis) + 1, d.size()) : 1;
    }
    const int64_t outer = outer_, len = len_, inner = inner_;
#else
    const int64_t outer = prod(d, 0, size_t(axis));
    const int64_t len = per_axis_ ? d[size_t(axis)] : prod(d, size_t(axis), d.size());
    const int64_t inner = per_axis_ ? prod(d, size_t(axis) + 1, d.size()) : 1;
#endif
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
#ifdef BROKEN_KEEPS_VIEW_POINTER
  std::optional<Node> node_;
#endif
#ifdef BROKEN_SIZES_FROM_FIRST_RUN
  int64_t outer_ = 0, len_ = 0, inner_ = 0;
#endif
};

// Float32 with a known rank; dims may be unknown until run time (kernels size from the inputs).
std::optional<Refusal> f32_ranked(const Node& n) {
  if (auto r = require_dtypes(n, {NXRT_DTYPE_FLOAT32})) return r;
  for (size_t i = 0; i < n.input_count(); ++i)
    if (n.has_input(i) && n.input(i).rank() < 0) return refuse(NXRT_REFUSE_SHAPE, "inputs of unknown rank");
  return std::nullopt;
}
// Binary ops: float32 or one integer type for both inputs and the output (ONNX allows every numeric type).
std::optional<Refusal> binary_ranked(const Node& n) {
  const nxrt_dtype t = n.input(0).dtype();
  if (t == NXRT_DTYPE_FLOAT32) return f32_ranked(n);
  if (auto r = require_dtypes(n, {t})) return refuse(NXRT_REFUSE_DTYPE, "{}: the inputs and the output differ in type", n.op_type());
  if (t != NXRT_DTYPE_INT8 && t != NXRT_DTYPE_UINT8 && t != NXRT_DTYPE_INT32 && t != NXRT_DTYPE_INT64)
    return refuse(NXRT_REFUSE_DTYPE, "{} of {}", n.op_type(), dtype_name(t));
  return std::nullopt;
}
// Relu 14+: float32, int8, int32, int64.
std::optional<Refusal> relu14_ranked(const Node& n) {
  if (auto r = require_dtypes(n, {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_INT8, NXRT_DTYPE_INT32, NXRT_DTYPE_INT64})) return r;
  return std::nullopt;
}

const KernelRegistry<OpsSession>& registry() {
  static KernelRegistry<OpsSession> r = [] {
    KernelRegistry<OpsSession> k;
    k.add({"Add", "", 7, INT_MAX, binary_ranked, [](const Node&, OpsSession&) { return binary([](float a, float b) { return a + b; }, IntOp::Add, kAddOneWay); }});
    k.add({"Sub", "", 7, INT_MAX, binary_ranked, [](const Node&, OpsSession&) { return binary([](float a, float b) { return a - b; }, IntOp::Sub); }});
    k.add({"Mul", "", 7, INT_MAX, binary_ranked, [](const Node&, OpsSession&) { return binary([](float a, float b) { return a * b; }, IntOp::Mul); }});
#ifdef BROKEN_SAFE_DIV
    // "Never divide by zero": 0 where IEEE gives +-Inf or NaN.
    k.add({"Div", "", 7, INT_MAX, binary_ranked, [](const Node&, OpsSession&) { return binary([](float a, float b) { return b == 0 ? 0.f : a / b; }, IntOp::Div); }});
#else
    k.add({"Div", "", 7, INT_MAX, binary_ranked, [](const Node&, OpsSession&) { return binary([](float a, float b) { return a / b; }, IntOp::Div); }});
#endif
    k.add({"Relu", "", 6, 13, f32_ranked,
           [](const Node&, OpsSession&) -> std::unique_ptr<Kernel> { return std::make_unique<ReluKernel>(); }});
    k.add({"Relu", "", 14, INT_MAX, relu14_ranked,
           [](const Node&, OpsSession&) -> std::unique_ptr<Kernel> { return std::make_unique<ReluKernel>(); }});
    k.add({"MatMul", "", 9, INT_MAX, f32_ranked,
           [](const Node&, OpsSession&) -> std::unique_ptr<Kernel> { return std::make_unique<MatMulKernel>(); }});
    k.add({"Gemm", "", 11, INT_MAX, f32_ranked, [](const Node& n, OpsSession&) -> std::unique_ptr<Kernel> {
             return std::make_unique<GemmKernel>(n.attr_int("transA", 0) != 0, n.attr_int("transB", 0) != 0,
                                                 n.attr_float("alpha", 1.f), n.attr_float("beta", 1.f));
           }});
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      const bool log = std::string(op) == "LogSoftmax";
      k.add({op, "", 1, 12, f32_ranked, [log](const Node& n, OpsSession&) -> std::unique_ptr<Kernel> {
#ifdef BROKEN_SOFTMAX_OPSET11
               return std::make_unique<SoftmaxKernel>(n.attr_int("axis", -1), true, log);  // opset 13 rules
#else
               return std::make_unique<SoftmaxKernel>(n.attr_int("axis", 1), false, log);
#endif
             }});
      k.add({op, "", 13, INT_MAX, f32_ranked, [log](const Node& n, OpsSession&) -> std::unique_ptr<Kernel> {
#ifdef BROKEN_KEEPS_VIEW_POINTER
               return std::make_unique<SoftmaxKernel>(n, true, log);
#endif
               return std::make_unique<SoftmaxKernel>(n.attr_int("axis", -1), true, log);
             }});
    }
    return k;
  }();
  return r;
}

// ------------------------------------------------------------ compiled-kernel cache
// Blob: a 40-byte header (magic, format, pinned count, claim digest, payload size and
// FNV-1a of the payload), then per pinned constant its input index, rank and dims, and
// its floats 64-byte aligned from the blob's start (an imported kernel reads them in place).
constexpr char kBlobMagic[8] = {'N', 'X', 'C', 'O', 'N', 'F', 'O', 'P'};
constexpr uint32_t kBlobFormat = 1;
constexpr uint64_t kHeaderBytes = 40;
constexpr const char* kIsa = "scalar-c++";  // what the kernels are compiled for (a device property)

uint64_t fnv(const void* p, size_t n, uint64_t h = 1469598103934665603ull) {
  auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}
template <typename T>
uint64_t fnv_pod(const T& v, uint64_t h) { return fnv(&v, sizeof v, h); }
uint64_t fnv_str(std::string_view s, uint64_t h) { return fnv(s.data(), s.size(), fnv_pod(uint64_t(s.size()), h)); }

// What a kernel is compiled from: op, opset, attributes, input types and shapes, and the
// bytes of its constant inputs. A blob made for another claim has another digest.
uint64_t claim_digest(const Graph& sub) {
  uint64_t h = fnv_pod(uint64_t(sub.node_count()), 1469598103934665603ull);
  for (size_t k = 0; k < sub.node_count(); ++k) {
    const Node n = sub.node(k);
    h = fnv_str(n.op_type(), fnv_str(n.domain(), h));
    h = fnv_pod(sub.opset(std::string(n.domain()).c_str()), h);
    for (size_t a = 0; a < n.attribute_count(); ++a) {
      const Attribute at = n.attribute_at(a);
      h = fnv_pod(uint32_t(at.type()), fnv_str(at.name(), h));
      switch (at.type()) {
        case NXRT_ATTR_INT: h = fnv_pod(at.i(), h); break;
        case NXRT_ATTR_FLOAT: h = fnv_pod(at.f(), h); break;
        case NXRT_ATTR_STRING: h = fnv_str(at.s(), h); break;
        case NXRT_ATTR_INTS: for (auto v : at.ints()) h = fnv_pod(v, h); break;
        case NXRT_ATTR_FLOATS: for (auto v : at.floats()) h = fnv_pod(v, h); break;
        default: break;
      }
    }
    for (size_t i = 0; i < n.input_count(); ++i) {
      const Value v = n.input(i);
      h = fnv_pod(uint8_t(v.present()), h);
      if (!v.present()) continue;
      h = fnv_pod(uint32_t(v.dtype()), h);
      for (auto d : v.dims()) h = fnv_pod(d, h);
      if (v.is_constant()) {
        const ConstTensorView c = v.constant();
        h = fnv(c.raw(), c.bytes(), fnv_pod(uint8_t(1), h));
      }
    }
  }
  return h;
}

void OpKernel::export_blob(BlobWriter& w) {
  // The payload first (its checksum goes in the header), laid out as it will sit in the blob.
  std::vector<uint8_t> payload;
  auto put = [&](const void* p, size_t n) {
    payload.insert(payload.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  };
  for (auto& [index, pin] : pinned) {
    const uint32_t idx = uint32_t(index), rank = uint32_t(pin.dims.size());
    put(&idx, 4);
    put(&rank, 4);
    put(pin.dims.data(), pin.dims.size() * 8);
    while ((kHeaderBytes + payload.size()) % 64) payload.push_back(0);
    put(pin.data, size_t(element_count(pin.dims)) * 4);
  }
  w.write(kBlobMagic, 8);
  w.pod(kBlobFormat);
  w.pod(uint32_t(pinned.size()));
  w.pod(digest);
  w.pod(uint64_t(payload.size()));
  w.pod(fnv(payload.data(), payload.size()));
  w.write(payload.data(), payload.size());
}

std::string device_fingerprint(const std::string& name, const std::string& vendor, const std::string& isa) {
  [[maybe_unused]] static std::atomic<int> sessions{0};
  std::string fp = fmt::format("{} 0.1.0; blob {}; device '{}'; vendor '{}'; isa {}", CONFTEST_NAME, kBlobFormat, name, vendor, isa);
#ifdef BROKEN_FINGERPRINT_CHANGES
  fp += fmt::format("; session {}", ++sessions);  // differs between sessions of one device
#endif
  return fp;
}

// Printable ASCII only, at most 60 characters: a foreign fingerprint quoted in a reason.
std::string quote(std::string_view s) {
  std::string q;
  for (char c : s.substr(0, 60)) q += (c >= 0x20 && c < 0x7f) ? c : '?';
  return q + (s.size() > 60 ? "..." : "");
}

class OpsSession : public HostMemorySession {
 public:
  explicit OpsSession(std::string fingerprint) : fingerprint_(std::move(fingerprint)) {
#ifdef BROKEN_CRASH_HANDLER
    struct sigaction sa {};
    sa.sa_handler = [](int) { _exit(70); };  // "report the crash", replacing whatever the host had
    sigaction(SIGSEGV, &sa, nullptr);
#endif
#ifdef BROKEN_LEAKS_THREAD
    std::thread([] {  // a "background compiler" waiting for work that never comes, never joined
      for (;;) pause();
    }).detach();
#endif
  }
  void get_capability(const Graph& g, nxrt_claim_sink* sink) override { registry().claim(g, sink); }
  std::unique_ptr<Kernel> create_kernel(const Graph& sub) override {
    auto k = registry().create(sub, *this);
    auto* op = static_cast<OpKernel*>(k.get());
    op->digest = claim_digest(sub);
#ifdef BROKEN_BLOB_AFTER_RELEASE
    if (reuse(*op)) return k;
#endif
    // Constant float inputs are copied now, as prepacking would, and read from the copy.
    const Node n = sub.node(0);
    for (size_t i = 0; i < n.input_count(); ++i) {
      const Value v = n.input(i);
      if (!v.present() || !v.is_constant() || v.dtype() != NXRT_DTYPE_FLOAT32) continue;
      const ConstTensorView c = v.constant();
      const float* f = c.data<float>();
      op->owned.emplace_back(f, f + c.numel());
      op->pinned[i] = {to_dims(c.dims()), op->owned.back().data()};
    }
    return k;
  }
  std::unique_ptr<Stream> create_stream() override { return std::make_unique<SyncStream>(); }
  std::unique_ptr<Event> create_event() override { return std::make_unique<SyncEvent>(); }

  std::string fingerprint() override { return fingerprint_; }
  CacheJudgement judge(const std::string& other) override {
#ifdef BROKEN_CHECK_ACCEPTS_GARBAGE
    return {};  // whatever it was compiled for
#endif
    if (other == fingerprint_) return {};
    // "<plugin> <version>; blob N; device '...'; vendor '...'; isa X"
    auto fields = [](const std::string& fp) {
      std::vector<std::string> f;
      size_t at = 0;
      while (at <= fp.size()) {
        const size_t semi = fp.find("; ", at);
        f.push_back(fp.substr(at, semi == std::string::npos ? std::string::npos : semi - at));
        if (semi == std::string::npos) break;
        at = semi + 2;
      }
      return f;
    };
    const auto mine = fields(fingerprint_), theirs = fields(other);
    if (theirs.size() != mine.size() || theirs[0] != mine[0] || theirs[1] != mine[1])
      return {NXRT_CACHE_UNSUPPORTED, fmt::format("not compiled by {} (blob {}): fingerprint '{}'", mine[0], kBlobFormat, quote(other))};
    for (size_t i = 2; i < mine.size(); ++i)
      if (theirs[i] != mine[i])
        return {NXRT_CACHE_RECOMPILE, fmt::format("compiled for {}, this session has {}", quote(theirs[i]), mine[i])};
    return {NXRT_CACHE_RECOMPILE, "the fingerprints differ"};
  }

  std::unique_ptr<Kernel> import_kernel(const Graph& sub, std::span<const uint8_t> blob, CacheJudgement&) override {
#ifdef BROKEN_IMPORT_CRASHES_TRUNCATED
    // Trusts the payload size in the header: reads past the end of a truncated blob.
    if (blob.size() >= kHeaderBytes) {
      uint64_t size = 0, sum = 0;
      std::memcpy(&size, blob.data() + 24, 8);
      std::memcpy(&sum, blob.data() + 32, 8);
      if (fnv(blob.data() + kHeaderBytes, size_t(size)) != sum) throw BlobRejected{NXRT_CACHE_UNSUPPORTED, "payload checksum"};
    }
#endif
    BlobReader r(blob.data(), blob.size());
    if (std::memcmp(r.bytes(8).data(), kBlobMagic, 8) != 0) throw BlobRejected{NXRT_CACHE_UNSUPPORTED, "not a " CONFTEST_NAME " blob (magic)"};
    const auto format = r.pod<uint32_t>();
    if (format != kBlobFormat)
      throw BlobRejected{NXRT_CACHE_UNSUPPORTED, fmt::format("blob format {}, this plugin reads {}", format, kBlobFormat)};
    const auto count = r.pod<uint32_t>();
    [[maybe_unused]] const auto digest = r.pod<uint64_t>();
    const auto payload = r.pod<uint64_t>();
    const auto sum = r.pod<uint64_t>();
    if (payload != r.remaining()) r.reject("the header says {} payload bytes, the blob holds {}", payload, r.remaining());
    if (fnv(blob.data() + r.position(), size_t(payload)) != sum) r.reject("the payload checksum does not match");
    const uint64_t own = claim_digest(sub);
#ifndef BROKEN_IMPORT_IGNORES_CLAIM
    if (digest != own)
      throw BlobRejected{NXRT_CACHE_RECOMPILE, fmt::format("compiled for another claim (digest {:016x}, this one {:016x})", digest, own)};
#endif
    auto k = registry().create(sub, *this);
    auto* op = static_cast<OpKernel*>(k.get());
    op->digest = own;
    const Node n = sub.node(0);
    for (uint32_t c = 0; c < count; ++c) {
      const auto idx = r.pod<uint32_t>();
      const auto rank = r.pod<uint32_t>();
      if (rank > 8) r.reject("rank {}", rank);
      Dims dims(rank);
      for (auto& d : dims) d = r.pod<int64_t>();
      const Value v = n.input(idx);
      if (!v.present() || !v.is_constant() || v.dtype() != NXRT_DTYPE_FLOAT32 || to_dims(v.dims()) != dims)
        throw BlobRejected{NXRT_CACHE_RECOMPILE, fmt::format("the blob's constant {} does not fit input {} of this node", c, idx)};
      r.align(64);
      op->pinned[idx] = {dims, r.array<float>(uint64_t(element_count(dims))).data()};
    }
    if (r.remaining()) r.reject("{} bytes after the last constant", r.remaining());
#ifdef BROKEN_WRITES_BLOB
    // Marks the blob as seen, in place: the host's blob is a read-only mapping it shares.
    const_cast<uint8_t*>(blob.data())[15] = 0x80;
#endif
#ifdef BROKEN_BLOB_AFTER_RELEASE
    if (!reuse(*op)) remember(*op);
#endif
    return k;
  }

 private:
  std::string fingerprint_;
#ifdef BROKEN_BLOB_AFTER_RELEASE
  // Imported weights by claim, kept for later kernels of the same claim: they point into
  // a blob the host may unmap once the kernel that imported them is released.
  std::mutex mu_;
  std::map<uint64_t, std::map<size_t, OpKernel::Pinned>> imported_;
  bool reuse(OpKernel& k) {
    std::lock_guard lock(mu_);
    auto it = imported_.find(k.digest);
    if (it == imported_.end()) return false;
    k.pinned = it->second;
    return true;
  }
  void remember(const OpKernel& k) {
    std::lock_guard lock(mu_);
    imported_[k.digest] = k.pinned;
  }
#endif
};

// A compile-only session for a described device: kernels are made and exported, never run.
class OfflineSession : public OpsSession {
 public:
  using OpsSession::OpsSession;
  void* alloc(nxrt_memory_kind, uint64_t, uint64_t) override {
    fail(NXRT_UNSUPPORTED, "an offline (compile-only) session has no memory");
  }
  void copy(std::span<const nxrt_copy_region>, Stream*) override {
    fail(NXRT_UNSUPPORTED, "an offline (compile-only) session has no memory");
  }
};

class OpsPlugin : public Plugin {
 public:
  const char* name() const override { return CONFTEST_NAME; }
  const char* version() const override { return "0.1.0"; }
  uint64_t features() const override {
    return NXRT_FEATURE_STREAMS | NXRT_FEATURE_CONCURRENT_RUN | kHostMemoryFeatures | NXRT_FEATURE_KERNEL_CACHE |
           NXRT_FEATURE_OFFLINE_COMPILE;
  }
  uint32_t device_count() override { return 1; }
  DeviceDescription describe_device(uint32_t) override {
    DeviceDescription d;
    d.kind = NXRT_DEVICE_CPU;
    d.name = "conformance ops test device";
    d.vendor = "nxrt";
    d.memory_bytes = 1ull << 32;
    d.dtypes = 1ull << NXRT_DTYPE_FLOAT32 | 1ull << NXRT_DTYPE_INT8 | 1ull << NXRT_DTYPE_UINT8 | 1ull << NXRT_DTYPE_INT32 |
               1ull << NXRT_DTYPE_INT64;
    d.host_addressable = true;
    d.properties = {{std::string(CONFTEST_NAME) + ".isa", kIsa}};  // the fingerprint's inputs are all here
    return d;
  }
  std::unique_ptr<Session> create_session(uint32_t, const Options&) override {
    const DeviceDescription d = describe_device(0);
    return std::make_unique<OpsSession>(device_fingerprint(d.name, d.vendor, kIsa));
  }
  std::unique_ptr<Session> create_offline_session(const Options& device, const Options&) override {
    auto need = [&](const std::string& key) {
      auto it = device.find(key);
      if (it == device.end()) fail(NXRT_INVALID_ARGUMENT, "the device description has no '{}'", key);
      return it->second;
    };
    const std::string kind = need("kind");
    if (kind != "cpu") fail(NXRT_UNSUPPORTED, "{} compiles for CPU devices, not kind '{}'", CONFTEST_NAME, quote(kind));
    const std::string name = need("name"), vendor = need("vendor"), isa = need(std::string(CONFTEST_NAME) + ".isa");
    if (isa != kIsa) fail(NXRT_UNSUPPORTED, "{} compiles for isa {}, not '{}'", CONFTEST_NAME, kIsa, quote(isa));
    return std::make_unique<OfflineSession>(device_fingerprint(name, vendor, isa));
  }
};

}  // namespace

NXRT_SDK_DEFINE_PLUGIN(OpsPlugin)
