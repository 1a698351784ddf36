#include "launch.hpp"

#include "ops.hpp"

#include <nxrt_sdk/dtype.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace nxrt::cuda {

using math::Strides;
using math::Unary;
using sdk::fail;

namespace {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

k::Float float_of(nxrt_dtype t) { return t == NXRT_DTYPE_FLOAT16 ? k::Float::F16 : k::Float::F32; }

Strides dense(const Shape& s) { return math::dense(s.data(), int(s.size())); }
Strides broadcast(const Shape& in, const Shape& out) {
  return math::broadcast_strides(in.data(), int(in.size()), out.data(), int(out.size()));
}

void check_launch(cudaError_t e, const IrNode& n) {
  if (e != cudaSuccess) cuda_check(e, fmt::format("kernel for {} (node {})", n.op, n.index).c_str());
}

void lt_check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) fail(NXRT_INTERNAL, "cuBLASLt {} failed with status {}", what, int(st));
}

// Owns the descriptors of one cuBLASLt call.
struct LtCall {
  const CublasLt* lt;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t x = nullptr, y = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtCall() {
    if (pref) lt->cublasLtMatmulPreferenceDestroy(pref);
    if (d) lt->cublasLtMatrixLayoutDestroy(d);
    if (y) lt->cublasLtMatrixLayoutDestroy(y);
    if (x) lt->cublasLtMatrixLayoutDestroy(x);
    if (op) lt->cublasLtMatmulDescDestroy(op);
  }
};

constexpr uint64_t kGemmWorkspace = 32ull << 20;

}  // namespace

void gemm(LaunchEnv& env, const GemmDesc& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  std::string why;
  cublasLtHandle_t h = env.dev.cublas(&why);
  if (!h) fail(NXRT_UNSUPPORTED, "MatMul/Gemm need cuBLASLt: {}", why);
  const CublasLt* lt = CublasLt::get(nullptr);
  if (g.k == 0) {  // an empty sum: zeros (then the epilogue)
    cuda_check(cudaMemsetAsync(g.c, 0, size_t(g.batch * g.m * g.n) * (g.t == k::Float::F16 ? 2 : 4), env.stream), "cudaMemsetAsync");
    return;
  }
  const cudaDataType_t dt = g.t == k::Float::F16 ? CUDA_R_16F : CUDA_R_32F;
  const cublasComputeType_t ct =
      g.t == k::Float::F32 && env.dev.options().allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  LtCall c{lt};
  lt_check(lt->cublasLtMatmulDescCreate(&c.op, ct, CUDA_R_32F), "MatmulDescCreate");
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's "A" is
  // our B and its "B" our A, and D is n x m with leading dimension n.
  const cublasOperation_t opx = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, opy = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  lt_check(lt->cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSA, &opx, sizeof opx), "TRANSA");
  lt_check(lt->cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_TRANSB, &opy, sizeof opy), "TRANSB");
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (g.bias) epi = g.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  else if (g.relu) epi = CUBLASLT_EPILOGUE_RELU;
  lt_check(lt->cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "EPILOGUE");
  if (g.bias)
    lt_check(lt->cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof g.bias), "BIAS_POINTER");
  if (g.tb) lt_check(lt->cublasLtMatrixLayoutCreate(&c.x, dt, uint64_t(g.k), uint64_t(g.n), g.k), "layout B");
  else lt_check(lt->cublasLtMatrixLayoutCreate(&c.x, dt, uint64_t(g.n), uint64_t(g.k), g.n), "layout B");
  if (g.ta) lt_check(lt->cublasLtMatrixLayoutCreate(&c.y, dt, uint64_t(g.m), uint64_t(g.k), g.m), "layout A");
  else lt_check(lt->cublasLtMatrixLayoutCreate(&c.y, dt, uint64_t(g.k), uint64_t(g.m), g.k), "layout A");
  lt_check(lt->cublasLtMatrixLayoutCreate(&c.d, dt, uint64_t(g.n), uint64_t(g.m), g.n), "layout C");
  if (g.batch > 1) {
    const int32_t count = int32_t(g.batch);
    auto batched = [&](cublasLtMatrixLayout_t l, int64_t stride) {
      lt_check(lt->cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), "BATCH_COUNT");
      lt_check(lt->cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
               "STRIDED_BATCH_OFFSET");
    };
    batched(c.x, g.stride_b);
    batched(c.y, g.stride_a);
    batched(c.d, g.stride_c);
  }
  lt_check(lt->cublasLtMatmulPreferenceCreate(&c.pref), "PreferenceCreate");
  const uint64_t ws_max = kGemmWorkspace;
  lt_check(lt->cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_max, sizeof ws_max),
           "MAX_WORKSPACE_BYTES");
  cublasLtMatmulHeuristicResult_t res{};
  // Pointers matter to the heuristic only through their alignment (all 256 here but C's
  // offsets inside a batch): keyed by everything else.
  const std::vector<int64_t> key = {int64_t(g.t), g.ta, g.tb, g.m, g.n, g.k, g.batch, g.stride_a, g.stride_b, g.stride_c,
                                    g.bias != nullptr, g.relu, int64_t(ct), int64_t(uintptr_t(g.a) % 256),
                                    int64_t(uintptr_t(g.b) % 256), int64_t(uintptr_t(g.c) % 256),
                                    int64_t(uintptr_t(g.bias) % 256)};
  if (env.gemm_keys) env.gemm_keys->insert(key);
  if (!env.dev.cached_algo(key, &res)) {
    int found = 0;
    lt_check(lt->cublasLtMatmulAlgoGetHeuristic(h, c.op, c.x, c.y, c.d, c.d, c.pref, 1, &res, &found), "AlgoGetHeuristic");
    if (found == 0) fail(NXRT_UNSUPPORTED, "cuBLASLt has no algorithm for a {}x{}x{} GEMM (batch {})", g.m, g.n, g.k, g.batch);
    env.dev.cache_algo(key, res);
  }
  void* ws = res.workspaceSize ? env.temp(res.workspaceSize) : nullptr;
  const float alpha = g.alpha, beta = 0.f;
  cublasStatus_t st = lt->cublasLtMatmul(h, c.op, &alpha, g.b, c.x, g.a, c.y, &beta, g.c, c.d, g.c, c.d, &res.algo, ws,
                                         res.workspaceSize, env.stream);
  if (ws) env.release(ws);
  lt_check(st, "Matmul");
}

namespace {

void launch_matmul(LaunchEnv& env, const IrGraph& g, const IrNode& n, const NodeIo& io) {
  const MatmulPlan p = matmul_plan(io.in_shapes[0], io.in_shapes[1]);
  const size_t es = sdk::dtype_size(g.value(n.out[0]).dtype);
  GemmDesc d;
  d.t = float_of(g.value(n.out[0]).dtype);
  d.m = p.m, d.n = p.n, d.k = p.k;
  d.relu = n.epilogue.op == Unary::Relu;
  if (p.strided) {
    d.a = io.in[0], d.b = io.in[1], d.c = io.out[0];
    d.batch = p.batch, d.stride_a = p.stride_a, d.stride_b = p.stride_b, d.stride_c = p.stride_c;
    gemm(env, d);
  } else {
    for (int64_t i = 0; i < p.batch; ++i) {
      d.a = static_cast<const char*>(io.in[0]) + size_t(p.offsets[size_t(i)].first) * es;
      d.b = static_cast<const char*>(io.in[1]) + size_t(p.offsets[size_t(i)].second) * es;
      d.c = static_cast<char*>(io.out[0]) + size_t(i * p.stride_c) * es;
      gemm(env, d);
    }
  }
  if (n.epilogue.op != Unary::Identity && !d.relu)
    check_launch(k::epilogue(d.t, io.out[0], numel(io.out_shapes[0]), nullptr, Strides{}, 0.f, n.epilogue.op, n.epilogue.alpha,
                             n.epilogue.beta, env.stream), n);
}

void launch_gemm(LaunchEnv& env, const IrGraph& g, const IrNode& n, const NodeIo& io) {
  const Shape &a = io.in_shapes[0], &y = io.out_shapes[0];
  GemmDesc d;
  d.t = float_of(g.value(n.out[0]).dtype);
  d.ta = n.attr_int("transA", 0) != 0;
  d.tb = n.attr_int("transB", 0) != 0;
  d.m = y[0], d.n = y[1], d.k = d.ta ? a[0] : a[1];
  d.a = io.in[0], d.b = io.in[1], d.c = io.out[0];
  d.alpha = n.attr_float("alpha", 1.f);
  const float beta = n.attr_float("beta", 1.f);
  const bool has_c = n.has_input(2) && beta != 0.f;
  const Shape c = has_c ? io.in_shapes[2] : Shape{};
  // cuBLASLt's epilogue takes a bias per column with beta 1 and Relu; anything else runs
  // in the plugin's epilogue kernel after the GEMM.
  const bool c_is_row = has_c && beta == 1.f && numel(c) == d.n && (c.size() == 1 || (c.size() == 2 && c[0] == 1));
  const bool lt_act = n.epilogue.op == Unary::Identity || n.epilogue.op == Unary::Relu;
  if (c_is_row && lt_act) {
    d.bias = io.in[2];
    d.relu = n.epilogue.op == Unary::Relu;
    gemm(env, d);
    return;
  }
  if (!has_c && n.epilogue.op == Unary::Relu) {
    d.relu = true;
    gemm(env, d);
    return;
  }
  gemm(env, d);
  check_launch(k::epilogue(d.t, io.out[0], numel(y), has_c ? io.in[2] : nullptr, has_c ? broadcast(c, y) : Strides{}, beta,
                           n.epilogue.op, n.epilogue.alpha, n.epilogue.beta, env.stream), n);
}

#if NXRT_CUDA_HAVE_CUDNN
// cuDNN convolution without bias; false when cuDNN is unavailable or cannot take it.
bool conv_cudnn(LaunchEnv& env, const math::Conv2d& c, k::Float t, const void* x, const void* w, void* y) {
  if (!env.dev.options().use_cudnn || c.ph != c.peh || c.pw != c.pew) return false;
  std::string why;
  cudnnHandle_t h = env.dev.cudnn(&why);
  if (!h) return false;
  const Cudnn* d = Cudnn::get(nullptr);
  std::lock_guard lock(env.dev.cudnn_mutex());
  auto ck = [&](cudnnStatus_t st, const char* what) {
    if (st != CUDNN_STATUS_SUCCESS) fail(NXRT_INTERNAL, "cuDNN {}: {}", what, d->cudnnGetErrorString(st));
  };
  struct Descs {
    const Cudnn* d;
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    ~Descs() {
      if (x) d->cudnnDestroyTensorDescriptor(x);
      if (y) d->cudnnDestroyTensorDescriptor(y);
      if (w) d->cudnnDestroyFilterDescriptor(w);
      if (conv) d->cudnnDestroyConvolutionDescriptor(conv);
    }
  } ds{d};
  const cudnnDataType_t dt = t == k::Float::F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
  ck(d->cudnnSetStream(h, env.stream), "SetStream");
  ck(d->cudnnCreateTensorDescriptor(&ds.x), "CreateTensorDescriptor");
  ck(d->cudnnCreateTensorDescriptor(&ds.y), "CreateTensorDescriptor");
  ck(d->cudnnCreateFilterDescriptor(&ds.w), "CreateFilterDescriptor");
  ck(d->cudnnCreateConvolutionDescriptor(&ds.conv), "CreateConvolutionDescriptor");
  ck(d->cudnnSetTensor4dDescriptor(ds.x, CUDNN_TENSOR_NCHW, dt, int(c.n), int(c.c), int(c.h), int(c.w)), "SetTensor4dDescriptor x");
  ck(d->cudnnSetTensor4dDescriptor(ds.y, CUDNN_TENSOR_NCHW, dt, int(c.n), int(c.k), int(c.oh), int(c.ow)), "SetTensor4dDescriptor y");
  ck(d->cudnnSetFilter4dDescriptor(ds.w, dt, CUDNN_TENSOR_NCHW, int(c.k), int(c.c / c.group), int(c.kh), int(c.kw)),
     "SetFilter4dDescriptor");
  ck(d->cudnnSetConvolution2dDescriptor(ds.conv, int(c.ph), int(c.pw), int(c.sh), int(c.sw), int(c.dh), int(c.dw),
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
     "SetConvolution2dDescriptor");
  ck(d->cudnnSetConvolutionGroupCount(ds.conv, int(c.group)), "SetConvolutionGroupCount");
  const cudnnMathType_t math_type =
      t == k::Float::F16 || env.dev.options().allow_tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  ck(d->cudnnSetConvolutionMathType(ds.conv, math_type), "SetConvolutionMathType");
  const std::vector<int64_t> key = {int64_t(t), c.n, c.c, c.h, c.w, c.k, c.kh, c.kw, c.sh, c.sw, c.ph, c.pw, c.dh, c.dw, c.group,
                                    int64_t(math_type)};
  cudnnConvolutionFwdAlgoPerf_t chosen{};
  if (env.conv_keys) env.conv_keys->insert(key);
  if (!env.dev.cached_conv_algo(key, &chosen)) {
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int returned = 0;
    ck(d->cudnnGetConvolutionForwardAlgorithm_v7(h, ds.x, ds.w, ds.conv, ds.y, 8, &returned, perf),
       "GetConvolutionForwardAlgorithm_v7");
    bool found = false;
    for (int i = 0; i < returned && !found; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= (256ull << 20)) chosen = perf[i], found = true;
    if (!found) return false;
    env.dev.cache_conv_algo(key, chosen);
  }
  const cudnnConvolutionFwdAlgoPerf_t* pick = &chosen;
  void* ws = pick->memory ? env.temp(pick->memory) : nullptr;
  const float one = 1.f, zero = 0.f;
  cudnnStatus_t st = d->cudnnConvolutionForward(h, &one, ds.x, x, ds.w, w, ds.conv, pick->algo, ws, pick->memory, &zero, ds.y, y);
  if (ws) env.release(ws);
  ck(st, "ConvolutionForward");
  return true;
}
#endif

void launch_conv(LaunchEnv& env, const IrGraph& g, const IrNode& n, const NodeIo& io) {
  const Shape &x = io.in_shapes[0], &w = io.in_shapes[1], &y = io.out_shapes[0];
  const k::Float t = float_of(g.value(n.out[0]).dtype);
  const math::Conv2d c = conv_geometry(n, x, y, w[2], w[3]);
  const void* bias = n.has_input(2) ? io.in[2] : nullptr;
  const Epilogue& e = n.epilogue;
  bool done = false;
#if NXRT_CUDA_HAVE_CUDNN
  done = conv_cudnn(env, c, t, io.in[0], io.in[1], io.out[0]);
#endif
  if (!done && c.group > 1) {  // grouped/depthwise: direct kernel with bias and activation
    check_launch(k::conv_direct(t, io.in[0], io.in[1], bias, io.out[0], c, e.op, e.alpha, e.beta, env.stream), n);
    return;
  }
  if (!done) {  // implicit GEMM: im2col per image (skipped for pointwise convs), then cuBLASLt
    const size_t es = t == k::Float::F16 ? 2 : 4;
    const int64_t ckk = c.c * c.kh * c.kw, cols = c.oh * c.ow;
    const bool pointwise = c.kh == 1 && c.kw == 1 && c.sh == 1 && c.sw == 1 && c.ph == 0 && c.pw == 0 && c.peh == 0 && c.pew == 0;
    GemmDesc d;
    d.t = t;
    d.m = c.k, d.n = cols, d.k = ckk;
    d.a = io.in[1];
    if (pointwise) {
      d.b = io.in[0], d.c = io.out[0];
      d.batch = c.n, d.stride_a = 0, d.stride_b = c.c * c.h * c.w, d.stride_c = c.k * cols;
      gemm(env, d);
    } else {
      void* col = env.temp(uint64_t(ckk * cols) * es);
      for (int64_t img = 0; img < c.n; ++img) {
        check_launch(k::im2col(t, io.in[0], col, c, img, 0, env.stream), n);
        d.b = col;
        d.c = static_cast<char*>(io.out[0]) + size_t(img * c.k * cols) * es;
        gemm(env, d);
      }
      env.release(col);
    }
  }
  // Bias per output channel and the activation, over [n, k, oh*ow].
  Strides sb;
  sb.rank = 3;
  sb.dims[0] = c.n, sb.dims[1] = c.k, sb.dims[2] = c.oh * c.ow;
  sb.strides[0] = 0, sb.strides[1] = 1, sb.strides[2] = 0;
  check_launch(k::epilogue(t, io.out[0], numel(y), bias, sb, 1.f, e.op, e.alpha, e.beta, env.stream), n);
}

void copy_bytes(LaunchEnv& env, const void* src, void* dst, size_t bytes) {
  if (src == dst || bytes == 0) return;
  cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, env.stream), "cudaMemcpyAsync");
}

void launch_reduce(LaunchEnv& env, const IrGraph& g, const IrNode& n, const NodeIo& io, math::Reduce op) {
  const Shape& x = io.in_shapes[0];
  const k::Float t = float_of(g.value(n.out[0]).dtype);
  bool noop = false;
  std::vector<int64_t> axes;
  if (n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool") {
    for (size_t i = 2; i < x.size(); ++i) axes.push_back(int64_t(i));
  } else {
    axes = reduce_axes(g, n, int64_t(x.size()), &noop);
  }
  if (noop) {
    copy_bytes(env, io.in[0], io.out[0], size_t(numel(x)) * sdk::dtype_size(g.value(n.out[0]).dtype));
    return;
  }
  const ReduceView rv = reduce_view(x, axes);
  check_launch(k::reduce(t, io.in[0], rv.outer, rv.inner, io.out[0], numel(io.out_shapes[0]), rv.n_inner, op, env.stream), n);
}

const std::map<std::string, math::Reduce>& reduce_map() {
  static const std::map<std::string, math::Reduce> m = {
      {"ReduceSum", math::Reduce::Sum},      {"ReduceMean", math::Reduce::Mean},
      {"ReduceMax", math::Reduce::Max},      {"ReduceMin", math::Reduce::Min},
      {"ReduceProd", math::Reduce::Prod},    {"ReduceSumSquare", math::Reduce::SumSquare},
      {"ReduceL1", math::Reduce::L1},        {"ReduceL2", math::Reduce::L2},
      {"ReduceLogSumExp", math::Reduce::LogSumExp}, {"GlobalAveragePool", math::Reduce::Mean},
      {"GlobalMaxPool", math::Reduce::Max}};
  return m;
}

const std::map<std::string, math::Binary>& binary_map() {
  static const std::map<std::string, math::Binary> m = {{"Add", math::Binary::Add}, {"Sub", math::Binary::Sub},
                                                        {"Mul", math::Binary::Mul}, {"Div", math::Binary::Div},
                                                        {"Pow", math::Binary::Pow}, {"Max", math::Binary::Max},
                                                        {"Min", math::Binary::Min}};
  return m;
}

const std::map<std::string, Unary>& unary_map() {
  static const std::map<std::string, Unary> m = {
      {"Relu", Unary::Relu}, {"Sigmoid", Unary::Sigmoid}, {"Tanh", Unary::Tanh}, {"Exp", Unary::Exp},
      {"Log", Unary::Log},   {"Sqrt", Unary::Sqrt},       {"Neg", Unary::Neg},   {"Abs", Unary::Abs},
      {"Erf", Unary::Erf},   {"Clip", Unary::Clip},       {"LeakyRelu", Unary::LeakyRelu},
      {"HardSwish", Unary::HardSwish}, {"Gelu", Unary::Gelu}, {"Reciprocal", Unary::Reciprocal}};
  return m;
}

}  // namespace

void launch_node(LaunchEnv& env, const IrGraph& g, const IrNode& n, const NodeIo& io) {
  const std::string& op = n.op;
  const nxrt_dtype dt = g.value(n.out[0]).dtype;
  const size_t es = sdk::dtype_size(dt);
  const Shape& y = io.out_shapes[0];
  const int64_t count = numel(y);
  const k::Float t = float_of(dt);
  const Epilogue& e = n.epilogue;

  if (auto it = unary_map().find(op); it != unary_map().end()) {
    float a = 0.f, b = 0.f;
    if (op == "Clip" || op == "LeakyRelu") {
      auto act = activation_of(g, n);
      a = act->alpha, b = act->beta;
    }
    check_launch(k::unary(t, io.in[0], io.out[0], count, it->second, a, b, env.stream), n);
    return;
  }
  if (auto it = binary_map().find(op); it != binary_map().end()) {
    check_launch(k::binary(t, io.in[0], broadcast(io.in_shapes[0], y), io.in[1], broadcast(io.in_shapes[1], y), io.out[0], count,
                           it->second, e.op, e.alpha, e.beta, env.stream), n);
    return;
  }
  if (op == "Identity" || op == "Dropout" || op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
    copy_bytes(env, io.in[0], io.out[0], size_t(count) * es);
    return;
  }
  if (op == "Cast") {
    const nxrt_dtype from = g.value(n.in[0]).dtype;
    if (from == dt) copy_bytes(env, io.in[0], io.out[0], size_t(count) * es);
    else check_launch(k::cast(float_of(from), io.in[0], t, io.out[0], count, env.stream), n);
    return;
  }
  if (op == "Expand") {
    check_launch(k::strided_copy(int(es), io.in[0], broadcast(io.in_shapes[0], y), 0, io.out[0], dense(y), 0, count, env.stream), n);
    return;
  }
  if (op == "Transpose") {
    const Shape& x = io.in_shapes[0];
    auto perm = n.attr_ints("perm").value_or(std::vector<int64_t>{});
    if (perm.empty())
      for (size_t i = 0; i < x.size(); ++i) perm.push_back(int64_t(x.size() - 1 - i));
    check_launch(k::strided_copy(int(es), io.in[0], math::transpose_view(x.data(), int(x.size()), perm.data()), 0, io.out[0],
                                 dense(y), 0, count, env.stream), n);
    return;
  }
  if (op == "Slice") {
    const CopyView v = slice_view(io.in_shapes[0], slice_params(g, n, io.in_shapes[0]));
    check_launch(k::strided_copy(int(es), io.in[0], v.src, v.src_base, io.out[0], v.dst, v.dst_base, v.count, env.stream), n);
    return;
  }
  if (op == "Concat") {
    const int64_t axis = normalize_axis(n.attr_int("axis", 0), int64_t(y.size()), "Concat");
    std::vector<bool> present;
    for (auto* p : io.in) present.push_back(p != nullptr);
    auto views = concat_views(io.in_shapes, present, axis, y);
    size_t next = 0;
    for (size_t i = 0; i < io.in.size(); ++i) {
      if (!present[i]) continue;
      const CopyView& v = views[next++];
      check_launch(k::strided_copy(int(es), io.in[i], v.src, v.src_base, io.out[0], v.dst, v.dst_base, v.count, env.stream), n);
    }
    return;
  }
  if (op == "Gather") {
    const Shape& x = io.in_shapes[0];
    const int64_t axis = normalize_axis(n.attr_int("axis", 0), int64_t(x.size()), "Gather");
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= x[size_t(i)];
    for (size_t i = size_t(axis) + 1; i < x.size(); ++i) inner *= x[i];
    check_launch(k::gather(int(es), io.in[0], io.in[1], g.value(n.in[1]).dtype == NXRT_DTYPE_INT64, outer, x[size_t(axis)], inner,
                           numel(io.in_shapes[1]), io.out[0], env.stream), n);
    return;
  }
  if (op == "MatMul") return launch_matmul(env, g, n, io);
  if (op == "Gemm") return launch_gemm(env, g, n, io);
  if (op == "Conv") return launch_conv(env, g, n, io);
  if (op == "MaxPool" || op == "AveragePool") {
    auto ks = *n.attr_ints("kernel_shape");
    const math::Conv2d c = conv_geometry(n, io.in_shapes[0], y, ks[0], ks[1]);
    check_launch(k::pool(t, io.in[0], io.out[0], c, op == "MaxPool", n.attr_int("count_include_pad", 0) != 0, env.stream), n);
    return;
  }
  if (auto it = reduce_map().find(op); it != reduce_map().end()) return launch_reduce(env, g, n, io, it->second);
  if (op == "BatchNormalization") {
    const Shape& x = io.in_shapes[0];
    int64_t spatial = 1;
    for (size_t i = 2; i < x.size(); ++i) spatial *= x[i];
    check_launch(k::batchnorm(t, io.in[0], io.in[1], io.in[2], io.in[3], io.in[4], io.out[0], x[0], x[1], spatial,
                              n.attr_float("epsilon", 1e-5f), e.op, e.alpha, e.beta, env.stream), n);
    return;
  }
  if (op == "Softmax" || op == "LogSoftmax") {
    const Shape& x = io.in_shapes[0];
    int64_t axis = n.opset >= 13 ? int64_t(x.size()) - 1 : normalize_axis(n.attr_int("axis", 1), int64_t(x.size()), op.c_str());
    int64_t cols = 1;
    for (size_t i = size_t(axis); i < x.size(); ++i) cols *= x[i];
    const int64_t rows = cols ? count / cols : 0;
    check_launch(k::softmax(t, io.in[0], io.out[0], rows, cols, op == "LogSoftmax", env.stream), n);
    return;
  }
  if (op == "LayerNormalization") {
    const Shape& x = io.in_shapes[0];
    const int64_t axis = normalize_axis(n.attr_int("axis", -1), int64_t(x.size()), "LayerNormalization");
    int64_t cols = 1;
    for (size_t i = size_t(axis); i < x.size(); ++i) cols *= x[i];
    check_launch(k::layernorm(t, io.in[0], io.in[1], n.has_input(2) ? io.in[2] : nullptr, io.out[0], cols ? count / cols : 0, cols,
                              n.attr_float("epsilon", 1e-5f), env.stream), n);
    return;
  }
  fail(NXRT_UNSUPPORTED, "no CUDA launch for {}", op);
}

}  // namespace nxrt::cuda
