#include <cmath>
#include <cstring>
#include <atomic>
#include <set>

#include "checks.hpp"

namespace conf {

Env::~Env() {
  s.reset();
  if (p) p->shutdown();
}

std::string missing_required(const Plugin& p) {
  const nxrt_plugin_api& a = p.api();
  std::string m;
  auto need = [&](const char* name, const void* fn) {
    if (!fn) m += (m.empty() ? "" : ", ") + std::string(name);
  };
  need("shutdown", reinterpret_cast<const void*>(a.shutdown));
  need("device_count", reinterpret_cast<const void*>(a.device_count));
  need("no_device_reason", reinterpret_cast<const void*>(a.no_device_reason));
  need("device_info", reinterpret_cast<const void*>(a.device_info));
  need("option_count", reinterpret_cast<const void*>(a.option_count));
  need("option_info", reinterpret_cast<const void*>(a.option_info));
  need("session_create", reinterpret_cast<const void*>(a.session_create));
  need("session_release", reinterpret_cast<const void*>(a.session_release));
  need("get_capability", reinterpret_cast<const void*>(a.get_capability));
  need("kernel_create", reinterpret_cast<const void*>(a.kernel_create));
  need("kernel_compute", reinterpret_cast<const void*>(a.kernel_compute));
  need("kernel_release", reinterpret_cast<const void*>(a.kernel_release));
  need("memory_alloc", reinterpret_cast<const void*>(a.memory_alloc));
  need("memory_free", reinterpret_cast<const void*>(a.memory_free));
  need("copy", reinterpret_cast<const void*>(a.copy));
  return m;
}

std::optional<Record> Env::load() {
  std::string err, stage;
  p = Plugin::open(cfg.plugin, &err, &stage);
  if (!p) return skip("not run: the plugin does not load (" + err + ")");
  std::string why = p->negotiate(minor);
  if (!why.empty()) return skip("not run: negotiation failed (" + why + ")");
  std::string miss = missing_required(*p);
  if (!miss.empty()) return skip("not run: the function table lacks required functions: " + miss);
  return std::nullopt;
}

std::optional<Record> Env::device() {
  if (!p || !p->negotiated())  // a check may have loaded (and inspected) the plugin already
    if (auto r = load()) return r;
  Result st = take(p->api().device_count(p->instance(), &devices));
  if (!st.ok) return skip("not run: device_count failed (" + st.str() + ")");
  if (devices == 0) {
    const char* why = p->api().no_device_reason(p->instance());
    return skip(std::string("no device: ") + (why && *why ? why : "(no reason given)"));
  }
  if (cfg.device >= devices)
    return skip("no device: --device " + std::to_string(cfg.device) + " but the plugin has " + std::to_string(devices));
  info = nxrt_device_info{};
  info.struct_size = sizeof info;
  st = take(p->api().device_info(p->instance(), cfg.device, &info));
  if (!st.ok) return skip("not run: device_info failed (" + st.str() + ")");
  return std::nullopt;
}

std::optional<Record> Env::session() {
  if (auto r = device()) return r;
  s = std::make_unique<Session>(*p, cfg.device);
  s->set_host_addressable(info.host_addressable != 0);
  Result st = s->create();
  if (!st.ok) {
    s.reset();
    return skip("not run: session_create failed (" + st.str() + "), see session.create");
  }
  return std::nullopt;
}

HostTensor make_f32(const std::vector<int64_t>& dims, uint32_t seed) {
  HostTensor t;
  t.dtype = NXRT_DTYPE_FLOAT32;
  t.dims = dims;
  size_t n = size_t(numel(dims));
  t.bytes.resize(n * 4);
  uint32_t x = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    float v = float(int((x >> 8) % 2001) - 1000) / 128.0f;
    std::memcpy(&t.bytes[i * 4], &v, 4);
  }
  return t;
}

namespace {
float h2f(uint16_t h) {
  uint32_t s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
  float v;
  if (e == 0) v = std::ldexp(float(m), -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = std::ldexp(float(m | 1024), int(e) - 25);
  return s ? -v : v;
}
float bf2f(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
template <typename T>
T at(const HostTensor& t, size_t i) {
  T v;
  std::memcpy(&v, t.bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}
double as_double(const HostTensor& t, size_t i) {
  switch (t.dtype) {
    case NXRT_DTYPE_FLOAT32: return at<float>(t, i);
    case NXRT_DTYPE_FLOAT64: return at<double>(t, i);
    case NXRT_DTYPE_FLOAT16: return h2f(at<uint16_t>(t, i));
    case NXRT_DTYPE_BFLOAT16: return bf2f(at<uint16_t>(t, i));
    default: return 0;
  }
}
std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}
}  // namespace

std::string compare(const HostTensor& got, const HostTensor& exp, double rtol, double atol) {
  if (got.dtype != exp.dtype)
    return std::string("dtype ") + dtype_name(got.dtype) + ", expected " + dtype_name(exp.dtype);
  if (got.dims != exp.dims) return "shape " + dims_str(got.dims) + ", expected " + dims_str(exp.dims);
  size_t n = size_t(numel(exp.dims));
  size_t es = dtype_size(exp.dtype);
  if (got.bytes.size() < n * es || exp.bytes.size() < n * es) return "buffer smaller than its shape";
  bool fp = exp.dtype == NXRT_DTYPE_FLOAT32 || exp.dtype == NXRT_DTYPE_FLOAT64 || exp.dtype == NXRT_DTYPE_FLOAT16 ||
            exp.dtype == NXRT_DTYPE_BFLOAT16;
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    bool ok;
    if (fp) {
      double g = as_double(got, i), e = as_double(exp, i);
      if (std::isnan(e) || std::isnan(g)) ok = std::isnan(e) && std::isnan(g);
      else if (std::isinf(e) || std::isinf(g)) ok = g == e;
      else {
        double d = std::fabs(g - e);
        ok = d <= atol + rtol * std::fabs(e);
        if (!ok && d > worst) worst = d;
      }
    } else {
      ok = std::memcmp(got.bytes.data() + i * es, exp.bytes.data() + i * es, es) == 0;
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (!bad) return "";
  std::string m = std::to_string(bad) + " of " + std::to_string(n) + " elements differ; first at " + std::to_string(first);
  if (fp) {
    char buf[160];
    std::snprintf(buf, sizeof buf, ": got %.9g, expected %.9g (max abs diff %.3g, rtol %g, atol %g)", as_double(got, first),
                  as_double(exp, first), worst, rtol, atol);
    m += buf;
  }
  return m;
}

AddRelu::AddRelu(std::vector<int64_t> d) : dims(d) {
  gb.graph().opsets[""] = 17;
  x = gb.value("X", NXRT_DTYPE_FLOAT32, dims);
  y = gb.value("Y", NXRT_DTYPE_FLOAT32, dims);
  t = gb.value("T", NXRT_DTYPE_FLOAT32, dims);
  z = gb.value("Z", NXRT_DTYPE_FLOAT32, dims);
  gb.node("Add", "", {x, y}, {t});
  gb.node("Relu", "", {t}, {z});
  gb.graph().inputs = {x, y};
  gb.graph().outputs = {z};
  in_x = make_f32(dims, 1);
  in_y = make_f32(dims, 2);
  expected = in_x;
  size_t n = size_t(numel(dims));
  for (size_t i = 0; i < n; ++i) {
    float a, b;
    std::memcpy(&a, &in_x.bytes[i * 4], 4);
    std::memcpy(&b, &in_y.bytes[i * 4], 4);
    float r = a + b;
    r = r > 0 ? r : 0;
    std::memcpy(&expected.bytes[i * 4], &r, 4);
  }
}

Pipeline::~Pipeline() {
  Phase ph("kernel_release");
  for (auto& st : steps_)
    if (st.k) s_.plugin().api().kernel_release(st.k);
}

void Pipeline::snapshot_constants() {
  constants_.clear();
  for (auto* n : gb_.graph().nodes)
    for (auto* v : n->inputs)
      if (v && v->constant) constants_[v] = checksum(v->data.data(), v->data.size());
}

std::string Pipeline::check_constants(const std::string& when) const {
  for (auto& [v, sum] : constants_)
    if (checksum(v->data.data(), v->data.size()) != sum)
      return when + " wrote to constant '" + v->name + "' (read-only data from value_constant / ctx_input)";
  return "";
}

std::string Pipeline::build() {
  snapshot_constants();
  Result r = s_.capability(gb_.graph(), sink_);
  if (!r.ok) return "get_capability failed: " + r.str();
  if (!sink_.violations.empty()) return "invalid claims: " + sink_.violations.front();
  for (auto& c : sink_.claims) {
    Step st;
    st.nodes = c;
    st.view = gb_.subgraph(c);
    st.created = gb_.owned_subgraph(c);
    nxrt_graph* seen = st.created->view.get();
    nxrt_kernel* k = nullptr;
    Result kr;
    {
      Phase ph("kernel_create");
      seen->creating = true;
      kr = take(s_.plugin().api().kernel_create(s_.raw(), seen, &k));
      seen->creating = false;
    }
    // Constants the kernel captured, as the host's own values (ctx_input gives them data = NULL).
    for (const nxrt_value* v : seen->captured) st.view->captured.insert(st.created->original.at(v));
    if (poison_views_) st.created->poison();
    if (k) st.k = k;
    std::string w = check_constants("kernel_create (" + gb_.graph().nodes[c.front()]->op_type + ")");
    if (!w.empty()) {
      steps_.push_back(std::move(st));
      return w;
    }
    if (!kr.ok) return "kernel_create for claimed node " + std::to_string(c.front()) + " failed: " + kr.str();
    if (!k) return "kernel_create returned success and a NULL kernel";
    steps_.push_back(std::move(st));
  }
  return "";
}

size_t Pipeline::claimed_nodes() const {
  size_t n = 0;
  for (auto& c : sink_.claims) n += c.size();
  return n;
}

namespace {
HostTensor host_reference(const nxrt_node* n, const std::map<const nxrt_value*, HostTensor>& vals) {
  const HostTensor& a = vals.at(n->inputs[0]);
  HostTensor r = a;
  size_t cnt = size_t(numel(a.dims));
  for (size_t i = 0; i < cnt; ++i) {
    float x;
    std::memcpy(&x, &a.bytes[i * 4], 4);
    if (n->op_type == "Add") {
      float y;
      std::memcpy(&y, &vals.at(n->inputs[1]).bytes[i * 4], 4);
      x = x + y;
    } else {
      x = x > 0 ? x : 0;
    }
    std::memcpy(&r.bytes[i * 4], &x, 4);
  }
  return r;
}
}  // namespace

std::string Pipeline::run(const std::map<const nxrt_value*, HostTensor>& inputs, std::vector<HostTensor>& out,
                          const ComputeOptions& o, std::vector<std::string>* violations, Result* kernel_status) {
  // A 2.0 host calls the run hooks of a plugin that declares them around every
  // run of its kernels, with a run id unique per run.
  const auto& api = s_.plugin().api();
  if (o.manual_run || !(s_.plugin().features() & NXRT_FEATURE_RUN_HOOKS) || !api.on_run_start || !api.on_run_end)
    return run_steps(inputs, out, o, violations, kernel_status);
  static std::atomic<uint64_t> next_run{1000};
  ComputeOptions ro = o;
  ro.run_id = next_run++;
  nxrt_run_options opts{};
  opts.struct_size = sizeof opts;
  opts.run_id = ro.run_id;
  Result r;
  {
    Phase ph("on_run_start");
    r = take(api.on_run_start(s_.raw(), &opts));
  }
  if (!r.ok) return "on_run_start failed: " + r.str() + (r.problem.empty() ? "" : " [" + r.problem + "]");
  std::string e = run_steps(inputs, out, ro, violations, kernel_status);
  nxrt_status* st = e.empty() ? nullptr : host_table_full()->status_create(NXRT_INTERNAL, 0, e.c_str());
  {
    Phase ph("on_run_end");
    r = take(api.on_run_end(s_.raw(), ro.run_id, st, nullptr));
  }
  if (st) {
    if (!is_live_status(st)) return e + " (and on_run_end released the run's status, which the host owns)";
    host_table_full()->status_release(st);
  }
  if (e.empty() && !r.ok) return "on_run_end failed: " + r.str() + (r.problem.empty() ? "" : " [" + r.problem + "]");
  return e;
}

std::string Pipeline::run_steps(const std::map<const nxrt_value*, HostTensor>& inputs, std::vector<HostTensor>& out,
                                const ComputeOptions& o, std::vector<std::string>* violations, Result* kernel_status) {
  std::map<const nxrt_value*, HostTensor> vals = inputs;
  for (auto* n : gb_.graph().nodes)
    for (auto* v : n->inputs)
      if (v && v->constant && !vals.count(v)) vals[v] = HostTensor{v->dtype, v->dims, v->data};
  std::set<size_t> done;
  for (auto* n : gb_.graph().nodes) {
    if (done.count(n->index)) continue;
    const Step* step = nullptr;
    for (auto& st : steps_)
      for (size_t i : st.nodes)
        if (i == n->index) step = &st;
    if (!step) {
      vals[n->outputs[0]] = host_reference(n, vals);
      done.insert(n->index);
      continue;
    }
    std::vector<HostTensor> ins;
    for (auto* v : step->view->inputs) {
      if (!vals.count(v)) return "internal: input " + v->name + " not computed";
      ins.push_back(vals[v]);
    }
    ComputeOptions so = o;
    so.view = step->view.get();
    ComputeResult cr = compute(s_, step->k, ins, step->view->outputs.size(), so);
    if (violations) violations->insert(violations->end(), cr.violations.begin(), cr.violations.end());
    if (kernel_status) *kernel_status = cr.status;
    if (!cr.status.ok)
      return "kernel_compute (" + n->op_type + ") failed: " + cr.status.str() +
             (cr.status.problem.empty() ? "" : " [" + cr.status.problem + "]");
    if (cr.input_written >= 0) {
      auto* v = step->view->inputs[size_t(cr.input_written)];
      return "kernel_compute (" + n->op_type + ") wrote to its input " + std::to_string(cr.input_written) + " ('" +
             (v ? v->name : std::string("?")) + "'), which is read-only: " + cr.input_written_detail;
    }
    {
      std::string w = check_constants("kernel_compute (" + n->op_type + ")");
      if (!w.empty()) return w;
    }
    if (!cr.problem.empty()) return cr.problem;
    if (!cr.out_of_bounds.empty()) return cr.out_of_bounds + " (" + n->op_type + ")";
    if (!cr.violations.empty()) return "kernel context misuse: " + cr.violations.front();
    for (size_t i = 0; i < step->view->outputs.size(); ++i) vals[step->view->outputs[i]] = cr.outputs[i];
    for (size_t i : step->nodes) done.insert(i);
  }
  out.clear();
  for (auto* v : gb_.graph().outputs) out.push_back(vals[v]);
  return "";
}

std::string run_add_relu_once(Session& s, const AddRelu& g, size_t* claimed) {
  Pipeline p(s, g.gb);
  std::string e = p.build();
  if (claimed) *claimed = p.claimed_nodes();
  if (!e.empty()) return e;
  std::vector<HostTensor> out;
  e = p.run({{g.x, g.in_x}, {g.y, g.in_y}}, out);
  if (!e.empty()) return e;
  return compare(out[0], g.expected);
}

}  // namespace conf
