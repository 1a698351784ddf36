// On a GPU: the CUDA plugin through libnxrt against the CPU plugin, for each model given:
//   - plain runs (cuda.cuda_graph=0) and graph runs (cuda.cuda_graph=1: run 1 plain, run 2
//     captured, runs 3+ replayed; the last replay on new input data) match the CPU outputs;
//   - I/O binding: inputs in CUDA device tensors, outputs left on the device, match too,
//     and the plugin's copy counters show no host<->device transfer in the bound runs.
// Without a CUDA device it prints the plugin's reason and exits 77 (ctest SKIP).
// Usage: gpu_session_check CUDA_PLUGIN CPU_PLUGIN MODEL.onnx...
#include <nxrt/nxrt.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int failures = 0;

bool ok(nxrt_error* e, const std::string& what) {
  if (!e) return true;
  std::printf("FAIL %s: %s\n", what.c_str(), nxrt_error_message(e));
  nxrt_error_release(e);
  ++failures;
  return false;
}

struct Tensor {
  std::string name;
  int32_t dtype = 0;
  std::vector<int64_t> dims;
  std::vector<float> data;  // float32 models only
};

// Max |a-b| / (atol + rtol |b|) over the elements; <= 1 passes.
double error_ratio(const std::vector<float>& a, const std::vector<float>& b, double rtol, double atol) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - b[i]);
    if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
    worst = std::max(worst, d / (atol + rtol * std::fabs(double(b[i]))));
  }
  return worst;
}

std::vector<Tensor> outputs_of(nxrt_outputs* o) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < nxrt_outputs_count(o); ++i) {
    nxrt_host_tensor t = nxrt_outputs_get(o, i);
    Tensor r;
    r.name = t.name ? t.name : "";
    r.dtype = t.dtype;
    r.dims.assign(t.dims, t.dims + t.rank);
    size_t n = 1;
    for (auto d : r.dims) n *= size_t(d);
    if (t.data && t.dtype == 1) r.data.assign(static_cast<const float*>(t.data), static_cast<const float*>(t.data) + n);
    out.push_back(std::move(r));
  }
  nxrt_outputs_release(o);
  return out;
}

std::vector<nxrt_host_tensor> host_inputs(const std::vector<Tensor>& in) {
  std::vector<nxrt_host_tensor> ts(in.size());
  for (size_t i = 0; i < in.size(); ++i)
    ts[i] = {in[i].name.c_str(), in[i].dtype, uint32_t(in[i].dims.size()), in[i].dims.data(), in[i].data.data()};
  return ts;
}

nxrt_session* open(nxrt_env* env, nxrt_model* m, const char* eps, std::vector<nxrt_key_value> opts) {
  nxrt_session_options o{};
  o.eps = eps;
  o.ep_options = opts.data();
  o.ep_option_count = opts.size();
  nxrt_session* s = nullptr;
  if (!ok(nxrt_session_create(env, m, &o, &s), std::string("session ") + eps)) return nullptr;
  return s;
}

bool run(nxrt_session* s, const std::vector<Tensor>& in, std::vector<Tensor>* out, const std::string& what) {
  auto ts = host_inputs(in);
  nxrt_outputs* o = nullptr;
  if (!ok(nxrt_session_run(s, ts.data(), ts.size(), &o), what)) return false;
  *out = outputs_of(o);
  return true;
}

void compare(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const std::string& what, double rtol, double atol) {
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    const double r = error_ratio(got[i].data, want[i].data, rtol, atol);
    std::printf("  %-40s output %zu: error ratio %.3g %s\n", what.c_str(), i, r, r <= 1 ? "ok" : "FAIL");
    if (!(r <= 1)) ++failures;
  }
  if (got.size() != want.size()) {
    std::printf("FAIL %s: %zu outputs, want %zu\n", what.c_str(), got.size(), want.size());
    ++failures;
  }
}

void check_model(nxrt_env* env, const char* path) {
  std::printf("model %s\n", path);
  nxrt_model* m = nullptr;
  if (!ok(nxrt_model_load(path, &m), "load")) return;
  nxrt_session* cpu = open(env, m, "cpu", {});
  nxrt_session* plain = open(env, m, "cuda", {{"cuda.cuda_graph", "0"}});
  nxrt_session* graph = open(env, m, "cuda", {{"cuda.cuda_graph", "1"}});
  if (!cpu || !plain || !graph) return;
  std::vector<Tensor> a, b;
  for (size_t i = 0; i < nxrt_session_input_count(cpu); ++i) {
    nxrt_io_info info = nxrt_session_input(cpu, i);
    Tensor t;
    t.name = info.name;
    t.dtype = 1;
    for (uint32_t k = 0; k < info.rank; ++k) t.dims.push_back(info.dims[k] > 0 ? info.dims[k] : 1);
    size_t n = 1;
    for (auto d : t.dims) n *= size_t(d);
    t.data.resize(n);
    uint32_t s = 1234 + uint32_t(i);
    for (auto& v : t.data) v = float((s = s * 1664525u + 1013904223u) >> 8) / float(1 << 24) * 2.f - 1.f;
    a.push_back(t);
    for (auto& v : t.data) v = -0.5f * v + 0.25f;
    b.push_back(t);
  }
  std::vector<Tensor> ref_a, ref_b, got;
  if (!run(cpu, a, &ref_a, "cpu run") || !run(cpu, b, &ref_b, "cpu run b")) return;
  const double rtol = 1e-3, atol = 1e-3;
  if (run(plain, a, &got, "cuda run")) compare(got, ref_a, "cuda, graphs off", rtol, atol);
  for (int r = 1; r <= 4; ++r) {
    const bool last = r == 4;  // the last replay reads new input data
    if (run(graph, last ? b : a, &got, "cuda graph run"))
      compare(got, last ? ref_b : ref_a, "cuda graphs on, run " + std::to_string(r) + (last ? " (new data)" : ""), rtol, atol);
  }

  // I/O binding: device inputs, device outputs.
  nxrt_binding* bind = nullptr;
  std::vector<nxrt_device_tensor*> dts;
  if (ok(nxrt_binding_create(plain, &bind), "binding")) {
    for (auto& t : a) {
      nxrt_device_tensor* d = nullptr;
      if (!ok(nxrt_device_tensor_alloc(plain, "cuda", 1, t.dims.data(), t.dims.size(), &d), "device tensor")) continue;
      ok(nxrt_device_tensor_upload(d, t.data.data(), t.data.size() * 4), "upload");
      ok(nxrt_binding_bind_input(bind, t.name.c_str(), d), "bind input");
      dts.push_back(d);
    }
    for (auto& o : ref_a) ok(nxrt_binding_bind_output_to_device(bind, o.name.c_str(), "cuda"), "bind output");
    nxrt_memory_usage before{}, after{};
    for (int r = 0; r < 3; ++r) {
      if (r == 1) ok(nxrt_session_memory_usage(plain, 0, &before), "memory usage");
      nxrt_outputs* o = nullptr;
      ok(nxrt_session_run_binding(plain, bind, nullptr, nullptr, &o), "run binding");
      if (o) nxrt_outputs_release(o);
    }
    ok(nxrt_session_memory_usage(plain, 0, &after), "memory usage");
    std::vector<Tensor> out;
    for (auto& o : ref_a) {
      nxrt_device_tensor* d = nullptr;
      Tensor t = o;
      if (ok(nxrt_binding_output(bind, o.name.c_str(), &d), "binding output")) {
        ok(nxrt_device_tensor_download(d, t.data.data(), t.data.size() * 4), "download");
        nxrt_device_tensor_release(d);
      }
      out.push_back(t);
    }
    compare(out, ref_a, "cuda, I/O binding", rtol, atol);
    const uint64_t h2d = after.plugin.host_to_device_copies - before.plugin.host_to_device_copies;
    const uint64_t d2h = after.plugin.device_to_host_copies - before.plugin.device_to_host_copies;
    std::printf("  I/O binding, 2 runs: %llu host->device and %llu device->host copies; plugin peak %.1f MiB, reserved %.1f MiB %s\n",
                (unsigned long long)h2d, (unsigned long long)d2h, after.plugin.peak_bytes_in_use / 1048576.0,
                after.plugin.reserved_bytes / 1048576.0, h2d + d2h == 0 ? "ok" : "FAIL");
    if (h2d + d2h) ++failures;
    for (auto* d : dts) nxrt_device_tensor_release(d);
    nxrt_binding_release(bind);
  }
  nxrt_session_release(graph);
  nxrt_session_release(plain);
  nxrt_session_release(cpu);
  nxrt_model_release(m);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: gpu_session_check CUDA_PLUGIN CPU_PLUGIN MODEL.onnx...\n");
    return 2;
  }
  nxrt_env* env = nullptr;
  if (!ok(nxrt_env_create_empty(&env), "env")) return 1;
  const char* name = nullptr;
  if (!ok(nxrt_env_register_plugin(env, argv[1], &name), "register cuda") || !ok(nxrt_env_register_plugin(env, argv[2], &name), "register cpu"))
    return 1;
  nxrt_plugin_info info{};
  for (size_t i = 0; i < nxrt_env_plugin_count(env); ++i) {
    nxrt_plugin_info p{};
    if (ok(nxrt_env_plugin_info(env, i, &p), "plugin info") && p.name && std::strcmp(p.name, "cuda") == 0) info = p;
  }
  if (info.device_count == 0) {
    std::printf("SKIP: no CUDA device: %s\n", info.no_device_reason ? info.no_device_reason : "(no reason)");
    nxrt_env_release(env);
    return 77;
  }
  for (int i = 3; i < argc; ++i) check_model(env, argv[i]);
  nxrt_env_release(env);
  std::printf("%s (%d failures)\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
