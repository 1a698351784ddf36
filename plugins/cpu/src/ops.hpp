// Shared plumbing for the kernels the plugin registers: the session type, the
// registration index (one register_<family>_ops per ops_<family>.cpp, all
// called by registry() in ops.cpp), and small helpers for checks, dtype
// dispatch and compute.
#pragma once
#include <nxrt_sdk/sdk.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "conv.hpp"
#include "tensor_ops.hpp"
#include "thread_pool.hpp"

namespace nxrt::cpu {

namespace sdk = ::nxrt::sdk;
using sdk::Context;
using sdk::Kernel;
using sdk::Node;
using sdk::Refusal;
using sdk::TensorView;
using sdk::ConstTensorView;
using Check = std::optional<Refusal>;

class CpuSession : public sdk::HostMemorySession {
 public:
  // `fingerprint`: the kernel-cache fingerprint of the CPU this session packs for (this one,
  // or a described one when `offline`: compile-only, no memory, no runs).
  // `bf16`: the session option cpu.precision=bf16 (gemm_bf16.hpp), checked by the caller.
  CpuSession(int threads, std::string fingerprint, bool offline = false, bool bf16 = false);
  void get_capability(const sdk::Graph& g, nxrt_claim_sink* sink) override;
  std::unique_ptr<Kernel> create_kernel(const sdk::Graph& subgraph) override;
  ThreadPool* pool() { return pool_.threads() > 1 ? &pool_ : nullptr; }
  // MatMul / Gemm with constant weights run the bf16 fast-math GEMM (cpu.precision=bf16).
  bool bf16() const { return bf16_; }
  // ABI 2.4 kernel cache (kernel_cache.hpp): prepacked kernels export their buffers and
  // come back from a blob with no packing and no copy.
  std::string fingerprint() override { return fingerprint_; }
  sdk::CacheJudgement judge(const std::string& fingerprint) override;
  std::unique_ptr<Kernel> import_kernel(const sdk::Graph& subgraph, std::span<const uint8_t> blob,
                                        sdk::CacheJudgement& judgement) override;
  void* alloc(nxrt_memory_kind kind, uint64_t bytes, uint64_t alignment) override;
  void copy(std::span<const nxrt_copy_region> regions, sdk::Stream* stream) override;

 private:
  ThreadPool pool_;
  std::string fingerprint_;
  bool offline_ = false;
  bool bf16_ = false;
};

using Registry = sdk::KernelRegistry<CpuSession>;
using Def = sdk::KernelDef<CpuSession>;

// The process-wide registry (built once, read-only afterwards; ops.cpp).
const Registry& registry();

// The registration index: each adds the kernels of one op family, defined in
// the ops_<family>.cpp of the same name.
void register_gemm_ops(Registry& r);                // Gemm, MatMul
void register_conv_ops(Registry& r);                // Conv
void register_conv_transpose_ops(Registry& r);      // ConvTranspose
void register_pool_ops(Registry& r);                // MaxPool, AveragePool, Global*Pool, MaxUnpool
void register_normalization_ops(Registry& r);       // BatchNorm, LayerNorm, InstanceNorm, LRN, MVN
void register_softmax_ops(Registry& r);             // Softmax, LogSoftmax, Hardmax
void register_elementwise_binary_ops(Registry& r);  // Add..Pow, variadic Max/Min/Sum/Mean, PRelu, Mod
void register_elementwise_unary_ops(Registry& r);   // Relu, Clip, float math and activations, Sign, IsNaN/IsInf
void register_compare_logic_ops(Registry& r);       // comparisons, logic, bitwise, Where
void register_cast_ops(Registry& r);                // Cast, CastLike
void register_shape_ops(Registry& r);               // Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout
void register_data_movement_ops(Registry& r);       // Transpose, Concat, Split, Slice, Pad, Expand, Tile, ...
void register_gather_scatter_ops(Registry& r);      // Gather*, Scatter*, Compress, NonZero, OneHot
void register_sort_ops(Registry& r);                // TopK, Unique
void register_reduce_ops(Registry& r);              // Reduce*, ArgMax/ArgMin, CumSum
void register_generator_ops(Registry& r);           // Constant, ConstantOfShape, Range, EyeLike, windows
void register_object_detection_ops(Registry& r);    // NonMaxSuppression, RoiAlign
void register_loss_ops(Registry& r);                // NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
void register_optimizer_ops(Registry& r);           // ai.onnx.preview.training Adagrad, Momentum
void register_quantize_ops(Registry& r);            // QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
void register_integer_ops(Registry& r);             // MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv
void register_resize_ops(Registry& r);              // Resize, GridSample
void register_linalg_ops(Registry& r);              // Einsum, Det
void register_rnn_ops(Registry& r);                 // RNN, GRU, LSTM
void register_signal_ops(Registry& r);              // DFT, STFT, MelWeightMatrix
void register_text_ops(Registry& r);                // TfIdfVectorizer
void register_string_ops(Registry& r);              // StringNormalizer
void register_random_ops(Registry& r);              // Random*, Bernoulli, Multinomial, Dropout 12+ (training)

// Where a Conv kernel finds its tensors among the kernel inputs, and what it
// applies to its result (a fused group: Conv [+ Add] [+ Relu | Clip | HardSwish]).
struct PoolAttrs;
struct ConvIo {
  int x = 0, w = 1, b = 2;  // b < 0: no bias
  int residual = -1;        // input added to the result (fused Add), < 0: none
  ConvPostOps post;         // clamp (residual is bound at run time)
  std::shared_ptr<const PoolAttrs> max_pool;  // a fused MaxPool after the activation (no residual)
  // X multiplied per channel by this input first ([N or 1, C, 1, 1]: a squeeze-excite Mul),
  // folded into W's packed copy or x^T's packing each run (conv2d_channel_scaled); < 0: none.
  int channel_scale = -1;
};
// Constant W and bias are declared in `pp` (made on create, the blob's on import).
std::unique_ptr<Kernel> make_conv_kernel(const Node& conv, CpuSession& session, const ConvIo& io, sdk::Prepacked& pp);

// Where a MatMul kernel finds its tensors among the kernel inputs (a fused group:
// MatMul + Add(constant bias over the last axis) [+ Add(residual of the output's shape)]).
struct MatMulIo {
  int a = 0, b = 1;
  const Node* bias_add = nullptr;  // the Add whose other input (slot bias_slot) is the constant bias
  int bias_slot = -1;
  int residual = -1;               // input added to the result, < 0: none
};
// Constant B and bias are declared in `pp` (made on create, the blob's on import).
std::unique_ptr<Kernel> make_matmul_kernel(const Node& matmul, CpuSession& session, const MatMulIo& io,
                                           sdk::Prepacked& pp);

// Where a Gemm kernel finds its tensors among the kernel inputs (a fused group: Gemm ->
// Relu | Clip, the activation applied in the GEMM's store).
struct GemmIo {
  int a = 0, b = 1, c = 2;  // c < 0: no C
  bool clamp = false;
  float lo = 0.f, hi = 0.f;
};
// A constant B is declared in `pp` (made on create, the blob's on import).
std::unique_ptr<Kernel> make_gemm_kernel(const Node& gemm, CpuSession& session, const GemmIo& io, sdk::Prepacked& pp);

// Conv geometry shared by Conv, ConvInteger and QLinearConv (ops_conv.cpp);
// w_input is W's input index. 1-D and 2-D.
struct ConvAttrs {
  int64_t sr = 2;  // spatial rank
  std::string auto_pad;
  int64_t group = 1;
  std::vector<int64_t> kernel_shape, strides, dilations, pads;
};
int64_t conv_spatial_rank(const Node& n, size_t w_input);  // -1: unknown before run time
Check conv_geometry_check(const Node& n, size_t w_input);   // attributes and rank (not dtypes)
ConvAttrs read_conv_attrs(const Node& n, size_t w_input);
// The call's shape from X's and W's run-time dims; fails naming the problem.
ConvShape conv_shape(const ConvAttrs& a, std::span<const int64_t> xd, std::span<const int64_t> wd, const char* op);
// The shape at kernel creation, where x is present with a static shape and conv_shape accepts
// it; else nullopt (a shape error is the run's to report).
std::optional<ConvShape> static_conv_shape(const ConvAttrs& a, const sdk::Value& x, std::span<const int64_t> wd,
                                           const char* op);

// Claims with fusion: every node as the registry decides, plus Conv chains
// (Conv -> [Add] -> [Relu | Clip | HardSwish]) as one group when that is exact.
void claim_nodes_fused(const sdk::Graph& g, nxrt_claim_sink* sink);
// The kernel of a multi-node group claimed by claim_nodes_fused; its prepacked kind (the
// op types in chain order, "Conv+Add+Relu") names the blob it exports.
std::unique_ptr<Kernel> create_fused_kernel(const sdk::Graph& subgraph, CpuSession& session, sdk::Prepacked& pp);
std::string fused_kind(const sdk::Graph& subgraph);

// A kernel whose compute is a lambda over immutable captured state. compute
// never mutates the kernel, so concurrent runs on one kernel are safe.
// `description` is what kernel_describe says (ABI 2.5, `nxrt inspect`): the algorithm chosen.
template <typename F>
class FnKernel final : public Kernel {
 public:
  FnKernel(F f, std::string description) : f_(std::move(f)), description_(std::move(description)) {}
  void compute(Context& ctx) override { f_(ctx); }
  std::string describe() const override { return description_; }

 private:
  const F f_;
  const std::string description_;
};
template <typename F>
std::unique_ptr<Kernel> make_kernel(F f, std::string description = {}) {
  return std::make_unique<FnKernel<F>>(std::move(f), std::move(description));
}

inline constexpr nxrt_dtype kF32[] = {NXRT_DTYPE_FLOAT32};
inline constexpr nxrt_dtype kFloat[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64};

// dtypes any data-movement op accepts (fixed-size element types).
inline constexpr nxrt_dtype kAllFixed[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_UINT8,   NXRT_DTYPE_INT8,   NXRT_DTYPE_UINT16,
                                           NXRT_DTYPE_INT16,   NXRT_DTYPE_INT32,   NXRT_DTYPE_INT64,  NXRT_DTYPE_BOOL,
                                           NXRT_DTYPE_FLOAT16, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_UINT32, NXRT_DTYPE_UINT64,
                                           NXRT_DTYPE_BFLOAT16};
// kAllFixed and string (ABI 2.3): for ops that only move whole elements by bytes (a string
// element is an nxrt_string the host owns, valid for the run, so copying it is copying the string).
inline constexpr nxrt_dtype kAllMovable[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_UINT8,   NXRT_DTYPE_INT8,   NXRT_DTYPE_UINT16,
                                             NXRT_DTYPE_INT16,   NXRT_DTYPE_INT32,   NXRT_DTYPE_INT64,  NXRT_DTYPE_BOOL,
                                             NXRT_DTYPE_FLOAT16, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_UINT32, NXRT_DTYPE_UINT64,
                                             NXRT_DTYPE_BFLOAT16, NXRT_DTYPE_STRING};

// Refuses unless the given input has dtype `t` (when present).
inline Check input_dtype_is(const Node& n, size_t i, nxrt_dtype t, const char* what) {
  auto v = n.input(i);
  if (v.present() && v.dtype() != t)
    return sdk::refuse(NXRT_REFUSE_DTYPE, "{} input {} ({}) is {}, only {} is implemented", n.op_type(), i, what,
                       sdk::dtype_name(v.dtype()), sdk::dtype_name(t));
  return std::nullopt;
}

// All present inputs and outputs share one dtype.
inline Check same_dtype(const Node& n, size_t input_end = SIZE_MAX) {
  nxrt_dtype t = NXRT_DTYPE_UNDEFINED;
  for (size_t i = 0; i < n.input_count() && i < input_end; ++i)
    if (n.has_input(i)) {
      if (t == NXRT_DTYPE_UNDEFINED) t = n.input(i).dtype();
      else if (n.input(i).dtype() != t)
        return sdk::refuse(NXRT_REFUSE_DTYPE, "{}: mixed input dtypes", n.op_type());
    }
  return std::nullopt;
}

// Refuses when output `i` or later is present (an optional output we do not produce).
inline Check no_outputs_from(const Node& n, size_t i, const char* what) {
  for (size_t k = i; k < n.output_count(); ++k)
    if (n.has_output(k)) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: optional output {} ({}) is not implemented", n.op_type(), k, what);
  return std::nullopt;
}

// Refuses unless the attribute is absent or equals `want`.
inline Check attr_int_is(const Node& n, const char* name, int64_t want) {
  auto a = n.attr(name);
  if (a && a->i() != want)
    return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: {}={} is not implemented (only {})", n.op_type(), name, a->i(), want);
  return std::nullopt;
}

// Chains checks: the first refusal wins.
template <typename... C>
Check first_refusal(C&&... c) {
  Check r;
  ((r ? void() : void(r = c())), ...);
  return r;
}

// At most 16 dims written, then their count: a shape tensor may hold millions of values (a
// fuzzed Reshape's error message took over 40 s under ASan writing them all).
inline std::string dims_str(std::span<const int64_t> d) {
  constexpr size_t kShown = 16;
  std::string s = "[";
  for (size_t i = 0; i < std::min(d.size(), kShown); ++i) {
    if (i) s += ',';
    s += std::to_string(d[i]);
  }
  if (d.size() > kShown) s += ",... (" + std::to_string(d.size()) + " dims)";
  return s + "]";
}

// Normalises a possibly negative axis against rank r; fails when out of range.
inline int64_t norm_axis(int64_t axis, int64_t r, const char* op, bool inclusive_end = false) {
  const int64_t hi = inclusive_end ? r : r - 1;
  const int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a > hi) sdk::fail(NXRT_INVALID_ARGUMENT, "{}: axis {} out of range for rank {}", op, axis, r);
  return a;
}

// Copies a constant input (if constant) so it outlives kernel creation.
struct ConstCopy {
  bool present = false;
  nxrt_dtype dtype = NXRT_DTYPE_UNDEFINED;
  std::vector<int64_t> dims;
  std::vector<unsigned char> bytes;
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(bytes.data()); }
  int64_t numel() const { return sdk::element_count(dims); }
};
inline ConstCopy copy_constant(const Node& n, size_t i) {
  ConstCopy c;
  auto v = n.input(i);
  if (!v.present() || !v.is_constant()) return c;
  ConstTensorView t = v.constant();
  c.present = true;
  c.dtype = t.dtype();
  c.dims = t.dims();
  c.bytes.resize(t.bytes());
  if (!c.bytes.empty()) std::memcpy(c.bytes.data(), t.raw(), t.bytes());
  return c;
}

// ------------------------------------------------- dtype dispatch, readers

inline std::optional<Elem> elem_of(nxrt_dtype t) {
  switch (t) {
    case NXRT_DTYPE_FLOAT32: return Elem::F32;
    case NXRT_DTYPE_FLOAT16: return Elem::F16;
    case NXRT_DTYPE_BFLOAT16: return Elem::BF16;
    case NXRT_DTYPE_FLOAT64: return Elem::F64;
    case NXRT_DTYPE_INT8: return Elem::I8;
    case NXRT_DTYPE_UINT8: return Elem::U8;
    case NXRT_DTYPE_INT16: return Elem::I16;
    case NXRT_DTYPE_UINT16: return Elem::U16;
    case NXRT_DTYPE_INT32: return Elem::I32;
    case NXRT_DTYPE_UINT32: return Elem::U32;
    case NXRT_DTYPE_INT64: return Elem::I64;
    case NXRT_DTYPE_UINT64: return Elem::U64;
    case NXRT_DTYPE_BOOL: return Elem::Bool;
    default: return std::nullopt;
  }
}

// Calls f(T{}) with the C++ type of dtype t (numeric types and bool); fails on others.
template <typename F>
void dispatch_type(nxrt_dtype t, const char* op, F&& f) {
  switch (t) {
    case NXRT_DTYPE_FLOAT32: f(float{}); break;
    case NXRT_DTYPE_FLOAT64: f(double{}); break;
    case NXRT_DTYPE_INT8: f(int8_t{}); break;
    case NXRT_DTYPE_UINT8: f(uint8_t{}); break;
    case NXRT_DTYPE_INT16: f(int16_t{}); break;
    case NXRT_DTYPE_UINT16: f(uint16_t{}); break;
    case NXRT_DTYPE_INT32: f(int32_t{}); break;
    case NXRT_DTYPE_UINT32: f(uint32_t{}); break;
    case NXRT_DTYPE_INT64: f(int64_t{}); break;
    case NXRT_DTYPE_UINT64: f(uint64_t{}); break;
    case NXRT_DTYPE_BOOL: f(bool{}); break;
    default: sdk::fail(NXRT_INVALID_ARGUMENT, "{}: dtype {} is not supported", op, sdk::dtype_name(t));
  }
}

inline constexpr nxrt_dtype kNumeric[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT8,  NXRT_DTYPE_UINT8,
                                          NXRT_DTYPE_INT16,   NXRT_DTYPE_UINT16,  NXRT_DTYPE_INT32, NXRT_DTYPE_UINT32,
                                          NXRT_DTYPE_INT64,   NXRT_DTYPE_UINT64};
inline constexpr nxrt_dtype kNumBool[] = {NXRT_DTYPE_FLOAT32, NXRT_DTYPE_FLOAT64, NXRT_DTYPE_INT8,   NXRT_DTYPE_UINT8,
                                          NXRT_DTYPE_INT16,   NXRT_DTYPE_UINT16,  NXRT_DTYPE_INT32,  NXRT_DTYPE_UINT32,
                                          NXRT_DTYPE_INT64,   NXRT_DTYPE_UINT64,  NXRT_DTYPE_BOOL};

// Reads a 1-D (or scalar) int32/int64 tensor as int64 values.
inline std::vector<int64_t> read_ints(const ConstTensorView& t, const char* op, const char* what) {
  std::vector<int64_t> v(size_t(t.numel()));
  if (t.dtype() == NXRT_DTYPE_INT64) {
    const int64_t* p = t.data<int64_t>();
    v.assign(p, p + t.numel());
  } else if (t.dtype() == NXRT_DTYPE_INT32) {
    const int32_t* p = t.data<int32_t>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else {
    sdk::fail(NXRT_INVALID_ARGUMENT, "{}: {} must be int32 or int64, got {}", op, what, sdk::dtype_name(t.dtype()));
  }
  return v;
}

// Refuses unless input i (when present) is int32 or int64 (or only int64 when int32 is false).
inline Check index_dtype(const Node& n, size_t i, const char* what, bool int32 = true) {
  auto v = n.input(i);
  if (!v.present()) return std::nullopt;
  if (v.dtype() == NXRT_DTYPE_INT64 || (int32 && v.dtype() == NXRT_DTYPE_INT32)) return std::nullopt;
  return sdk::refuse(NXRT_REFUSE_DTYPE, "{} input {} ({}) is {}, only {} is implemented", n.op_type(), i, what,
                     sdk::dtype_name(v.dtype()), int32 ? "int32/int64" : "int64");
}

// Refuses any attribute not in `known` (so a new attribute is never silently ignored).
inline Check known_attrs(const Node& n, std::initializer_list<const char*> known) {
  for (size_t i = 0; i < n.attribute_count(); ++i) {
    const std::string name(n.attribute_at(i).name());
    bool ok = false;
    for (auto k : known) ok = ok || name == k;
    if (!ok) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: attribute '{}' is not implemented", n.op_type(), name);
  }
  return std::nullopt;
}

// Calls f(U{}) with an unsigned type of the element size.
template <typename F>
void dispatch_size(size_t es, F&& f) {
  switch (es) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: sdk::fail(NXRT_INVALID_ARGUMENT, "element size {} is not supported", es);
  }
}

// Inputs [0, data_inputs) and every output are one fixed-size dtype.
inline Check data_types(const Node& n, size_t data_inputs) {
  if (auto r = sdk::require_dtypes(n, kAllFixed, 0, data_inputs)) return r;
  return same_dtype(n, data_inputs);
}
// The same, strings allowed: for kernels that copy elements as bytes (memcpy of rows).
inline Check movable_types(const Node& n, size_t data_inputs) {
  if (auto r = sdk::require_dtypes(n, kAllMovable, 0, data_inputs)) return r;
  return same_dtype(n, data_inputs);
}

// Refuses unless inputs [0, input_end) are all one dtype from `allowed`.
inline Check typed_same(const Node& n, std::span<const nxrt_dtype> allowed, size_t input_end = SIZE_MAX) {
  for (size_t i = 0; i < n.input_count() && i < input_end; ++i) {
    auto v = n.input(i);
    bool ok = false;
    for (auto t : allowed) ok = ok || t == v.dtype();
    if (v.present() && !ok) return sdk::refuse(NXRT_REFUSE_DTYPE, "{} input {} is {}", n.op_type(), i, sdk::dtype_name(v.dtype()));
  }
  return same_dtype(n, input_end);
}

// known_attrs for a list built at run time.
inline Check attrs_in(const Node& n, const std::vector<std::string>& known) {
  for (size_t i = 0; i < n.attribute_count(); ++i) {
    const std::string name(n.attribute_at(i).name());
    bool ok = false;
    for (auto& k : known) ok = ok || name == k;
    if (!ok) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "{}: attribute '{}' is not implemented", n.op_type(), name);
  }
  return std::nullopt;
}

// The broadcast shape of two same-dtype inputs; fails naming op otherwise.
inline std::vector<int64_t> out_shape2(const ConstTensorView& a, const ConstTensorView& b, std::string_view op) {
  std::vector<std::vector<int64_t>> shapes = {a.dims(), b.dims()};
  std::vector<int64_t> od;
  if (!broadcast_shapes(shapes, od))
    sdk::fail(NXRT_INVALID_ARGUMENT, "{}: shapes {} and {} do not broadcast", op, dims_str(a.dims()), dims_str(b.dims()));
  if (a.dtype() != b.dtype())
    sdk::fail(NXRT_INVALID_ARGUMENT, "{}: inputs are {} and {}", op, sdk::dtype_name(a.dtype()), sdk::dtype_name(b.dtype()));
  return od;
}

}  // namespace nxrt::cpu
