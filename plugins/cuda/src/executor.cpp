#include "executor.hpp"

#include "launch.hpp"
#include "ops.hpp"

#include <nxrt_sdk/dtype.hpp>

#include <fmt/format.h>

namespace nxrt::cuda {

using sdk::fail;

namespace {

constexpr size_t kSmallConst = 1 << 16;

struct IrBuilder {
  IrGraph g;
  std::map<const nxrt_value*, int> ids;

  int value(sdk::Value v) {
    if (!v.present()) return -1;
    auto it = ids.find(v.raw());
    if (it != ids.end()) return it->second;
    IrValue iv;
    iv.name = std::string(v.name());
    iv.dtype = v.dtype();
    iv.rank = v.rank();
    auto d = v.dims();
    iv.dims.assign(d.begin(), d.end());
    iv.is_const = v.is_constant();
    if (iv.is_const) {
      nxrt_const_tensor t{};
      t.struct_size = sizeof t;
      nxrt_status* st = sdk::host().value_constant(v.raw(), &t);
      if (st) sdk::host().status_release(st);
      if (!st && t.memory != NXRT_MEMORY_DEVICE) {
        size_t n = sdk::dtype_size(t.dtype);
        for (uint32_t i = 0; i < t.rank; ++i) n *= size_t(t.dims[i]);
        if (n <= kSmallConst && (t.data || n == 0)) {
          iv.has_data = true;
          iv.data_dims.assign(t.dims, t.dims + t.rank);
          auto* p = static_cast<const uint8_t*>(t.data) + t.byte_offset;
          iv.data.assign(p, p + n);
        }
      }
    }
    int id = g.add_value(std::move(iv));
    ids[v.raw()] = id;
    return id;
  }

  void node(const sdk::Graph& graph, sdk::Node n) {
    IrNode in;
    in.op = std::string(n.op_type());
    std::string domain(n.domain());
    if (domain == "ai.onnx") domain.clear();
    if (!domain.empty()) in.op = domain + "::" + in.op;  // never matches an ONNX op: refused
    in.opset = graph.opset(domain.c_str());
    in.index = n.index();
    for (size_t i = 0; i < n.attribute_count(); ++i) {
      sdk::Attribute a = n.attribute_at(i);
      Attr at;
      at.type = a.type();
      switch (at.type) {
        case NXRT_ATTR_INT: at.i = a.i(); break;
        case NXRT_ATTR_FLOAT: at.f = a.f(); break;
        case NXRT_ATTR_STRING: at.s = a.s(); break;
        case NXRT_ATTR_INTS: at.ints = a.ints(); break;
        case NXRT_ATTR_FLOATS: at.floats = a.floats(); break;
        default: break;
      }
      in.attrs[std::string(a.name())] = std::move(at);
    }
    for (size_t i = 0; i < n.input_count(); ++i) in.in.push_back(value(n.input(i)));
    for (size_t i = 0; i < n.output_count(); ++i) in.out.push_back(value(n.output(i)));
    g.nodes.push_back(std::move(in));
  }
};

}  // namespace

IrGraph build_ir(const sdk::Graph& graph) {
  IrBuilder b;
  for (size_t i = 0; i < graph.input_count(); ++i) {
    int id = b.value(graph.input(i));
    b.g.inputs.push_back(id);
    if (id >= 0 && b.g.values[size_t(id)].group_input < 0) b.g.values[size_t(id)].group_input = int(i);
  }
  for (size_t i = 0; i < graph.node_count(); ++i) b.node(graph, graph.node(i));
  for (size_t i = 0; i < graph.output_count(); ++i) {
    int id = b.value(graph.output(i));
    b.g.outputs.push_back(id);
    if (id >= 0 && b.g.values[size_t(id)].group_output < 0) b.g.values[size_t(id)].group_output = int(i);
  }
  return std::move(b.g);
}

IrGraph build_node_ir(const sdk::Graph& graph, sdk::Node n) {
  IrBuilder b;
  b.node(graph, n);
  return std::move(b.g);
}

GroupKernel::GroupKernel(DeviceContext& dev, PreparedGroup p, RunRegistry& runs, KernelCode code)
    : dev_(dev), g_(std::move(p.g)), claim_(p.claim), source_(std::move(p.source)), code_(std::move(code.code)), runs_(runs) {
  // The model's op types in order (a chain's node stands where its last member was).
  for (const auto& n : g_.nodes)
    name_ += (name_.empty() ? "" : "+") + (n.chain >= 0 ? g_.chains[size_t(n.chain)].nodes.back().op : n.op);
  uses_ = device_uses(g_);
  if (!g_.chains.empty()) {
    if (code_.cubin.empty() && code_.ptx.empty()) sdk::fail(NXRT_INTERNAL, "a group with element-wise chains has no code");
    const void* image = code.use_ptx ? static_cast<const void*>(code_.ptx.c_str()) : static_cast<const void*>(code_.cubin.data());
    module_ = std::make_unique<CodeModule>(image, dev_.device(), g_.chains.size());
  }
}

void GroupKernel::export_blob(sdk::BlobWriter& w) {
  KernelBlob b;
  b.claim = claim_;
  b.source = source_digest(source_);
  b.code = code_;
  b.cublaslt = cublaslt_version_text();
  b.cudnn = cudnn_version_text();
  std::lock_guard lock(keys_mu_);
  for (const auto& key : gemm_keys_) {
    cublasLtMatmulHeuristicResult_t r{};
    if (!dev_.cached_algo(key, &r)) continue;
    const auto* p = reinterpret_cast<const uint8_t*>(&r);
    b.gemm.push_back({key, std::vector<uint8_t>(p, p + sizeof r)});
  }
#if NXRT_CUDA_HAVE_CUDNN
  for (const auto& key : conv_keys_) {
    cudnnConvolutionFwdAlgoPerf_t r{};
    if (!dev_.cached_conv_algo(key, &r)) continue;
    const auto* p = reinterpret_cast<const uint8_t*>(&r);
    b.conv.push_back({key, std::vector<uint8_t>(p, p + sizeof r)});
  }
#endif
  if (b.source == 0 && b.gemm.empty() && b.conv.empty())
    fail(NXRT_UNSUPPORTED, "this kernel has nothing to cache: no generated code and no algorithm chosen yet");
  write_kernel_blob(w, b);
}

void OfflineKernel::compute(sdk::Context&) {
  fail(NXRT_UNSUPPORTED, "a kernel compiled for a described CUDA device is exported, never run");
}

void OfflineKernel::export_blob(sdk::BlobWriter& w) {
  if (b_.source == 0)
    fail(NXRT_UNSUPPORTED, "this kernel has nothing to cache: it generates no code, and algorithms are chosen on a device");
  write_kernel_blob(w, b_);
}

GroupKernel::~GroupKernel() { drop_graph(); }

void GroupKernel::drop_graph() {
  if (graph_exec_) {
    cudaSetDevice(dev_.device());
    cudaGraphExecDestroy(graph_exec_);
    graph_exec_ = nullptr;
  }
  graph_key_.clear();
}

void GroupKernel::enqueue(LaunchEnv& env, std::vector<const void*>& addr, const std::vector<Shape>& shapes) {
  ScheduleHooks hooks;
  hooks.alloc = [&](uint64_t bytes) { return env.temp(bytes); };
  hooks.release = [&](void* p) { env.release(p); };
  hooks.launch = [&](const IrNode& n, const NodeIo& io) {
    if (n.chain >= 0) {
      int64_t count = 1;
      for (auto d : io.out_shapes[0]) count *= d;
      module_->launch(size_t(n.chain), io.in[0], io.out[0], count, env.stream);
      return;
    }
    launch_node(env, g_, n, io);
  };
  schedule_group(g_, uses_, shapes, addr, hooks);
}

void GroupKernel::compute(sdk::Context& ctx) {
  DeviceGuard guard(dev_.device());
  auto* s = sdk::stream_of<CudaStream>(ctx);
  const bool own = !s;
  cudaStream_t stream = s ? s->get() : dev_.internal_stream();

  std::vector<Shape> shapes(g_.values.size());
  std::vector<const void*> addr(g_.values.size(), nullptr);
  std::vector<uint64_t> key;
  for (size_t i = 0; i < g_.inputs.size(); ++i) {
    const int v = g_.inputs[i];
    auto t = ctx.optional_input(i);
    if (!t || v < 0) continue;
    if (t->dtype() != g_.value(v).dtype)
      fail(NXRT_INVALID_ARGUMENT, "input {} '{}' is {}, the graph says {}", i, g_.value(v).name, sdk::dtype_name(t->dtype()),
           sdk::dtype_name(g_.value(v).dtype));
    shapes[size_t(v)] = t->dims();
    if (uses_[size_t(v)] > 0 || g_.value(v).group_output >= 0)
      addr[size_t(v)] = dev_.address(t->memory(), t->handle(), t->byte_offset(), t->bytes(), "CUDA kernel input");
    key.push_back(uint64_t(uintptr_t(addr[size_t(v)])));
    for (auto d : t->dims()) key.push_back(uint64_t(d));
    key.push_back(UINT64_MAX);
  }
  // Every shape first (host only), so outputs are bound before any work is queued.
  for (const auto& n : g_.nodes) {
    if (n.fused_away) continue;
    std::vector<Shape> in;
    for (int v : n.in) in.push_back(v >= 0 ? shapes[size_t(v)] : Shape{});
    auto out = infer_shapes(g_, n, in);
    for (size_t j = 0; j < out.size() && j < n.out.size(); ++j)
      if (n.out[j] >= 0) shapes[size_t(n.out[j])] = std::move(out[j]);
  }
  for (size_t j = 0; j < g_.outputs.size(); ++j) {
    const int v = g_.outputs[j];
    if (v < 0) continue;  // an absent optional output of a single node
    const Shape& sh = shapes[size_t(v)];
    auto t = ctx.output(j, g_.value(v).dtype, std::span<const int64_t>(sh.data(), sh.size()));
    addr[size_t(v)] = dev_.address(t.memory(), t.handle(), t.byte_offset(), t.bytes(), "CUDA kernel output");
    key.push_back(uint64_t(uintptr_t(addr[size_t(v)])));
  }

  LaunchEnv env{dev_, stream};
  std::set<std::vector<int64_t>> gemm_keys, conv_keys;
  env.gemm_keys = &gemm_keys;
  env.conv_keys = &conv_keys;
  // Profiled runs (on_run_start said so) time the group's work with two events.
  GroupTiming timing;
  const bool profile = runs_.profiled(ctx.run_id());
  if (profile) {
    timing.node_index = g_.nodes.empty() ? 0 : g_.nodes[0].index;
    timing.name = name_;
    cuda_check(cudaEventCreate(&timing.start), "cudaEventCreate");
    cuda_check(cudaEventCreate(&timing.end), "cudaEventCreate");
    cuda_check(cudaEventRecord(timing.start, stream), "cudaEventRecord");
  }
  const bool graphs = runs_.graphs(ctx.run_id(), dev_.options().cuda_graph) && !graph_unusable_ && !dev_.external_allocator();
  bool ran = false;
  // A key runs plainly once before it is captured: lazy module loading, library handles
  // and cuDNN's algorithm choice happen outside the capture.
  const bool seen_plain = key == plain_key_;
  if (graphs && graph_exec_ && key == graph_key_) {
    cuda_check(cudaGraphLaunch(graph_exec_, stream), "cudaGraphLaunch");
    ran = true;
  } else if (graphs && seen_plain && cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
    drop_graph();
    env.capturing = true;
    cudaGraph_t graph = nullptr;
    try {
      enqueue(env, addr, shapes);
    } catch (...) {
      cudaStreamEndCapture(stream, &graph);
      if (graph) cudaGraphDestroy(graph);
      cudaGetLastError();
      throw;
    }
    cudaError_t e = cudaStreamEndCapture(stream, &graph);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&graph_exec_, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (e == cudaSuccess) {
      graph_key_ = key;
      cuda_check(cudaGraphLaunch(graph_exec_, stream), "cudaGraphLaunch");
      ran = true;
    } else {  // not capturable (a library call that synchronizes...): run plainly from now on
      cudaGetLastError();
      graph_exec_ = nullptr;
      plain_key_.clear();
      graph_unusable_ = true;
      sdk::host().log(NXRT_LOG_WARNING, "cuda",
                      fmt::format("CUDA graph capture failed ({}); this group runs without graphs", cudaGetErrorString(e)).c_str());
      env.capturing = false;
    }
  } else {
    cudaGetLastError();  // a refused BeginCapture leaves an error behind
  }
  if (!ran) {
    enqueue(env, addr, shapes);
    if (graphs) plain_key_ = std::move(key);
  }
  if (!gemm_keys.empty() || !conv_keys.empty()) {
    std::lock_guard lock(keys_mu_);
    gemm_keys_.insert(gemm_keys.begin(), gemm_keys.end());
    conv_keys_.insert(conv_keys.begin(), conv_keys.end());
  }
  if (profile) {
    cuda_check(cudaEventRecord(timing.end, stream), "cudaEventRecord");
    runs_.add(ctx.run_id(), timing);
  }
  if (own || env.deferred) {
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    dev_.release_deferred();
  }
}

}  // namespace nxrt::cuda
